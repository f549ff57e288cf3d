// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>

int __list_add_valid(struct list_head *new, struct list_head *prev, struct list_head *next)
{
	return next->prev == prev && prev->next == next && new != prev && new != next;
}
