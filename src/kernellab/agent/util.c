/* Helpers several metric groups share; see util.h. */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

size_t system_page_size;
volatile unsigned long sink;

unsigned long __attribute__((noipa)) sum_words(const unsigned long *w, size_t n)
{
	unsigned long sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += w[i];
	return sum;
}

int close_fd(struct run *r, int *fd)
{
	int err = *fd >= 0 && close(*fd) < 0 ? fail(r, "close") : 0;

	*fd = -1;
	return err;
}

int close_end(int a, int b)
{
	int ret = 0;

	if (a >= 0 && close(a) < 0)
		ret = -1;
	if (b >= 0 && b != a && close(b) < 0)
		ret = -1;
	return ret;
}

int wait_child(struct run *r, pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return fail(r, "waitpid");
	return 0;
}

int check_exit(struct run *r, int status, const char *what)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status)) {
		errno = WEXITSTATUS(status);
		return fail(r, what);
	}
	if (!r->reason[0])
		snprintf(r->reason, sizeof(r->reason), "%s_killed_by_signal_%d",
			 what, WTERMSIG(status));
	return -ECHILD;
}

int reap(struct run *r, pid_t pid, const char *what)
{
	int status, err = wait_child(r, pid, &status);

	return err ? err : check_exit(r, status, what);
}

int create_file(struct run *r, struct file *f, const char *name, size_t size)
{
	static const char zeros[64 * KIB];

	snprintf(f->path, sizeof(f->path), "%s/%s", r->workdir, name);
	f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f->fd < 0)
		return fail(r, "create");
	for (size_t done = 0; done < size;) {
		ssize_t n = write(f->fd, zeros, size - done < sizeof(zeros) ? size - done : sizeof(zeros));

		if (n <= 0) {
			int err = fail(r, "write");

			close_fd(r, &f->fd);
			unlink(f->path);
			return err;
		}
		done += (size_t)n;
	}
	return 0;
}

int remove_file(struct run *r, struct file *f)
{
	int err = close_fd(r, &f->fd);

	if (unlink(f->path) < 0 && !err)
		err = fail(r, "unlink");
	return err;
}

void free_buffers(void *buf[2])
{
	for (int i = 0; i < 2; i++) {
		free(buf[i]);
		buf[i] = NULL;
	}
}

int alloc_buffers(struct run *r, void *buf[2], size_t size)
{
	for (int i = 0; i < 2; i++) {
		buf[i] = malloc(size);
		if (!buf[i]) {
			int err = fail(r, "malloc");

			free_buffers(buf);
			return err;
		}
		memset(buf[i], i + 1, size);
	}
	return 0;
}
