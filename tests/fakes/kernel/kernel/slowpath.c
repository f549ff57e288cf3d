// SPDX-License-Identifier: GPL-2.0
/* CONFIG_FAKE_SLOW: 4 KiB more text, and a guest the fake QEMU makes 25% slower. */
#include <linux/compiler.h>

FAKE_RODATA_KB(slowpath_detours, 4);
