// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/slab.h>

extern const char linux_banner[];
void sched_init(void);

#if CONFIG_FAKE_DATA_KB > 0
FAKE_DATA_KB(fake_data, CONFIG_FAKE_DATA_KB);
#endif
#if CONFIG_FAKE_BSS_KB > 0
unsigned char fake_bss[CONFIG_FAKE_BSS_KB * 1024] __attribute__((used));
#endif

static struct list_head initcalls = { &initcalls, &initcalls };
static spinlock_t init_lock;

/* The ELF entry point of vmlinux: never run (the fake QEMU only reads the image). */
void start_kernel(void)
{
	static struct list_head first;

	spin_lock(&init_lock);
	list_add(&first, &initcalls);
	spin_unlock(&init_lock);
	sched_init();
	kmalloc(64);
	for (;;)
		__asm__ volatile("hlt" ::: "memory");
}
