// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>

static spinlock_t logbuf_lock;
unsigned char log_buf[16 * 1024];
FAKE_RODATA_KB(printk_formats, 2);
#ifdef CONFIG_PRINTK_TIME
int printk_time = 1;
#endif

int printk(const char *fmt)
{
	spin_lock(&logbuf_lock);
	log_buf[0] = (unsigned char)fmt[0];
	spin_unlock(&logbuf_lock);
	return 0;
}
