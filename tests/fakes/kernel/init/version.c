// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>

#ifdef CONFIG_64BIT
#define FAKE_BITS "64"
#else
#define FAKE_BITS "32"
#endif

const char linux_banner[] __attribute__((used)) = "Linux version (fake, " FAKE_BITS "-bit)\n";
