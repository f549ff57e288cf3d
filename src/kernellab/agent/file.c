/*
 * file.*: sequential I/O on one file of a real file system, the seed's dd
 * (seed 000: dd bs=1M count=1K of a file on the NAS's ext4): 1 MiB requests
 * over the whole file, through the page cache and O_DIRECT.
 *
 * PID-1 mode: the kernel command line says KL_FS=ext4 when the host made an
 * ext4 file system (the fs: axis, mke2fs -d) holding FILE_NAME, a file of
 * 1 GiB with every block allocated, on a disk of its own beside the raw
 * scratch disk.  file_setup() finds that disk by its superblock (the order of
 * virtio disks is the machine's, not the command line's), mounts it
 * read-write on FS_MOUNT and measures there.  QEMU attaches the image with
 * snapshot=on: writes go to an overlay the host throws away, so each run
 * starts from the same file system.
 *
 * Local mode: KL_FILE_DIR names a directory holding FILE_NAME (made by the
 * caller; the agent writes into it, never allocates it).
 *
 * KL_FILE_MB: MiB moved per sample (default: the whole file, rounded down to
 * MiB).  Writes go into the existing file (no allocation: the seed's dd
 * after the first pass); cached writes end with fsync, cached reads start
 * cold.  Without a file system, or with one the kernel cannot mount, every
 * file.* metric says why in its t=na record.
 *
 * The same file system holds the directory of each workload that needs a
 * disk (workload_disk_dir()): the host attaches one for them in wall mode,
 * the fs: axis's image or, without one, an ext4 image with room for them
 * and no FILE_NAME (file.* then say so).  Where it did not mount, such a
 * workload is not run, with the same reason (workload.c).
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: a file of 1 GiB and more */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "pid1.h"
#include "record.h"
#include "util.h"
#include "file.h"

#define FILE_NAME "tst.dd"   /* the seed's */
#define FS_MOUNT "/mnt/fs"
#define FILE_REQ MIB         /* bytes per request, dd's bs=1M */
#define FILE_ALIGN 65536     /* O_DIRECT buffers: any logical block size up to 64K */
#define MAX_FILE_MB 65536L

static char file_path[256];        /* empty: no file; why is in no_file */
static char no_file[96] = "no_file_system";
static char mounted[64];           /* what file_setup() mounted, for the t=meta record */
static const char *file_dir;       /* local mode: KL_FILE_DIR, as given */
static long file_mb;               /* MiB per sample; 0: the whole file */
static int file_fd = -1;
static void *request;

static void mount_file_system(const char *type)
{
	const char *dev;
	unsigned long block = 0;
	long page = sysconf(_SC_PAGESIZE);

	if (strcmp(type, "ext4") != 0) {
		snprintf(no_file, sizeof(no_file), "unknown_KL_FS_%s", type);
		sanitize(no_file);
		return;
	}
	dev = find_file_system_disk();
	if (!dev) {
		snprintf(no_file, sizeof(no_file), "no_disk_with_a_file_system");
		return;
	}
	ext4_block_size(dev, &block);
	if ((mkdir("/mnt", 0755) < 0 && errno != EEXIST) || (mkdir(FS_MOUNT, 0755) < 0 && errno != EEXIST)) {
		snprintf(no_file, sizeof(no_file), "mkdir_failed_errno_%d", errno);
		return;
	}
	if (mount(dev, FS_MOUNT, type, 0, NULL) < 0) {
		int err = errno;

		/* ext4 in 6.1 and 6.12 mounts no block larger than a page (set_blocksize: EINVAL). */
		if (err == EINVAL && page > 0 && block > (unsigned long)page)
			snprintf(no_file, sizeof(no_file), "ext4_block_%lu_larger_than_page_%ld", block, page);
		else if (err == ENODEV)
			snprintf(no_file, sizeof(no_file), "kernel_has_no_%s", type);
		else
			snprintf(no_file, sizeof(no_file), "mount_failed_errno_%d", err);
		return;
	}
	snprintf(mounted, sizeof(mounted), "%s,%s,block_%lu", type, dev, block);
	/* The image made for the workloads alone has no file to measure. */
	if (access(FS_MOUNT "/" FILE_NAME, F_OK) < 0 && errno == ENOENT)
		snprintf(no_file, sizeof(no_file), "no_" FILE_NAME "_on_the_file_system");
	else
		snprintf(file_path, sizeof(file_path), FS_MOUNT "/" FILE_NAME);
}

void file_setup(void)
{
	const char *v;

	if ((v = getenv("KL_FILE_MB"))) {
		char *end;

		errno = 0;
		file_mb = strtol(v, &end, 10);
		if (errno || end == v || *end || file_mb < 1 || file_mb > MAX_FILE_MB)
			die("KL_FILE_MB must be an integer from 1 to %ld, not '%s'", MAX_FILE_MB, v);
	}
	if (pid1) {
		if ((v = getenv("KL_FS")) && *v)
			mount_file_system(v);
		return;
	}
	if ((v = getenv("KL_FILE_DIR")) && *v) {
		file_dir = v;
		if ((size_t)snprintf(file_path, sizeof(file_path), "%s/" FILE_NAME, v) >= sizeof(file_path)) {
			file_path[0] = '\0';
			snprintf(no_file, sizeof(no_file), "KL_FILE_DIR_too_long");
		}
	}
}

const char *workload_disk_dir(const char *workdir, const char **why)
{
	struct stat st;

	if (pid1) {
		*why = no_file;
		return mounted[0] ? FS_MOUNT : NULL;
	}
	/* A machine's own file systems: the host read the room under workdir before the run. */
	if (!file_dir)
		return workdir;
	if (stat(file_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		*why = "KL_FILE_DIR_is_not_a_directory";
		return NULL;
	}
	return file_dir;
}

void report_file_system(void)
{
	if (mounted[0])
		emit("t=meta key=file_system value=%s", sanitize(mounted));
}

static int close_file(struct run *r)
{
	free(request);
	request = NULL;
	return close_fd(r, &file_fd);
}

static int open_file(struct run *r, int flags)
{
	struct stat st;
	int err = 0;

	if (!file_path[0])
		return fail_because(r, no_file);
	file_fd = open(file_path, O_RDWR | O_CLOEXEC | flags);
	if (file_fd < 0)
		return fail(r, "open");
	if (fstat(file_fd, &st) < 0)
		err = fail(r, "fstat");
	else if (file_mb == 0 && st.st_size < (off_t)FILE_REQ)
		err = fail_because(r, "file_smaller_than_1_MiB");
	else if (file_mb > 0 && (uint64_t)st.st_size < (uint64_t)file_mb * FILE_REQ)
		err = fail_because(r, "file_smaller_than_KL_FILE_MB");
	else if ((err = posix_memalign(&request, FILE_ALIGN, FILE_REQ)) != 0) {
		errno = err;
		err = fail(r, "posix_memalign");
	}
	if (err) {
		close_file(r);
		return err;
	}
	if (file_mb == 0)
		file_mb = (long)(st.st_size / (off_t)FILE_REQ);
	memset(request, 0x5a, FILE_REQ);
	return 0;
}

static int open_direct(struct run *r)
{
	return open_file(r, O_DIRECT);
}

static int open_cached(struct run *r)
{
	return open_file(r, 0);
}

/* Writes or reads the first file_mb MiB of the file in 1 MiB requests. */
static int transfer(struct run *r, bool writing)
{
	for (long i = 0; i < file_mb; i++) {
		off_t off = (off_t)i * (off_t)FILE_REQ;
		ssize_t n = writing ? pwrite(file_fd, request, FILE_REQ, off)
				    : pread(file_fd, request, FILE_REQ, off);

		if (n < 0)
			return fail(r, writing ? "pwrite" : "pread");
		if ((size_t)n != FILE_REQ)
			return fail_because(r, "short_transfer");
	}
	return 0;
}

static void set_rate(struct run *r, int64_t t0)
{
	int64_t ns = now_ns() - t0;

	r->value = (double)file_mb * (double)FILE_REQ * 1e3 / (double)(ns > 0 ? ns : 1);
}

/*
 * Cold reads: write the file's pages back, then drop them: fadvise for this
 * file, and in the guest drop_caches (every clean cache: the same start each
 * pass); never drop_caches on the host (local mode).  As blk.c does.
 */
static int drop_file_cache(struct run *r)
{
	bool dropped;
	int err;

	if (fsync(file_fd) < 0)
		return fail(r, "fsync");
	err = posix_fadvise(file_fd, 0, 0, POSIX_FADV_DONTNEED);
	if (err && err != ENOSYS)
		warn("posix_fadvise %s: %s", file_path, strerror(err));
	dropped = err == 0;
	if (pid1 && write_file("/proc/sys/vm/drop_caches", "3") == 0)
		dropped = true;
	return dropped ? 0 : fail_because(r, "cannot_drop_page_cache");
}

/* file.*, in MB/s, one pass over the file per sample (at most SLOW_REPEATS). */
static int run_direct(struct run *r, unsigned long iters)
{
	int64_t t0 = now_ns();
	int err = transfer(r, r->metric->param[0] == 'w');

	(void)iters;
	set_rate(r, t0);
	return err;
}

static int run_cached_write(struct run *r, unsigned long iters)
{
	int64_t t0 = now_ns();
	int err = transfer(r, true);

	(void)iters;
	if (!err && fsync(file_fd) < 0)
		err = fail(r, "fsync");
	set_rate(r, t0);
	return err;
}

static int run_cached_read(struct run *r, unsigned long iters)
{
	int64_t t0;
	int err = drop_file_cache(r);

	(void)iters;
	if (err)
		return err;
	t0 = now_ns();
	err = transfer(r, false);
	set_rate(r, t0);
	return err;
}

#define FILE_METRIC(metric_name, setup_fn, run_fn, direction)                           \
	{ .name = metric_name, .kind = REPORTED, .unit = "MB/s", .param = { direction },  \
	  .max_repeats = SLOW_REPEATS, .setup = setup_fn, .run = run_fn,                 \
	  .teardown = close_file }

static const struct metric metrics[] = {
	FILE_METRIC("file.seq_write_direct", open_direct, run_direct, 'w'),
	FILE_METRIC("file.seq_read_direct", open_direct, run_direct, 'r'),
	FILE_METRIC("file.seq_write_cached", open_cached, run_cached_write, 'w'),
	FILE_METRIC("file.seq_read_cached", open_cached, run_cached_read, 'r'),
};

const struct metric_table file_metrics = METRIC_TABLE(metrics);
