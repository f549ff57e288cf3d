/*
 * lat.timer_*: timer wakeup latency, as cyclictest measures it: a thread at
 * real-time priority sleeps to absolute deadlines one interval apart and
 * records how late it woke, while a load of two ordinary (SCHED_OTHER)
 * processes copies 64 KiB through a pipe, spending its time in the kernel.
 * How late the thread wakes is how long the kernel keeps it from running: the
 * preemption model (PREEMPT_NONE, VOLUNTARY, full) decides whether a wakeup
 * waits for the load's system call to end.  Each sample is one window of WAKEUPS; the
 * median, the 99th percentile and the maximum are reported.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* every unit agrees on off_t (32-bit targets) */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "record.h"

#define WAKEUPS 250
#define INTERVAL_NS 1000000L /* 1 ms, cyclictest's default */
#define LOAD_CHUNK (64 * 1024)
#define RT_PRIORITY 80        /* cyclictest -p 80 */

static pid_t load[2] = { -1, -1 };
static struct sched_param saved_param;
static int saved_policy = -1;

static void load_loop(int fd, int writer)
{
	static char buf[LOAD_CHUNK];

	memset(buf, 0x5a, sizeof(buf));
	for (;;) {
		ssize_t n = writer ? write(fd, buf, sizeof(buf)) : read(fd, buf, sizeof(buf));

		if (n <= 0 && errno != EINTR)
			_exit(0);
	}
}

static int start_load(struct run *r)
{
	int fds[2];

	if (pipe(fds) != 0)
		return fail(r, "pipe");
	for (int i = 0; i < 2; i++) {
		load[i] = fork();
		if (load[i] < 0)
			return fail(r, "fork");
		if (load[i] == 0) {
			close(fds[i == 0 ? 0 : 1]);
			load_loop(fds[i == 0 ? 1 : 0], i == 0);
		}
	}
	close(fds[0]);
	close(fds[1]);
	return 0;
}

static void stop_load(void)
{
	for (int i = 0; i < 2; i++) {
		if (load[i] > 0) {
			kill(load[i], SIGKILL);
			waitpid(load[i], NULL, 0);
		}
		load[i] = -1;
	}
}

static int setup_latency(struct run *r)
{
	struct sched_param rt = { .sched_priority = RT_PRIORITY };
	int err;

	/* The suite waited for fine timers first (FINE_TIMER_TABLE). */

	/*
	 * The load is forked first: a child of a SCHED_FIFO thread is SCHED_FIFO at the
	 * same priority, which the thread cannot preempt, and with real-time tasks always
	 * running the kernel's RT throttling (950 ms of each second) stopped them all, the
	 * thread too: on 6.1 one window in three woke ~49 ms late.
	 */
	err = start_load(r);
	if (err) {
		stop_load();
		return err;
	}
	saved_policy = sched_getscheduler(0);
	sched_getparam(0, &saved_param);
	if (sched_setscheduler(0, SCHED_FIFO, &rt) != 0) {
		stop_load();
		saved_policy = -1;
		return fail(r, "sched_setscheduler");
	}
	return 0;
}

static int teardown_latency(struct run *r)
{
	(void)r;
	stop_load();
	if (saved_policy >= 0)
		sched_setscheduler(0, saved_policy, &saved_param);
	return 0;
}

static int compare_ns(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* One window: how late each of WAKEUPS absolute-deadline sleeps woke, sorted. */
static int window(struct run *r, int64_t *late)
{
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	for (int i = 0; i < WAKEUPS; i++) {
		int err;

		next.tv_nsec += INTERVAL_NS;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		while ((err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL)) == EINTR)
			;
		if (err) {
			errno = err;
			return fail(r, "clock_nanosleep");
		}
		late[i] = now_ns() - ((int64_t)next.tv_sec * 1000000000 + next.tv_nsec);
	}
	qsort(late, WAKEUPS, sizeof(late[0]), compare_ns);
	return 0;
}

/* lat.timer_p99 and its twin lat.timer_max: the tail of one window. */
static int run_tail(struct run *r, unsigned long iters)
{
	int64_t late[WAKEUPS];

	int err = window(r, late);

	(void)iters;
	if (err)
		return err;
	r->value = (double)late[WAKEUPS * 99 / 100];
	r->twin_value = (double)late[WAKEUPS - 1];
	return 0;
}

/* lat.timer_p50: the median of one window. */
static int run_median(struct run *r, unsigned long iters)
{
	int64_t late[WAKEUPS];

	int err = window(r, late);

	(void)iters;
	if (err)
		return err;
	r->value = (double)late[WAKEUPS / 2];
	return 0;
}

static const struct metric metrics[] = {
	{ .name = "lat.timer_p50", .kind = REPORTED, .unit = "ns", .max_repeats = SLOW_REPEATS,
	  .setup = setup_latency, .run = run_median, .teardown = teardown_latency },
	{ .name = "lat.timer_p99", .twin = "lat.timer_max", .kind = REPORTED, .unit = "ns",
	  .max_repeats = SLOW_REPEATS, .setup = setup_latency, .run = run_tail, .teardown = teardown_latency },
};

const struct metric_table latency_metrics = FINE_TIMER_TABLE(metrics, NULL);
