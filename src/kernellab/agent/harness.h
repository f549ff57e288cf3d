/*
 * The timing harness (harness.c) and what a metric group gives it: a table
 * of struct metric, each with its setup, run and teardown functions.  Each
 * group keeps its own state (descriptors, buffers, helper processes) static
 * in its file; struct run carries only what passes between the harness and
 * the metric it is running.
 */
#ifndef KL_HARNESS_H
#define KL_HARNESS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "record.h"

#define MAX_REPEATS 1000
#define SLOW_REPEATS 3 /* the most samples of slow metrics: idle windows, disk passes */

struct options {
	long repeats;
	long target_us;
	const char *only;      /* comma-separated metric names; NULL means all */
	const char *with;      /* comma-separated opt-in tables to run too (net) */
	long idle_ms;
	const char *block_dev; /* NULL: no scratch disk */
	long block_mb;
	long alloc_cap_mb;
	long profile;          /* KL_PROFILE: 1 sends the tick profiler's counters */
	const char *workloads; /* the workloads file (workload.c); NULL: none */
};

enum kind {
	LATENCY,   /* ns per operation */
	BANDWIDTH, /* MB/s, from .bytes moved per operation */
	REPORTED,  /* run() measures the value itself into run.value, once per sample */
};

/* One metric's run: what the harness hands its functions and what they hand back. */
struct run {
	const struct metric *metric; /* the one running; run functions read its param */
	const struct options *opt;
	const char *workdir;
	char reason[96];   /* why the metric failed; first failure wins */
	int64_t timed_ns;  /* self-timed metrics: what run() timed */
	double value;      /* REPORTED metrics: what run() measured */
	double twin_value; /* ... and for the metric's twin */
};

/*
 * LATENCY and BANDWIDTH metrics run() `iters` operations, calibrated so a
 * sample lasts about KL_TARGET_US.  The harness times the whole call,
 * unless the metric is self_timed: then run() times only the part that
 * matters (creates but not deletes, faults but not mmap) into run.timed_ns.
 *
 * A REPORTED metric may have a twin: a second metric, with the same unit,
 * whose value each run() measures too, into run.twin_value, because the two
 * must come from the same measurement (timer and all interrupts in one idle
 * window).  The pair runs if either is selected and reports what is.
 */
struct metric {
	const char *name;
	const char *twin;        /* REPORTED only; NULL: none */
	enum kind kind;
	const char *unit;        /* REPORTED only: LATENCY is ns, BANDWIDTH MB/s */
	uint64_t bytes;          /* BANDWIDTH: bytes moved per operation */
	bool self_timed;
	long max_repeats;        /* 0: KL_REPEATS; else at most this many */
	long param[2];           /* metric-specific, see the run function */
	int (*setup)(struct run *);                    /* optional; 0 or -errno */
	int (*run)(struct run *, unsigned long iters); /* 0 or -errno */
	int (*teardown)(struct run *);                 /* optional; runs iff setup succeeded */
};

/* A group's metrics, in the order they run. */
struct metric_table {
	const struct metric *metric;
	size_t count;
	const char *with; /* opt-in: runs only when KL_WITH names it (or KL_ONLY its metrics) */
	bool fine_timers; /* its windows sleep to deadlines: wait_for_fine_timers() first */
};

#define METRIC_TABLE(array) { array, sizeof(array) / sizeof((array)[0]), NULL, false }
#define OPT_IN_TABLE(array, word) { array, sizeof(array) / sizeof((array)[0]), word, false }
/* A table of timed windows; word: NULL, or opt-in as in OPT_IN_TABLE. */
#define FINE_TIMER_TABLE(array, word) { array, sizeof(array) / sizeof((array)[0]), word, true }

/*
 * The groups' tables, by file (a file has several where its metrics are
 * not neighbours in the suite); main.c says in which order they run.
 */
extern const struct metric_table syscall_metrics;       /* syscall.c: syscall.*, signal.* */
extern const struct metric_table ipc_latency_metrics;   /* ipc.c: ipc.* */
extern const struct metric_table ctx_metrics;           /* ipc.c: ctx.* */
extern const struct metric_table ipc_bandwidth_metrics; /* ipc.c: bw.pipe, bw.unix, bw.tcp */
extern const struct metric_table proc_metrics;          /* proc.c: proc.* */
extern const struct metric_table fs_metrics;            /* fs.c: fs.*, mm.* */
extern const struct metric_table mem_bandwidth_metrics; /* mem.c: bw.mem_* */
extern const struct metric_table mem_alloc_metrics;     /* mem.c: mem.alloc_max */
extern const struct metric_table crypto_metrics;        /* crypto.c: crypto.* */
extern const struct metric_table irq_metrics;           /* irq.c: irq.* */
extern const struct metric_table latency_metrics;       /* latency.c: lat.timer_* */
extern const struct metric_table net_metrics;           /* net.c: net.* (opt-in: KL_WITH=net) */
extern const struct metric_table blk_metrics;           /* blk.c: blk.* */
extern const struct metric_table file_metrics;          /* file.c: file.* */
extern const struct metric_table sysfs_metrics;         /* sysfs.c: sysfs.* (after meminfo) */

/* Not a timed metric, but selectable with KL_ONLY like one. */
#define MEMINFO "meminfo"

/*
 * Inline, as it was when the agent was one file: the self-timed metrics
 * read the clock inside their runs, and an out-of-line call there would
 * add to what they time.
 */
static inline int64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
		die("clock_gettime: %s", strerror(errno));
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * fail() and fail_because() are inline, as GCC inlined them when the agent
 * was one file: even on a loop's error path an out-of-line call changes
 * how GCC allocates the loop's registers, and so what it runs per op.
 */

/* Records the failing call in r->reason and returns -errno. */
static inline int fail(struct run *r, const char *call)
{
	int err = errno ? errno : EIO; /* a failure must never read as success */

	if (!r->reason[0])
		snprintf(r->reason, sizeof(r->reason), "%s_failed_errno_%d", call, err);
	return -err;
}

/* Records a failure that has no errno behind it. */
static inline int fail_because(struct run *r, const char *reason)
{
	if (!r->reason[0])
		snprintf(r->reason, sizeof(r->reason), "%s", reason);
	return -EIO;
}

/* Measures the costs taken out of samples and reports them in t=meta records. */
void measure_overheads(void);
/*
 * Waits, in the first seconds of uptime only, until the timers have high
 * resolution, and reports in t=meta key=fine_timers.GROUP what resolution it
 * got after how long.  The suite calls it before the first metric of a
 * table marked fine_timers (FINE_TIMER_TABLE).
 */
void wait_for_fine_timers(const struct metric_table *t);
/* Runs one metric (and its twin) and reports its samples, or why there are none. */
void run_metric(const struct metric *m, const struct options *o, const char *workdir);
/* Whether name is one of the comma-separated names in only (NULL: all). */
int selected(const char *only, const char *name);
/* Whether m runs: it or its twin is selected. */
bool wanted(const char *only, const struct metric *m);
/* Reports the names in only that are neither a metric in the tables nor MEMINFO. */
void report_unknown_names(const char *only, const struct metric_table *const *tables,
			  size_t count);

#endif
