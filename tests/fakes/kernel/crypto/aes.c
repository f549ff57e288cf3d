// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>

FAKE_RODATA_KB(aes_tables, 8);
#ifdef CONFIG_CRYPTO_CBC
FAKE_RODATA_KB(cbc_mode, 1);
#endif
