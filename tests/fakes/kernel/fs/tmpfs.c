// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>

FAKE_RODATA_KB(tmpfs_ops, 2);
