/* syscall.* and signal.*: system calls and signals, as lmbench lat_syscall and lat_sig. */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#define OPEN_TARGET "kl-open-target"

/* /dev/null, or the file syscall.open_close and syscall.stat open. */
static struct file file = { .fd = -1 };
static pid_t self; /* signal.catch */
static volatile sig_atomic_t signals_caught;

static int run_null(struct run *r, unsigned long iters)
{
	(void)r;
	/* getppid cannot fail; syscall() guarantees a kernel entry whatever libc caches. */
	for (unsigned long i = 0; i < iters; i++)
		syscall(SYS_getppid);
	return 0;
}

static int open_devnull(struct run *r)
{
	file.fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	return file.fd < 0 ? fail(r, "open") : 0;
}

static int close_file(struct run *r)
{
	return close_fd(r, &file.fd);
}

static int run_read(struct run *r, unsigned long iters)
{
	char byte;

	for (unsigned long i = 0; i < iters; i++)
		if (read(file.fd, &byte, 1) < 0)
			return fail(r, "read");
	return 0;
}

static int run_write(struct run *r, unsigned long iters)
{
	char byte = 0;

	for (unsigned long i = 0; i < iters; i++)
		if (write(file.fd, &byte, 1) != 1)
			return fail(r, "write");
	return 0;
}

static int run_fstat(struct run *r, unsigned long iters)
{
	struct stat st;

	for (unsigned long i = 0; i < iters; i++)
		if (fstat(file.fd, &st) < 0)
			return fail(r, "fstat");
	return 0;
}

static int create_open_target(struct run *r)
{
	return create_file(r, &file, OPEN_TARGET, 0);
}

static int remove_open_target(struct run *r)
{
	return remove_file(r, &file);
}

static int run_open_close(struct run *r, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int fd = open(file.path, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return fail(r, "open");
		if (close(fd) < 0)
			return fail(r, "close");
	}
	return 0;
}

static int run_stat(struct run *r, unsigned long iters)
{
	struct stat st;

	for (unsigned long i = 0; i < iters; i++)
		if (stat(file.path, &st) < 0)
			return fail(r, "stat");
	return 0;
}

static void count_signal(int sig)
{
	(void)sig;
	signals_caught++;
}

static int catch_sigusr1(struct run *r)
{
	struct sigaction sa = { .sa_handler = count_signal };

	return sigaction(SIGUSR1, &sa, NULL) < 0 ? fail(r, "sigaction") : 0;
}

static int default_sigusr1(struct run *r)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };

	return sigaction(SIGUSR1, &sa, NULL) < 0 ? fail(r, "sigaction") : 0;
}

static int run_sig_install(struct run *r, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int err = catch_sigusr1(r);

		if (err)
			return err;
	}
	return 0;
}

static int start_sig_catch(struct run *r)
{
	/* getpid() is a system call in current glibc; keep it out of the loop. */
	self = getpid();
	return catch_sigusr1(r);
}

static int run_sig_catch(struct run *r, unsigned long iters)
{
	signals_caught = 0;
	for (unsigned long i = 0; i < iters; i++)
		if (kill(self, SIGUSR1) < 0)
			return fail(r, "kill");
	/* A signal a process sends itself is handled before kill() returns. */
	if ((unsigned long)signals_caught != iters)
		return fail_because(r, "signal_lost");
	return 0;
}

static const struct metric metrics[] = {
	{ .name = "syscall.null", .run = run_null },
	{ .name = "syscall.read", .setup = open_devnull, .run = run_read, .teardown = close_file },
	{ .name = "syscall.write", .setup = open_devnull, .run = run_write, .teardown = close_file },
	{ .name = "syscall.open_close", .setup = create_open_target, .run = run_open_close,
	  .teardown = remove_open_target },
	{ .name = "syscall.stat", .setup = create_open_target, .run = run_stat,
	  .teardown = remove_open_target },
	{ .name = "syscall.fstat", .setup = open_devnull, .run = run_fstat, .teardown = close_file },
	{ .name = "signal.install", .run = run_sig_install, .teardown = default_sigusr1 },
	{ .name = "signal.catch", .setup = start_sig_catch, .run = run_sig_catch,
	  .teardown = default_sigusr1 },
};

const struct metric_table syscall_metrics = METRIC_TABLE(metrics);
