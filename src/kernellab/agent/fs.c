/*
 * fs.* and mm.*: the file system and the VM behind it, as lmbench lat_fs,
 * lat_mmap, lat_pagefault and lat_select.  The files are in the work
 * directory (tmpfs in PID-1 mode).
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#define FS_FILE_MAX (10 * KIB) /* fs.create_*, fs.delete_*: the largest file */
#define FAULT_BYTES (4 * MIB)  /* mm.page_fault: the file mapped per pass */
#define SELECT_MAX 100         /* fs.select_*: the most pipes watched */

/* fs.select_*: pipes nobody writes to. */
struct selection {
	int n;
	int pipe[SELECT_MAX][2];
	fd_set watched;
	int max_fd;
};

static struct file file = { .fd = -1 }; /* mm.*: the file mapped */
/*
 * mm.*: the page size, copied by their setups.  A static whose address is
 * never taken, so GCC knows that the loops' stores through p cannot change
 * it and keeps it in a register, as it did when the agent was one file.
 */
static size_t page_size;
static struct selection sel;

/* Files in the fs.* directory are named by number, relative to its descriptor. */
static int create_numbered_file(struct run *r, int dir, unsigned long i, size_t size)
{
	static const char data[FS_FILE_MAX];
	char name[24];
	int fd;

	snprintf(name, sizeof(name), "%lu", i);
	fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(r, "create");
	if (size && write(fd, data, size) != (ssize_t)size) {
		int err = fail(r, "write");

		close(fd);
		return err;
	}
	return close(fd) < 0 ? fail(r, "close") : 0;
}

static int remove_numbered_files(struct run *r, int dir, unsigned long count)
{
	char name[24];

	for (unsigned long i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "%lu", i);
		if (unlinkat(dir, name, 0) < 0)
			return fail(r, "unlink");
	}
	return 0;
}

/*
 * fs.create_* and fs.delete_*, as lmbench lat_fs: op = creating (open,
 * write, close) or deleting one file of param[0] bytes in a fresh
 * directory.  Both phases run every time; param[1] says which one is timed.
 */
#define TIME_CREATES 0
#define TIME_DELETES 1

static int run_fs(struct run *r, unsigned long iters)
{
	size_t size = (size_t)r->metric->param[0];
	char path[PATH_MAX];
	unsigned long made = 0;
	int64_t t0, create_ns, delete_ns;
	int dir, err = 0, removed;

	snprintf(path, sizeof(path), "%s/kl-fs", r->workdir);
	if (mkdir(path, 0755) < 0)
		return fail(r, "mkdir");
	dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		err = fail(r, "open");
		rmdir(path);
		return err;
	}
	t0 = now_ns();
	while (made < iters && !(err = create_numbered_file(r, dir, made, size)))
		made++;
	create_ns = now_ns() - t0;

	t0 = now_ns();
	removed = remove_numbered_files(r, dir, made);
	delete_ns = now_ns() - t0;

	if (!err)
		err = removed;
	if (close(dir) < 0 && !err)
		err = fail(r, "close");
	if (rmdir(path) < 0 && !err)
		err = fail(r, "rmdir");
	r->timed_ns = r->metric->param[1] == TIME_DELETES ? delete_ns : create_ns;
	return err;
}

static int create_mmap_file(struct run *r)
{
	page_size = system_page_size;
	return create_file(r, &file, "kl-mmap", MIB);
}

static int remove_mapped_file(struct run *r)
{
	return remove_file(r, &file);
}

/*
 * mm.mmap_1m, as lmbench lat_mmap: op = mmap 1 MiB of a work-directory file
 * (tmpfs in PID-1 mode), read one byte per page, munmap.  The reads fault
 * in page-cache pages, up to 16 per fault with fault-around.
 */
static int run_mmap(struct run *r, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		const unsigned char *p = mmap(NULL, MIB, PROT_READ, MAP_SHARED, file.fd, 0);
		unsigned long sum = 0;

		if (p == MAP_FAILED)
			return fail(r, "mmap");
		for (size_t off = 0; off < MIB; off += page_size)
			sum += p[off];
		sink = sum;
		if (munmap((void *)p, MIB) < 0)
			return fail(r, "munmap");
	}
	return 0;
}

static int create_fault_file(struct run *r)
{
	page_size = system_page_size;
	return create_file(r, &file, "kl-fault", FAULT_BYTES);
}

/*
 * mm.page_fault: op = the first write to one page of a MAP_PRIVATE mapping
 * of a cached file: one fault each, which copies the page (a read would be
 * served by fault-around, many pages per fault).  Self-timed: only the
 * writes count, not the mmap and munmap around each pass over the file.
 */
static int run_page_fault(struct run *r, unsigned long iters)
{
	size_t file_pages = FAULT_BYTES / page_size;

	r->timed_ns = 0;
	for (unsigned long done = 0; done < iters;) {
		size_t pages = iters - done < file_pages ? iters - done : file_pages;
		volatile char *p = mmap(NULL, pages * page_size, PROT_READ | PROT_WRITE,
					MAP_PRIVATE, file.fd, 0);
		int64_t t0;

		if (p == MAP_FAILED)
			return fail(r, "mmap");
		t0 = now_ns();
		for (size_t k = 0; k < pages; k++)
			p[k * page_size] = 1;
		r->timed_ns += now_ns() - t0;
		if (munmap((void *)p, pages * page_size) < 0)
			return fail(r, "munmap");
		done += pages;
	}
	return 0;
}

static int stop_select(struct run *r)
{
	int err = 0;

	for (int k = 0; k < sel.n; k++)
		if (close_end(sel.pipe[k][0], sel.pipe[k][1]) < 0 && !err)
			err = fail(r, "close");
	sel.n = 0;
	return err;
}

/* param[0]: pipes to watch; their write ends stay open, so none is ready. */
static int start_select(struct run *r)
{
	struct selection *s = &sel;

	s->n = 0;
	s->max_fd = -1;
	FD_ZERO(&s->watched);
	while (s->n < r->metric->param[0]) {
		int *p = s->pipe[s->n];

		if (pipe2(p, O_CLOEXEC) < 0) {
			int err = fail(r, "pipe");

			stop_select(r);
			return err;
		}
		s->n++;
		/* select() cannot watch descriptors from FD_SETSIZE on. */
		if (p[0] >= FD_SETSIZE) {
			int err = fail_because(r, "fd_beyond_FD_SETSIZE");

			stop_select(r);
			return err;
		}
		FD_SET(p[0], &s->watched);
		if (p[0] > s->max_fd)
			s->max_fd = p[0];
	}
	return 0;
}

/* fs.select_*, as lmbench lat_select: op = select() with a zero timeout. */
static int run_select(struct run *r, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		fd_set ready = sel.watched;
		struct timeval timeout = { 0, 0 };
		int n = select(sel.max_fd + 1, &ready, NULL, NULL, &timeout);

		if (n < 0)
			return fail(r, "select");
		if (n > 0)
			return fail_because(r, "select_found_a_ready_pipe");
	}
	return 0;
}

#define FS(metric_name, bytes, which)                                                   \
	{ .name = metric_name, .self_timed = true, .param = { bytes, which }, .run = run_fs }
#define SELECT(metric_name, pipes)                                                      \
	{ .name = metric_name, .param = { pipes }, .setup = start_select,                \
	  .run = run_select, .teardown = stop_select }

static const struct metric metrics[] = {
	FS("fs.create_0k", 0, TIME_CREATES),
	FS("fs.delete_0k", 0, TIME_DELETES),
	FS("fs.create_10k", 10 * KIB, TIME_CREATES),
	FS("fs.delete_10k", 10 * KIB, TIME_DELETES),
	{ .name = "mm.mmap_1m", .setup = create_mmap_file, .run = run_mmap,
	  .teardown = remove_mapped_file },
	{ .name = "mm.page_fault", .self_timed = true, .setup = create_fault_file,
	  .run = run_page_fault, .teardown = remove_mapped_file },
	SELECT("fs.select_10", 10),
	SELECT("fs.select_100", SELECT_MAX),
};

const struct metric_table fs_metrics = METRIC_TABLE(metrics);
