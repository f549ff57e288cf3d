/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _LINUX_LIST_H
#define _LINUX_LIST_H

/* Included by nearly every object, as in Linux: CONFIG_DEBUG_LIST rebuilds them all. */
struct list_head {
	struct list_head *next, *prev;
};

#ifdef CONFIG_DEBUG_LIST
int __list_add_valid(struct list_head *new, struct list_head *prev, struct list_head *next);
#else
static inline int __list_add_valid(struct list_head *new, struct list_head *prev,
				   struct list_head *next)
{
	(void)new; (void)prev; (void)next;
	return 1;
}
#endif

static inline void list_add(struct list_head *new, struct list_head *head)
{
	if (!__list_add_valid(new, head, head->next))
		return;
	head->next->prev = new;
	new->next = head->next;
	new->prev = head;
	head->next = new;
}

#endif
