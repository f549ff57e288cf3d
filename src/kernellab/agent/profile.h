/* KL_PROFILE: the kernel tick profiler's counters around the suite (profile.c). */
#ifndef KL_PROFILE_H
#define KL_PROFILE_H

#include <stdbool.h>

/* Clears /proc/profile's counters; false (and a t=na record) when it cannot. */
bool profile_reset(void);
/* Sends the nonzero counters as t=prof records. */
void profile_report(void);

#endif
