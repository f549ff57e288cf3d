// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>

FAKE_RODATA_KB(page_tables, 4);
#ifdef CONFIG_SHMEM
FAKE_RODATA_KB(shmem_ops, 1);
#endif
