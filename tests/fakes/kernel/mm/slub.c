// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/slab.h>

static unsigned char slab_arena[32 * 1024];
static unsigned long slab_used;
FAKE_RODATA_KB(slub_caches, 6);
#ifdef CONFIG_SLUB_DEBUG
FAKE_RODATA_KB(slub_debug_code, 3);
#endif

void *kmalloc(unsigned long size)
{
#ifdef CONFIG_SLUB_DEBUG_ON
	size += 32; /* red zones */
#endif
	slab_used += size;
	return &slab_arena[slab_used % sizeof(slab_arena)];
}
