/*
 * blk.*: sequential I/O on a scratch disk (KL_BLOCK_DEV, overwritten!),
 * O_DIRECT and through the page cache.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pid1.h"
#include "record.h"
#include "util.h"

#define BLOCK_REQ MIB /* blk.*: bytes per request */

static int disk = -1; /* the scratch disk, or a file standing in for it */
static void *request; /* one request's buffer, aligned for O_DIRECT; NULL when freed */

static int close_scratch(struct run *r)
{
	free(request);
	request = NULL;
	return close_fd(r, &disk);
}

/* Opens the scratch disk and allocates one request buffer aligned for O_DIRECT. */
static int open_scratch(struct run *r, int flags)
{
	uint64_t region = (uint64_t)r->opt->block_mb * BLOCK_REQ;
	off_t size;
	int err = 0;

	if (!r->opt->block_dev)
		return fail_because(r, "no_scratch_disk");
	disk = open(r->opt->block_dev, O_RDWR | O_CLOEXEC | flags);
	if (disk < 0)
		return fail(r, "open");
	size = lseek(disk, 0, SEEK_END); /* a block device's size, or a file's */
	if (size < 0)
		err = fail(r, "lseek");
	else if ((uint64_t)size < region)
		err = fail_because(r, "scratch_disk_smaller_than_block_mb");
	else if ((err = posix_memalign(&request, 4096, BLOCK_REQ)) != 0) {
		errno = err;
		err = fail(r, "posix_memalign");
	}
	if (err) {
		close_scratch(r);
		return err;
	}
	memset(request, 0x5a, BLOCK_REQ);
	return 0;
}

static int open_scratch_direct(struct run *r)
{
	return open_scratch(r, O_DIRECT);
}

static int open_scratch_cached(struct run *r)
{
	return open_scratch(r, 0);
}

/* Writes or reads the first KL_BLOCK_MB of the disk in 1 MiB requests. */
static int transfer(struct run *r, bool writing)
{
	for (long i = 0; i < r->opt->block_mb; i++) {
		off_t off = (off_t)i * (off_t)BLOCK_REQ;
		ssize_t n = writing ? pwrite(disk, request, BLOCK_REQ, off)
				    : pread(disk, request, BLOCK_REQ, off);

		if (n < 0)
			return fail(r, writing ? "pwrite" : "pread");
		if ((size_t)n != BLOCK_REQ)
			return fail_because(r, "short_transfer");
	}
	return 0;
}

/* Sets the sample to KL_BLOCK_MB moved since t0, in MB/s. */
static void set_block_rate(struct run *r, int64_t t0)
{
	int64_t ns = now_ns() - t0;

	r->value = (double)r->opt->block_mb * (double)BLOCK_REQ * 1e3 / (double)(ns > 0 ? ns : 1);
}

/*
 * The next reads must come from the disk: write the pages back (fsync), so
 * they are clean, then drop them.  Two ways, either of which will do:
 * posix_fadvise(DONTNEED) drops this disk's pages, but kernels without
 * CONFIG_ADVISE_SYSCALLS (tiny configs) answer ENOSYS; in the guest,
 * drop_caches (CONFIG_PROC_SYSCTL) drops every clean cache, which also
 * leaves each pass the same start.  Never drop_caches on the host (local
 * mode): its caches are not ours to drop, so there fadvise is the only way.
 */
static int drop_scratch_cache(struct run *r)
{
	bool dropped;
	int err;

	if (fsync(disk) < 0)
		return fail(r, "fsync");
	err = posix_fadvise(disk, 0, 0, POSIX_FADV_DONTNEED);
	if (err && err != ENOSYS) /* ENOSYS is expected, and would warn every pass */
		warn("posix_fadvise %s: %s", r->opt->block_dev, strerror(err));
	dropped = err == 0;
	if (pid1 && write_file("/proc/sys/vm/drop_caches", "3") == 0)
		dropped = true;
	return dropped ? 0 : fail_because(r, "cannot_drop_page_cache");
}

/*
 * blk.*, in MB/s: self-reported, one pass over KL_BLOCK_MB per sample (at
 * most SLOW_REPEATS).  Direct: O_DIRECT requests, param[0] says which way.
 */
static int run_blk_direct(struct run *r, unsigned long iters)
{
	int64_t t0 = now_ns();
	int err = transfer(r, r->metric->param[0] == 'w');

	(void)iters;
	set_block_rate(r, t0);
	return err;
}

/* Cached writes: through the page cache, with the fsync that makes them durable. */
static int run_blk_cached_write(struct run *r, unsigned long iters)
{
	int64_t t0 = now_ns();
	int err = transfer(r, true);

	(void)iters;
	if (!err && fsync(disk) < 0)
		err = fail(r, "fsync");
	set_block_rate(r, t0);
	return err;
}

/* Cached reads: through the page cache, starting cold. */
static int run_blk_cached_read(struct run *r, unsigned long iters)
{
	int64_t t0;
	int err = drop_scratch_cache(r);

	(void)iters;
	if (err)
		return err;
	t0 = now_ns();
	err = transfer(r, false);
	set_block_rate(r, t0);
	return err;
}

#define BLOCK(metric_name, setup_fn, run_fn, direction)                                 \
	{ .name = metric_name, .kind = REPORTED, .unit = "MB/s", .param = { direction },  \
	  .max_repeats = SLOW_REPEATS, .setup = setup_fn, .run = run_fn,                 \
	  .teardown = close_scratch }

static const struct metric metrics[] = {
	BLOCK("blk.seq_write_direct", open_scratch_direct, run_blk_direct, 'w'),
	BLOCK("blk.seq_read_direct", open_scratch_direct, run_blk_direct, 'r'),
	BLOCK("blk.seq_write_cached", open_scratch_cached, run_blk_cached_write, 'w'),
	BLOCK("blk.seq_read_cached", open_scratch_cached, run_blk_cached_read, 'r'),
};

const struct metric_table blk_metrics = METRIC_TABLE(metrics);
