// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/slab.h>

static spinlock_t tasklist_lock;
static struct list_head tasks = { &tasks, &tasks };

FAKE_RODATA_KB(fork_tables, 3);

noinline long kernel_clone(void)
{
	struct list_head *task = kmalloc(sizeof(*task));

	spin_lock(&tasklist_lock);
	list_add(task, &tasks);
	spin_unlock(&tasklist_lock);
#ifdef CONFIG_MULTIUSER
	/* credentials: copied per task */
#endif
#ifdef CONFIG_FUTEX
	/* robust futex list: cleared per task */
#endif
	return 1;
}
