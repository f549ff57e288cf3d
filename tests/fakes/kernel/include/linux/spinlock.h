/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _LINUX_SPINLOCK_H
#define _LINUX_SPINLOCK_H

typedef struct {
	volatile int locked;
#ifdef CONFIG_DEBUG_SPINLOCK
	unsigned int magic, owner_cpu;
#endif
#ifdef CONFIG_LOCKDEP
	const void *lock_class;
#endif
} spinlock_t;

#ifdef CONFIG_LOCKDEP
void lock_acquire(spinlock_t *lock);
#else
static inline void lock_acquire(spinlock_t *lock) { (void)lock; }
#endif

static inline void spin_lock(spinlock_t *lock)
{
	lock_acquire(lock);
	while (__atomic_exchange_n(&lock->locked, 1, __ATOMIC_ACQUIRE))
		;
}

static inline void spin_unlock(spinlock_t *lock)
{
	__atomic_store_n(&lock->locked, 0, __ATOMIC_RELEASE);
}

#endif
