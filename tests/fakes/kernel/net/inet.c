// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>

FAKE_RODATA_KB(tcp_ops, 24);
