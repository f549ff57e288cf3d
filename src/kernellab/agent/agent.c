/*
 * kernellab-agent: the in-guest measurement agent.
 *
 * Booted as /init of an initramfs (PID-1 mode) it sets up the minimal
 * userspace it needs, runs the benchmark suite, prints the results on the
 * console and reboots, which ends QEMU (the host runs it with -no-reboot).
 * Started as an ordinary program (local mode) it runs the same suite and
 * exits, so the harness can be tested without booting anything.
 *
 * Every result is one line on stdout, framed so the host can pick it out of
 * console noise and reject lines that got mangled:
 *
 *     @KL seq=N t=TYPE key=value ... #crc32
 *
 * where crc32 (zlib's) covers the payload between "@KL " and " #".  A run
 * prints one t=hello, then for each metric either one t=sample per repeat or
 * one t=na saying why it could not run, then one t=sample per /proc/meminfo
 * line, and last t=end records=<number of records before it>.
 *
 * Build: gcc -static -O2 -Wall -Wextra -o agent agent.c
 * Options come from the environment (the kernel hands unknown key=value boot
 * arguments to init that way): KL_REPEATS, KL_TARGET_US, KL_ONLY.  Local mode
 * also accepts --repeats N --target-us N --only a,b.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AGENT_NAME "kernellab-agent"
#define RECORD_VERSION 1
#define MAX_ITERS (1UL << 24)
#define MAX_REPEATS 1000
#define MAX_TARGET_US 10000000L
#define OPEN_TARGET "kl-open-target"

extern char **environ;

struct options {
	long repeats;
	long target_us;
	const char *only; /* comma-separated metric names; NULL means all */
};

/* State shared by the harness and the metrics' setup/run/teardown. */
struct ctx {
	const char *workdir;
	char reason[96];       /* why the current metric failed; first failure wins */
	int devnull;           /* syscall.read, syscall.write */
	char open_target[PATH_MAX]; /* syscall.open_close */
	int to_child;          /* ipc.pipe_rtt */
	int from_child;
	pid_t child;
};

struct metric {
	const char *name;
	int (*setup)(struct ctx *);              /* optional; 0 or -errno */
	int (*run)(struct ctx *, unsigned long iters); /* 0 or -errno */
	int (*teardown)(struct ctx *);           /* optional; runs iff setup succeeded */
};

static int pid1;
static unsigned long next_seq;
static char local_workdir[] = "/tmp/kl-agent-XXXXXX";

/* One write per message, so it cannot split a record on the console. */
static void vmessage(const char *prefix, const char *fmt, va_list ap)
{
	char buf[512];
	int len = snprintf(buf, sizeof(buf), AGENT_NAME ": %s", prefix);

	vsnprintf(buf + len, sizeof(buf) - (size_t)len - 1, fmt, ap);
	len = (int)strlen(buf);
	buf[len++] = '\n';
	/* If stderr fails too there is nowhere left to report it. */
	if (write(2, buf, (size_t)len) < 0)
		return;
}

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("", fmt, ap);
	va_end(ap);
}

/*
 * Ends the run.  Init must never exit (the kernel would panic), so in PID-1
 * mode this powers the VM down instead.
 */
static void __attribute__((noreturn)) finish(int status)
{
	if (!pid1)
		exit(status);
	sync();
	if (reboot(RB_AUTOBOOT) < 0)
		warn("reboot: %s", strerror(errno));
	if (reboot(RB_POWER_OFF) < 0)
		warn("power off: %s", strerror(errno));
	for (;;)
		pause();
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("fatal: ", fmt, ap);
	va_end(ap);
	finish(1);
}

/* CRC-32 as in IEEE 802.3 and zlib.crc32; bitwise, records are short. */
static uint32_t crc32(const char *buf, size_t len)
{
	uint32_t crc = 0xffffffffu;

	while (len--) {
		crc ^= (unsigned char)*buf++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1u));
	}
	return ~crc;
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("writing records: %s", strerror(errno));
		}
		buf += n;
		len -= (size_t)n;
	}
}

/*
 * Prints one record.  The line goes out in a single write() so records from
 * this process are never torn by other output on the console.
 */
static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
	char payload[512], line[sizeof(payload) + 16];
	va_list ap;
	int len, n;

	len = snprintf(payload, sizeof(payload), "seq=%lu ", next_seq);
	va_start(ap, fmt);
	n = vsnprintf(payload + len, sizeof(payload) - (size_t)len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(payload) - (size_t)len)
		die("record too long: %s", payload);
	len += n;

	n = snprintf(line, sizeof(line), "@KL %s #%08x\n", payload,
		     (unsigned)crc32(payload, (size_t)len));
	write_all(1, line, (size_t)n);
	next_seq++;
}

/* Makes s usable as a record value: no spaces, no '#', printable ASCII. */
static char *sanitize(char *s)
{
	for (char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._+-", *p))
			*p = '_';
	return s;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
		die("clock_gettime: %s", strerror(errno));
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Records the failing call in ctx->reason and returns -errno. */
static int fail(struct ctx *c, const char *call)
{
	int err = errno ? errno : EIO; /* a failure must never read as success */

	if (!c->reason[0])
		snprintf(c->reason, sizeof(c->reason), "%s_failed_errno_%d", call, err);
	return -err;
}

/*
 * Waits for a child.  Children report failure by exiting with the errno of
 * the call that failed, so a non-zero status is reported as that errno.
 */
static int reap(struct ctx *c, pid_t pid, const char *what)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return fail(c, "waitpid");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status)) {
		errno = WEXITSTATUS(status);
		return fail(c, what);
	}
	if (!c->reason[0])
		snprintf(c->reason, sizeof(c->reason), "%s_killed_by_signal_%d",
			 what, WTERMSIG(status));
	return -ECHILD;
}

/* ---- metrics ------------------------------------------------------------ */

static int run_null(struct ctx *c, unsigned long iters)
{
	(void)c;
	/* getppid cannot fail; syscall() guarantees a kernel entry whatever libc caches. */
	for (unsigned long i = 0; i < iters; i++)
		syscall(SYS_getppid);
	return 0;
}

static int open_devnull(struct ctx *c)
{
	c->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	return c->devnull < 0 ? fail(c, "open") : 0;
}

static int close_devnull(struct ctx *c)
{
	return close(c->devnull) < 0 ? fail(c, "close") : 0;
}

static int run_read(struct ctx *c, unsigned long iters)
{
	char byte;

	for (unsigned long i = 0; i < iters; i++)
		if (read(c->devnull, &byte, 1) < 0)
			return fail(c, "read");
	return 0;
}

static int run_write(struct ctx *c, unsigned long iters)
{
	char byte = 0;

	for (unsigned long i = 0; i < iters; i++)
		if (write(c->devnull, &byte, 1) != 1)
			return fail(c, "write");
	return 0;
}

static int create_open_target(struct ctx *c)
{
	int fd;

	snprintf(c->open_target, sizeof(c->open_target), "%s/%s", c->workdir, OPEN_TARGET);
	fd = open(c->open_target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(c, "create");
	return close(fd) < 0 ? fail(c, "close") : 0;
}

static int remove_open_target(struct ctx *c)
{
	return unlink(c->open_target) < 0 ? fail(c, "unlink") : 0;
}

static int run_open_close(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int fd = open(c->open_target, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return fail(c, "open");
		if (close(fd) < 0)
			return fail(c, "close");
	}
	return 0;
}

/* Echoes bytes from fd in to fd out until EOF. */
static void __attribute__((noreturn)) echo_child(int in, int out)
{
	char byte;
	ssize_t n;

	while ((n = read(in, &byte, 1)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write(out, &byte, 1) != 1)
			_exit(errno ? errno : EIO);
	}
	_exit(0);
}

/* Closing our write end is the child's signal to exit. */
static int stop_echo_child(struct ctx *c)
{
	int err = 0, reaped;

	if (close(c->to_child) < 0)
		err = fail(c, "close");
	if (close(c->from_child) < 0 && !err)
		err = fail(c, "close");
	reaped = reap(c, c->child, "echo_child");
	return err ? err : reaped;
}

/* One echo child serves the whole metric so no fork lands in a timed loop. */
static int start_echo_child(struct ctx *c)
{
	int down[2], up[2];

	if (pipe2(down, O_CLOEXEC) < 0)
		return fail(c, "pipe");
	if (pipe2(up, O_CLOEXEC) < 0) {
		int err = fail(c, "pipe");

		close(down[0]);
		close(down[1]);
		return err;
	}
	c->child = fork();
	if (c->child < 0) {
		int err = fail(c, "fork");

		close(down[0]);
		close(down[1]);
		close(up[0]);
		close(up[1]);
		return err;
	}
	if (c->child == 0) {
		/* Our copy of the write end would keep the child from ever seeing EOF. */
		if (close(down[1]) < 0 || close(up[0]) < 0)
			_exit(errno);
		echo_child(down[0], up[1]);
	}
	c->to_child = down[1];
	c->from_child = up[0];
	if (close(down[0]) < 0 || close(up[1]) < 0) {
		int err = fail(c, "close");

		stop_echo_child(c);
		return err;
	}
	return 0;
}

static int run_pipe_rtt(struct ctx *c, unsigned long iters)
{
	char byte = 0;

	for (unsigned long i = 0; i < iters; i++) {
		if (write(c->to_child, &byte, 1) != 1)
			return fail(c, "write");
		ssize_t n = read(c->from_child, &byte, 1);

		if (n < 0)
			return fail(c, "read");
		if (n == 0) {
			errno = EPIPE; /* the child exited early */
			return fail(c, "read");
		}
	}
	return 0;
}

static int run_fork_exit(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return fail(c, "fork");
		if (pid == 0)
			_exit(0);
		int err = reap(c, pid, "child");

		if (err)
			return err;
	}
	return 0;
}

static int run_fork_exec(struct ctx *c, unsigned long iters)
{
	static char *const exec_argv[] = { "agent", "--exit-now", NULL };

	for (unsigned long i = 0; i < iters; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return fail(c, "fork");
		if (pid == 0) {
			/* /proc/self/exe is /init in PID-1 mode and ourselves here. */
			execve("/proc/self/exe", exec_argv, environ);
			_exit(errno);
		}
		int err = reap(c, pid, "execve");

		if (err)
			return err;
	}
	return 0;
}

static const struct metric metrics[] = {
	{ "syscall.null", NULL, run_null, NULL },
	{ "syscall.read", open_devnull, run_read, close_devnull },
	{ "syscall.write", open_devnull, run_write, close_devnull },
	{ "syscall.open_close", create_open_target, run_open_close, remove_open_target },
	{ "ipc.pipe_rtt", start_echo_child, run_pipe_rtt, stop_echo_child },
	{ "proc.fork_exit", NULL, run_fork_exit, NULL },
	{ "proc.fork_exec", NULL, run_fork_exec, NULL },
};

/* Not a timed metric, but selectable with KL_ONLY like one. */
#define MEMINFO "meminfo"

/* ---- harness ------------------------------------------------------------ */

/* Cost of the clock reads that bracket every timed interval. */
static int64_t clock_overhead_ns(void)
{
	int64_t best = INT64_MAX;

	for (int i = 0; i < 16; i++) {
		int64_t t0 = now_ns();
		int64_t t = now_ns() - t0;

		if (t < best)
			best = t;
	}
	return best;
}

/* Doubles iters until one interval reaches the target, so timer resolution is noise. */
static int calibrate(const struct metric *m, struct ctx *c, int64_t target_ns,
		     unsigned long *iters)
{
	for (unsigned long n = 1;; n *= 2) {
		int64_t t0 = now_ns();
		int err = m->run(c, n);
		int64_t t = now_ns() - t0;

		if (err)
			return err;
		if (t >= target_ns || n >= MAX_ITERS) {
			*iters = n;
			return 0;
		}
	}
}

static void run_metric(const struct metric *m, struct ctx *c, const struct options *o,
		       int64_t overhead_ns)
{
	/*
	 * Samples are held back until teardown succeeds, so a metric gets
	 * either all its samples or one na record.
	 */
	double per_op_ns[MAX_REPEATS];
	unsigned long iters = 0;
	int err;

	c->reason[0] = '\0';
	if (m->setup && m->setup(c) < 0) {
		emit("t=na metric=%s reason=%s", m->name, c->reason);
		return;
	}
	err = calibrate(m, c, (int64_t)o->target_us * 1000, &iters);
	if (!err)
		err = m->run(c, iters); /* warm-up: caches, TLB, page tables */
	for (long rep = 0; !err && rep < o->repeats; rep++) {
		int64_t t0 = now_ns();

		err = m->run(c, iters);
		int64_t interval = now_ns() - t0 - overhead_ns;

		per_op_ns[rep] = (double)(interval > 0 ? interval : 0) / (double)iters;
	}
	if (m->teardown) {
		int torn = m->teardown(c);

		if (!err)
			err = torn;
	}

	if (err) {
		emit("t=na metric=%s reason=%s", m->name, c->reason);
		return;
	}
	for (long rep = 0; rep < o->repeats; rep++)
		emit("t=sample metric=%s unit=ns rep=%ld iters=%lu value=%.3f",
		     m->name, rep, iters, per_op_ns[rep]);
}

static void report_meminfo(void)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f) {
		emit("t=na metric=" MEMINFO " reason=open_failed_errno_%d", errno);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *end;
		unsigned long long value;

		if (!colon)
			continue;
		*colon = '\0';
		value = strtoull(colon + 1, &end, 10);
		if (end == colon + 1)
			continue;
		emit("t=sample metric=" MEMINFO ".%s unit=%s rep=0 iters=1 value=%llu",
		     sanitize(line), strstr(end, "kB") ? "KiB" : "count", value);
	}
	if (ferror(f))
		emit("t=na metric=" MEMINFO " reason=read_failed_errno_%d", errno);
	if (fclose(f) != 0)
		warn("closing /proc/meminfo: %s", strerror(errno));
}

/* Whether name is one of the comma-separated names in only (NULL: all). */
static int selected(const char *only, const char *name)
{
	size_t len = strlen(name);

	if (!only)
		return 1;
	for (const char *p = only;; ) {
		const char *end = strchrnul(p, ',');

		if ((size_t)(end - p) == len && memcmp(p, name, len) == 0)
			return 1;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

/* A typo in KL_ONLY would otherwise look like a metric that silently vanished. */
static void report_unknown_names(const char *only)
{
	char name[64];

	for (const char *p = only; p && *p; ) {
		size_t len = strcspn(p, ",");
		int known = len == strlen(MEMINFO) && memcmp(p, MEMINFO, len) == 0;

		for (size_t i = 0; !known && i < sizeof(metrics) / sizeof(metrics[0]); i++)
			known = strlen(metrics[i].name) == len &&
				memcmp(p, metrics[i].name, len) == 0;
		if (!known && len > 0) {
			snprintf(name, sizeof(name), "%.*s", (int)len, p);
			emit("t=na metric=%s reason=unknown_metric", sanitize(name));
		}
		p += len + (p[len] == ',');
	}
}

static void run_suite(const struct options *o, const char *workdir)
{
	struct utsname u;
	struct timespec res;
	struct ctx c = { .workdir = workdir };
	int64_t overhead_ns;

	if (uname(&u) < 0)
		die("uname: %s", strerror(errno));
	if (clock_getres(CLOCK_MONOTONIC, &res) < 0)
		die("clock_getres: %s", strerror(errno));
	emit("t=hello v=%d agent=" AGENT_NAME " mode=%s arch=%s kernel=%s clock_res_ns=%lld"
	     " repeats=%ld target_us=%ld",
	     RECORD_VERSION, pid1 ? "pid1" : "local", sanitize(u.machine), sanitize(u.release),
	     (long long)res.tv_sec * 1000000000 + res.tv_nsec, o->repeats, o->target_us);
	report_unknown_names(o->only);

	overhead_ns = clock_overhead_ns();
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
		if (selected(o->only, metrics[i].name))
			run_metric(&metrics[i], &c, o, overhead_ns);
	if (selected(o->only, MEMINFO))
		report_meminfo();

	emit("t=end records=%lu", next_seq);
}

/* ---- setup and options -------------------------------------------------- */

static void make_dir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		warn("mkdir %s: %s", path, strerror(errno));
}

static void mount_fs(const char *type, const char *dir, unsigned long flags)
{
	make_dir(dir);
	if (mount(type, dir, type, flags, NULL) < 0 && errno != EBUSY)
		warn("mount %s on %s: %s", type, dir, strerror(errno));
}

/*
 * The kernel opens the console for init only if the initramfs has a
 * /dev/console node; get one from devtmpfs, or make it if that is missing.
 */
static void open_console(void)
{
	int fd = open("/dev/console", O_RDWR | O_NOCTTY);

	if (fd < 0 && errno == ENOENT &&
	    mknod("/dev/console", S_IFCHR | 0600, makedev(5, 1)) == 0)
		fd = open("/dev/console", O_RDWR | O_NOCTTY);
	if (fd < 0)
		return; /* Nowhere to report it; the host sees no records. */
	for (int i = 0; i < 3; i++)
		if (fd != i && dup2(fd, i) < 0)
			warn("dup2 console to fd %d: %s", i, strerror(errno));
	if (fd > 2 && close(fd) < 0)
		warn("close console: %s", strerror(errno));
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0) {
		warn("open %s: %s", path, strerror(errno));
		return;
	}
	n = write(fd, text, strlen(text));
	if (n < 0)
		warn("write %s: %s", path, strerror(errno));
	else if ((size_t)n != strlen(text))
		warn("write %s: short write", path);
	if (close(fd) < 0)
		warn("close %s: %s", path, strerror(errno));
}

/* Returns the work directory. */
static const char *init_system(void)
{
	/* Warnings before open_console() show only if the kernel found a console for us. */
	mount_fs("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	mount_fs("sysfs", "/sys", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	mount_fs("devtmpfs", "/dev", MS_NOSUID);
	open_console();

	/* The host waits for this line, with its printk timestamp, as a boot milestone. */
	write_file("/dev/kmsg", AGENT_NAME ": ready\n");
	/* Only emergencies (panics) may interleave with records from here on. */
	write_file("/proc/sys/kernel/printk", "1");

	if (mkdir("/tmp", 0755) < 0 && errno != EEXIST) {
		warn("mkdir /tmp: %s; working in /", strerror(errno));
		return "/";
	}
	/* rootfs would do as well; tmpfs just keeps the suite's files apart. */
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, NULL) < 0 &&
	    errno != EBUSY)
		warn("mount tmpfs on /tmp: %s; using rootfs", strerror(errno));
	return "/tmp";
}

static long parse_long(const char *what, const char *text, long max)
{
	char *end;
	long value;

	errno = 0;
	value = strtol(text, &end, 10);
	if (errno || end == text || *end || value < 1 || value > max)
		die("%s must be an integer from 1 to %ld, not '%s'", what, max, text);
	return value;
}

static void options_from_env(struct options *o)
{
	const char *v;

	if ((v = getenv("KL_REPEATS")))
		o->repeats = parse_long("KL_REPEATS", v, MAX_REPEATS);
	if ((v = getenv("KL_TARGET_US")))
		o->target_us = parse_long("KL_TARGET_US", v, MAX_TARGET_US);
	if ((v = getenv("KL_ONLY")) && *v)
		o->only = v;
}

static void options_from_argv(struct options *o, int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!val)
			die("usage: agent [--repeats N] [--target-us N] [--only a,b]");
		if (strcmp(opt, "--repeats") == 0)
			o->repeats = parse_long(opt, val, MAX_REPEATS);
		else if (strcmp(opt, "--target-us") == 0)
			o->target_us = parse_long(opt, val, MAX_TARGET_US);
		else if (strcmp(opt, "--only") == 0)
			o->only = *val ? val : NULL;
		else
			die("unknown option '%s'; usage: agent [--repeats N] [--target-us N] [--only a,b]",
			    opt);
	}
}

/* An atexit handler, so that a run ended by die() cleans up too. */
static void remove_local_workdir(void)
{
	if (rmdir(local_workdir) < 0)
		warn("rmdir %s: %s", local_workdir, strerror(errno));
}

int main(int argc, char **argv)
{
	struct options o = { .repeats = 5, .target_us = 2000, .only = NULL };
	const char *workdir;

	/* proc.fork_exec execs us with this; do nothing that would be timed. */
	if (argc > 1 && strcmp(argv[1], "--exit-now") == 0)
		_exit(0);

	pid1 = getpid() == 1;
	if (pid1) {
		/*
		 * Console first, so option errors are seen.  Init's argv may
		 * hold stray boot words, so options come from the environment.
		 */
		workdir = init_system();
		options_from_env(&o);
	} else {
		options_from_env(&o);
		options_from_argv(&o, argc, argv); /* flags override the environment */
		workdir = mkdtemp(local_workdir);
		if (!workdir)
			die("mkdtemp %s: %s", local_workdir, strerror(errno));
		if (atexit(remove_local_workdir) != 0)
			die("atexit failed");
	}

	/* A dead echo child must fail ipc.pipe_rtt with EPIPE, not kill the agent. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die("ignoring SIGPIPE: %s", strerror(errno));

	run_suite(&o, workdir);
	finish(0);
}
