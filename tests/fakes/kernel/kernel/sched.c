// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>

static spinlock_t rq_lock;
static struct list_head runqueue = { &runqueue, &runqueue };
unsigned long tick_period_ns = 1000000000UL / CONFIG_HZ;

#ifdef CONFIG_NO_HZ_IDLE
FAKE_RODATA_KB(nohz_tables, 2);
#endif
#ifdef CONFIG_HIGH_RES_TIMERS
FAKE_RODATA_KB(hrtimer_tables, 1);
#endif

#ifdef CONFIG_DEBUG_ATOMIC_SLEEP
int preempt_count_checks = 1;
#endif

void sched_init(void)
{
	static struct list_head idle;

	spin_lock(&rq_lock);
	list_add(&idle, &runqueue);
	spin_unlock(&rq_lock);
}
