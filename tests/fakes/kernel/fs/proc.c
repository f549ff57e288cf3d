// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>

FAKE_RODATA_KB(proc_ops, 3);
#ifdef CONFIG_PROC_SYSCTL
FAKE_RODATA_KB(sysctl_tables, 2);
#endif
