// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>

FAKE_RODATA_KB(serial8250_ops, 3);
#ifdef CONFIG_SERIAL_8250_CONSOLE
FAKE_RODATA_KB(serial8250_console, 1);
#endif
