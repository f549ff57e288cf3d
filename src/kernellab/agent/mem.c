/*
 * bw.mem_* and mem.alloc_max: memory bandwidth, as lmbench bw_mem (and of
 * one process per CPU together), and how much memory one process gets.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#define MEM_BYTES (8 * MIB) /* bw.mem_*: bigger than most L2 caches */

static void *buf[2]; /* bw.mem_*: the buffers; NULL when freed */

/*
 * noipa: GCC may neither drop nor hoist calls to these, as it could if it
 * saw that a buffer is never read.
 */
static void __attribute__((noipa)) fill_words(unsigned long *w, size_t n, unsigned long v)
{
	for (size_t i = 0; i < n; i++)
		w[i] = v;
}

static void __attribute__((noipa)) copy_bytes(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

static int alloc_mem_buffers(struct run *r)
{
	return alloc_buffers(r, buf, MEM_BYTES);
}

static int free_mem_buffers(struct run *r)
{
	(void)r;
	free_buffers(buf);
	return 0;
}

/* bw.mem_read: op = summing the buffer's words. */
static int run_mem_read(struct run *r, unsigned long iters)
{
	(void)r;
	for (unsigned long i = 0; i < iters; i++)
		sink = sum_words(buf[0], MEM_BYTES / sizeof(unsigned long));
	return 0;
}

/* bw.mem_write: op = storing every word of the buffer. */
static int run_mem_write(struct run *r, unsigned long iters)
{
	(void)r;
	for (unsigned long i = 0; i < iters; i++)
		fill_words(buf[0], MEM_BYTES / sizeof(unsigned long), i);
	return 0;
}

/* bw.mem_copy: op = memcpy of the buffer, counted as MEM_BYTES moved. */
static int run_mem_copy(struct run *r, unsigned long iters)
{
	(void)r;
	for (unsigned long i = 0; i < iters; i++)
		copy_bytes(buf[1], buf[0], MEM_BYTES);
	return 0;
}

#define PARALLEL_PASSES 16 /* bw.mem_parallel: copies of its buffer each process makes */
#define MAX_PARALLEL 64

/* A process of bw.mem_parallel: its own buffers, ready, then copies at the go. */
static void parallel_copier(int ready, int go)
{
	char *a = malloc(MEM_BYTES), *b = malloc(MEM_BYTES), c;

	if (!a || !b)
		_exit(1);
	memset(a, 1, MEM_BYTES);
	memset(b, 2, MEM_BYTES);
	if (write(ready, "r", 1) != 1 || read(go, &c, 1) != 1)
		_exit(1);
	for (int i = 0; i < PARALLEL_PASSES; i++)
		copy_bytes(b, a, MEM_BYTES);
	_exit(0);
}

/*
 * bw.mem_parallel: one process per online CPU, each copying a buffer of its
 * own, MB/s of them all from the moment all are ready to the last one's end:
 * the memory-bound parallel workload of seed 004 (dbench's scaling with the
 * number of CPUs).  A single CPU gives bw.mem_copy's figure, with the start
 * and end of a process in it.
 */
static int run_mem_parallel(struct run *r, unsigned long iters)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int ready[2], go[2], n, started = 0, err = 0, status;
	char gos[MAX_PARALLEL];
	int64_t t0;

	(void)iters;
	n = cpus < 1 ? 1 : cpus > MAX_PARALLEL ? MAX_PARALLEL : (int)cpus;
	if (pipe(ready) != 0)
		return fail(r, "pipe");
	if (pipe(go) != 0) {
		err = fail(r, "pipe");
		goto close_ready;
	}
	for (; started < n; started++) {
		pid_t pid = fork();

		if (pid < 0) {
			err = fail(r, "fork");
			break;
		}
		if (pid == 0)
			parallel_copier(ready[1], go[0]);
	}
	for (int i = 0; i < started && !err; i++) {
		char c;

		if (read(ready[0], &c, 1) != 1)
			err = fail(r, "read");
	}
	memset(gos, 'g', sizeof(gos));
	t0 = now_ns();
	if (write(go[1], gos, (size_t)started) != started && !err)
		err = fail(r, "write");
	for (int i = 0; i < started; i++)
		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			err = err ? err : fail_because(r, "a_copier_failed");
	if (!err)
		r->value = (double)started * PARALLEL_PASSES * MEM_BYTES * 1e3 / (double)(now_ns() - t0);
	close(go[0]);
	close(go[1]);
close_ready:
	close(ready[0]);
	close(ready[1]);
	return err;
}

/* The child of mem.alloc_max; returns its exit status. */
static int alloc_until_refused(int out, long cap_mb)
{
	for (long mb = 0; mb < cap_mb; mb++) {
		volatile char *chunk = malloc(MIB);

		if (!chunk)
			return 0;
		for (size_t off = 0; off < MIB; off += system_page_size)
			chunk[off] = 1;
		if (write(out, "", 1) != 1)
			return errno;
	}
	return 0;
}

/*
 * mem.alloc_max, in MiB: how much memory one process gets.  A child mallocs
 * 1 MiB chunks and writes every page of each, then one byte to a pipe, until
 * malloc fails or the OOM killer ends it; the bytes that came through the
 * pipe are the MiB it got.  Reaching KL_ALLOC_CAP_MB (local mode: 64, so as
 * not to push a real machine into reclaim) is no measurement: it fails with
 * that reason.  Slow (it touches all of memory), so at most SLOW_REPEATS
 * samples.
 */
static int run_alloc_max(struct run *r, unsigned long iters)
{
	char tokens[256];
	int p[2], status, waited, err = 0;
	long got = 0;
	pid_t pid;

	(void)iters;
	if (pipe2(p, O_CLOEXEC) < 0)
		return fail(r, "pipe");
	pid = fork();
	if (pid < 0) {
		err = fail(r, "fork");
		close_end(p[0], p[1]);
		return err;
	}
	if (pid == 0) {
		if (close(p[0]) < 0)
			_exit(errno);
		_exit(alloc_until_refused(p[1], r->opt->alloc_cap_mb));
	}
	if (close(p[1]) < 0)
		err = fail(r, "close");
	while (!err) {
		ssize_t n = read(p[0], tokens, sizeof(tokens));

		if (n == 0)
			break;
		if (n > 0)
			got += n;
		else if (errno != EINTR)
			err = fail(r, "read");
	}
	/* Closed before waiting, so a child still writing gets EPIPE, not stuck. */
	if (close(p[0]) < 0 && !err)
		err = fail(r, "close");
	waited = wait_child(r, pid, &status);
	if (!err)
		err = waited;
	/* The OOM killer's SIGKILL is one of the normal ends. */
	if (!err && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
		err = check_exit(r, status, "alloc_child");
	/* Stopped by the cap, not by the kernel: a lower bound, no measurement. */
	if (!err && got >= r->opt->alloc_cap_mb)
		err = fail_because(r, "reached_KL_ALLOC_CAP_MB");
	r->value = (double)got;
	return err;
}

#define MEM_BW(metric_name, run_fn)                                                     \
	{ .name = metric_name, .kind = BANDWIDTH, .bytes = MEM_BYTES,                    \
	  .setup = alloc_mem_buffers, .run = run_fn, .teardown = free_mem_buffers }

static const struct metric bandwidth[] = {
	MEM_BW("bw.mem_read", run_mem_read),
	MEM_BW("bw.mem_write", run_mem_write),
	MEM_BW("bw.mem_copy", run_mem_copy),
	{ .name = "bw.mem_parallel", .kind = REPORTED, .unit = "MB/s", .max_repeats = SLOW_REPEATS,
	  .run = run_mem_parallel },
};

static const struct metric alloc[] = {
	{ .name = "mem.alloc_max", .kind = REPORTED, .unit = "MiB", .max_repeats = SLOW_REPEATS,
	  .run = run_alloc_max },
};

const struct metric_table mem_bandwidth_metrics = METRIC_TABLE(bandwidth);
const struct metric_table mem_alloc_metrics = METRIC_TABLE(alloc);
