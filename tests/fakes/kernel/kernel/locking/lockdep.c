// SPDX-License-Identifier: GPL-2.0
/* CONFIG_LOCKDEP (selected by PROVE_LOCKING): big static tables, as the real one. */
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>

FAKE_RODATA_KB(lockdep_states, 12);
unsigned long lock_classes[8192];
unsigned long lock_chains[8192];

void lock_acquire(spinlock_t *lock)
{
	lock->lock_class = &lock_classes[(unsigned long)lock % 8192];
}
