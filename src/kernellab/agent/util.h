/*
 * Helpers several metric groups share (util.c): descriptors, helper
 * processes, work-directory files, buffers.  Each takes the group's state
 * as arguments; failures go to the run's reason (see fail() in harness.h).
 */
#ifndef KL_UTIL_H
#define KL_UTIL_H

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <sys/types.h>
#include <unistd.h>

#include "harness.h"

#define KIB 1024UL
#define MIB (1024UL * KIB)

/*
 * The page size, which main() checks once.  A group whose timed loops step
 * by it keeps a static copy (see fs.c).
 */
extern size_t system_page_size;
/* Results the compiler must compute, though nothing reads them. */
extern volatile unsigned long sink;

/*
 * noipa: GCC may neither drop nor hoist calls to this, as it could if it
 * saw that a sum is pure.
 */
unsigned long __attribute__((noipa)) sum_words(const unsigned long *w, size_t n);

/* Closes *fd if it is open and marks it closed. */
int close_fd(struct run *r, int *fd);
/* Closes one end of a channel: two descriptors, or one socket used both ways. */
int close_end(int a, int b);
/*
 * Reads exactly len bytes; EOF reads as EPIPE (the other side went away).
 *
 * Static in each file that uses it (ipc.c, crypto.c) and called, never
 * inlined or cloned, as when the agent was one file: GCC then sees every
 * caller, knows that len is never 0 and drops that test, which an extern
 * function would run on every read of the ipc.* and ctx.* loops.
 */
static __attribute__((unused, noinline, noclone))
int read_full(struct run *r, int fd, void *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n < 0)
			return fail(r, "read");
		if (n == 0) {
			errno = EPIPE;
			return fail(r, "read");
		}
		got += (size_t)n;
	}
	return 0;
}

int wait_child(struct run *r, pid_t pid, int *status);
/*
 * Children report failure by exiting with the errno of the call that
 * failed, so a non-zero exit status is reported as that errno.
 */
int check_exit(struct run *r, int status, const char *what);
/* Waits for pid and checks its exit status, as above. */
int reap(struct run *r, pid_t pid, const char *what);

/* A file a metric made in the work directory, and the descriptor it keeps (-1: closed). */
struct file {
	int fd;
	char path[PATH_MAX];
};

/* Creates workdir/name holding size bytes and keeps it open in f->fd. */
int create_file(struct run *r, struct file *f, const char *name, size_t size);
/* Closes and deletes it. */
int remove_file(struct run *r, struct file *f);

/* Two buffers of size bytes, written so every page is present and private. */
int alloc_buffers(struct run *r, void *buf[2], size_t size);
void free_buffers(void *buf[2]);

#endif
