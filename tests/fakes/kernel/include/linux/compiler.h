/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _LINUX_COMPILER_H
#define _LINUX_COMPILER_H

/*
 * The fake tree's objects are mostly bulk for the size rows: a table of n KiB of
 * read-only data counts as text (Berkeley `size`), an initialized array as data.
 */
#define FAKE_RODATA_KB(name, kib) \
	const unsigned char name[(kib) * 1024] __attribute__((used)) = { 1 }
#define FAKE_DATA_KB(name, kib) \
	unsigned char name[(kib) * 1024] __attribute__((used)) = { 1 }

/* Work a change of the code adds, as the fake QEMU measures it: FAKE_COST(name, "syscall.null=1.10"). */
#define FAKE_COST(name, what) \
	const char name[] __attribute__((used)) = "FAKE-COST " what

#define noinline __attribute__((noinline))

#endif
