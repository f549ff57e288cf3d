// SPDX-License-Identifier: GPL-2.0
/* CONFIG_FAKE_BROKEN: a driver that does not compile, for the build-error path. */
#include <linux/compiler.h>

int fake_broken_probe(void)
{
	return fake_broken_helper_that_does_not_exist(42);
}
