/*
 * The timing harness: measures its own overheads, calibrates each metric's
 * iterations to KL_TARGET_US, takes the repeats, subtracts the overheads
 * and reports the samples; and KL_ONLY's selection.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "record.h"

#define MAX_ITERS (1UL << 24)

/* Costs taken out of latency samples, measured once per run. */
static struct {
	int64_t clock_ns; /* the pair of clock reads around a sample */
	double loop_ns;   /* one iteration of a loop around a call */
} overhead;

static int64_t clock_overhead_ns(void)
{
	int64_t best = INT64_MAX;

	for (int i = 0; i < 16; i++) {
		int64_t t0 = now_ns();
		int64_t t = now_ns() - t0;

		if (t < best)
			best = t;
	}
	return best;
}

static void __attribute__((noipa)) nothing(void)
{
}

/* The metrics' loops call a function per operation: time that with an empty one. */
static double loop_overhead_ns(void)
{
	const unsigned long n = 1UL << 14;
	int64_t best = INT64_MAX;

	for (int i = 0; i < 16; i++) {
		int64_t t0 = now_ns();

		for (unsigned long k = 0; k < n; k++)
			nothing();
		int64_t t = now_ns() - t0 - overhead.clock_ns;

		if (t < best)
			best = t;
	}
	return best > 0 ? (double)best / (double)n : 0;
}

void measure_overheads(void)
{
	overhead.clock_ns = clock_overhead_ns();
	overhead.loop_ns = loop_overhead_ns();
	emit("t=meta key=clock_overhead_ns value=%lld", (long long)overhead.clock_ns);
	emit("t=meta key=loop_overhead_ns value=%.3f", overhead.loop_ns);
}

#define FINE_TIMER_NS 1000L /* high-resolution timers report 1 ns */
#define FINE_TIMER_WAIT_S 5 /* of uptime, after which the timers are what they are */

static int64_t boottime_ns(void)
{
	struct timespec up;

	if (clock_gettime(CLOCK_BOOTTIME, &up) < 0)
		return -1;
	return (int64_t)up.tv_sec * 1000000000 + up.tv_nsec;
}

static int64_t timer_resolution_ns(void)
{
	struct timespec res;

	if (clock_getres(CLOCK_MONOTONIC, &res) < 0)
		return -1;
	return (int64_t)res.tv_sec * 1000000000 + res.tv_nsec;
}

/*
 * When the agent starts, an x86 guest's timers are still tick-based
 * (clock_getres says 4 ms at HZ 250): a window that sleeps to deadlines then
 * wakes on ticks, and the first lat.* window woke ~0.4 s late at its median,
 * as a bisect's probe (only those metrics) measured it.  Every such group
 * waits for the same condition: high resolution, but only in the first
 * seconds, so a kernel without it measures what it has.
 */
void wait_for_fine_timers(const struct metric_table *t)
{
	const struct timespec pause = { 0, 10 * 1000 * 1000 };
	const char *name = t->metric[0].name;
	int64_t start = boottime_ns(), up = start, res;

	while ((res = timer_resolution_ns()) > FINE_TIMER_NS && up >= 0 &&
	       up < FINE_TIMER_WAIT_S * 1000000000LL) {
		nanosleep(&pause, NULL);
		up = boottime_ns();
	}
	emit("t=meta key=fine_timers.%.*s value=res_%lldns_after_%lldms", (int)strcspn(name, "."), name,
	     (long long)res, (long long)(up > start ? (up - start) / 1000000 : 0));
}

/*
 * Doubles iters until the interval a sample uses (the whole run, or the
 * part a self-timed run timed) reaches the target, so timer resolution is
 * noise.  A self-timed metric may time only a small part of its run (a ring
 * whose switches cost little), so a run of CALIBRATE_CAP targets ends it too.
 */
#define CALIBRATE_CAP 8

static int calibrate(const struct metric *m, struct run *r, int64_t target_ns,
		     unsigned long *iters)
{
	for (unsigned long n = 1;; n *= 2) {
		int64_t t0 = now_ns();
		int err = m->run(r, n);
		int64_t wall = now_ns() - t0;
		int64_t timed = m->self_timed ? r->timed_ns : wall;

		if (err)
			return err;
		if (timed >= target_ns || wall >= CALIBRATE_CAP * target_ns || n >= MAX_ITERS) {
			*iters = n;
			return 0;
		}
	}
}

/*
 * One sample.  The interval is what a self-timed run() timed, otherwise the
 * whole call less the clock reads and, for latencies, less the loop around
 * the operations; at least 1 ns, so a bandwidth is always finite.
 */
static int sample(const struct metric *m, struct run *r, unsigned long iters, double *value)
{
	int64_t t0, ns;
	int err;

	if (m->kind == REPORTED) {
		err = m->run(r, iters);
		*value = r->value;
		return err;
	}
	t0 = now_ns();
	err = m->run(r, iters);
	ns = now_ns() - t0 - overhead.clock_ns;
	if (m->self_timed)
		ns = r->timed_ns;
	else if (m->kind == LATENCY)
		ns -= (int64_t)((double)iters * overhead.loop_ns);
	if (ns < 1)
		ns = 1;
	if (m->kind == LATENCY)
		*value = (double)ns / (double)iters;
	else /* bytes per ns are GB/s */
		*value = (double)m->bytes * (double)iters * 1e3 / (double)ns;
	return err;
}

static const char *unit_of(const struct metric *m)
{
	switch (m->kind) {
	case LATENCY:
		return "ns";
	case BANDWIDTH:
		return "MB/s";
	case REPORTED:
		break;
	}
	return m->unit;
}

int selected(const char *only, const char *name)
{
	size_t len = strlen(name);

	if (!only)
		return 1;
	for (const char *p = only;; ) {
		const char *end = strchrnul(p, ',');

		if ((size_t)(end - p) == len && memcmp(p, name, len) == 0)
			return 1;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

bool wanted(const char *only, const struct metric *m)
{
	return selected(only, m->name) || (m->twin && selected(only, m->twin));
}

/*
 * The records of a metric and of its twin, if selected: each sample from
 * value[0] and value[1], or one na each if reason is not NULL.
 */
static void report(const struct metric *m, const char *only, const char *reason, long repeats,
		   unsigned long iters, double value[2][MAX_REPEATS])
{
	const char *names[2] = { m->name, m->twin };

	for (int i = 0; i < 2; i++) {
		if (!names[i] || !selected(only, names[i]))
			continue;
		if (reason) {
			emit("t=na metric=%s reason=%s", names[i], reason);
			continue;
		}
		for (long rep = 0; rep < repeats; rep++)
			emit("t=sample metric=%s unit=%s rep=%ld iters=%lu value=%.3f",
			     names[i], unit_of(m), rep, iters, value[i][rep]);
	}
}

void run_metric(const struct metric *m, const struct options *o, const char *workdir)
{
	/*
	 * Samples are held back until teardown succeeds, so a metric gets
	 * either all its samples or one na record.  value[1] is the twin's.
	 */
	double value[2][MAX_REPEATS];
	long repeats = m->max_repeats && m->max_repeats < o->repeats ? m->max_repeats : o->repeats;
	unsigned long iters = 1;
	struct run r = { .metric = m, .opt = o, .workdir = workdir };
	int err = 0;

	if (m->setup && m->setup(&r) < 0) {
		report(m, o->only, r.reason, 0, 0, value);
		return;
	}
	/*
	 * A reported value is one measurement.  Other metrics first run one
	 * op, so helper start-up and cold caches do not fool the calibration;
	 * its last run, at full size, is the warm-up (caches, TLB, page tables).
	 */
	if (m->kind != REPORTED) {
		err = m->run(&r, 1);
		if (!err)
			err = calibrate(m, &r, (int64_t)o->target_us * 1000, &iters);
	}
	for (long rep = 0; !err && rep < repeats; rep++) {
		err = sample(m, &r, iters, &value[0][rep]);
		value[1][rep] = r.twin_value;
	}
	if (m->teardown) {
		int torn = m->teardown(&r);

		if (!err)
			err = torn;
	}
	report(m, o->only, err ? r.reason : NULL, repeats, iters, value);
}

/* Whether the len bytes at name are m's name or its twin's. */
static bool is_named(const struct metric *m, const char *name, size_t len)
{
	return (strlen(m->name) == len && memcmp(name, m->name, len) == 0) ||
	       (m->twin && strlen(m->twin) == len && memcmp(name, m->twin, len) == 0);
}

/* A typo in KL_ONLY would otherwise look like a metric that silently vanished. */
void report_unknown_names(const char *only, const struct metric_table *const *tables,
			  size_t count)
{
	char name[64];

	for (const char *p = only; p && *p; ) {
		size_t len = strcspn(p, ",");
		int known = len == strlen(MEMINFO) && memcmp(p, MEMINFO, len) == 0;

		for (size_t t = 0; !known && t < count; t++)
			for (size_t i = 0; !known && i < tables[t]->count; i++)
				known = is_named(&tables[t]->metric[i], p, len);
		if (!known && len > 0) {
			snprintf(name, sizeof(name), "%.*s", (int)len, p);
			emit("t=na metric=%s reason=unknown_metric", sanitize(name));
		}
		p += len + (p[len] == ',');
	}
}
