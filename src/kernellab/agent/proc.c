/* proc.*: process creation, as lmbench lat_proc. */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <errno.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

extern char **environ;

static int run_fork_exit(struct run *r, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return fail(r, "fork");
		if (pid == 0)
			_exit(0);
		int err = reap(r, pid, "child");

		if (err)
			return err;
	}
	return 0;
}

static int run_fork_exec(struct run *r, unsigned long iters)
{
	static char *const exec_argv[] = { "agent", "--exit-now", NULL };

	for (unsigned long i = 0; i < iters; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return fail(r, "fork");
		if (pid == 0) {
			/* /proc/self/exe is /init in PID-1 mode and ourselves here. */
			execve("/proc/self/exe", exec_argv, environ);
			_exit(errno);
		}
		int err = reap(r, pid, "execve");

		if (err)
			return err;
	}
	return 0;
}

static const struct metric metrics[] = {
	{ .name = "proc.fork_exit", .run = run_fork_exit },
	{ .name = "proc.fork_exec", .run = run_fork_exec },
};

const struct metric_table proc_metrics = METRIC_TABLE(metrics);
