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
 * prints one t=hello, t=meta records (facts about the run that are not
 * measurements, such as the harness overheads), then for each metric either
 * one t=sample per repeat or one t=na saying why it could not run, then one
 * t=sample per /proc/meminfo line, and last t=end records=<number of records
 * before it>.
 *
 * The suite is lmbench-class: system calls, signals, IPC latency and
 * bandwidth, context switches, file system, VM, memory bandwidth, AES in the
 * kernel (AF_ALG) and in user space, idle interrupt rates and block I/O.
 * Each metric is a latency (ns per operation), a bandwidth (MB/s, 10^6
 * bytes per second) or a value it measures itself (see struct metric).
 *
 * Build: gcc -static -O2 -Wall -Wextra -o agent agent.c
 * Options come from the environment (the kernel hands unknown key=value boot
 * arguments to init that way):
 *   KL_REPEATS       samples per metric (11; the slow metrics take at most 3)
 *   KL_TARGET_US     calibrate each sample to last about this long (2000)
 *   KL_ONLY          comma-separated metrics to run (all)
 *   KL_IDLE_MS       irq.*: length of one idle window (1000)
 *   KL_BLOCK_DEV     blk.*: scratch disk, overwritten! (PID-1 mode: the first
 *                    /sys/block/vd*; local mode: none)
 *   KL_BLOCK_MB      blk.*: MiB moved per sample (32)
 *   KL_ALLOC_CAP_MB  mem.alloc_max: stop there (4096; local mode 64)
 * Local mode also accepts --repeats N --target-us N --only a,b --idle-ms N
 * --block-dev PATH, which override the environment.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_alg.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AGENT_NAME "kernellab-agent"
#define RECORD_VERSION 1
#define MAX_ITERS (1UL << 24)
#define MAX_REPEATS 1000
#define MAX_TARGET_US 10000000L
#define MAX_IDLE_MS 60000L
#define MAX_BLOCK_MB 65536L
#define OPEN_TARGET "kl-open-target"
#define USAGE "usage: agent [--repeats N] [--target-us N] [--only a,b] [--idle-ms N] [--block-dev PATH]"

#define KIB 1024UL
#define MIB (1024UL * KIB)

#define SLOW_REPEATS 3          /* the most samples of slow metrics: idle windows, disk passes */
#define RING_MAX 16             /* ctx.*: processes in the largest ring */
#define STREAM_CHUNK (64 * KIB) /* bw.pipe, bw.unix, bw.tcp: bytes per write and per op */
#define FS_FILE_MAX (10 * KIB)  /* fs.create_*, fs.delete_*: the largest file */
#define FAULT_BYTES (4 * MIB)   /* mm.page_fault: the file mapped per pass */
#define SELECT_MAX 100          /* fs.select_*: the most pipes watched */
#define MEM_BYTES (8 * MIB)     /* bw.mem_*: bigger than most L2 caches */
#define AES_BLOCK 16
#define AES256_ROUNDS 14
#define CRYPTO_BYTES (16 * KIB) /* crypto.*: bytes encrypted per op */
#define BLOCK_REQ MIB           /* blk.*: bytes per request */
#define ALLOC_CAP_MB 4096L      /* mem.alloc_max: stop there so big machines finish */
#define LOCAL_ALLOC_CAP_MB 64L  /* ... and in local mode, where the memory is the host's */

extern char **environ;

struct options {
	long repeats;
	long target_us;
	const char *only;      /* comma-separated metric names; NULL means all */
	long idle_ms;
	const char *block_dev; /* NULL: no scratch disk */
	long block_mb;
	long alloc_cap_mb;
};

/* A helper process and the agent's ends of the channel to it (-1: unused). */
struct peer {
	pid_t pid;
	int tx, rx;                /* one descriptor in both for a socket */
	struct sockaddr_in server; /* ipc.tcp_connect: where the helper listens */
};

/* ctx.*: a ring of processes passing a token over pipes (lmbench lat_ctx). */
struct ring {
	int n;                 /* processes in the ring, the agent included */
	int children;          /* forked so far, in pid[] */
	size_t ws_words;       /* working set each process sums when it has the token */
	unsigned long *ws;     /* the agent's working set */
	pid_t pid[RING_MAX];
	int pipe[RING_MAX][2]; /* child i reads pipe i-1 and writes pipe i; the agent writes
				  pipe 0 and reads pipe n-1 */
	int solo[RING_MAX][2]; /* the same hops made by the agent alone: the overhead */
};

/* fs.select_*: pipes nobody writes to. */
struct selection {
	int n;
	int pipe[SELECT_MAX][2];
	fd_set watched;
	int max_fd;
};

/* AES-256's 15 round keys, 4 little-endian words each (as aes_generic's key_enc). */
struct aes256 {
	uint32_t round_keys[4 * (AES256_ROUNDS + 1)];
};

/* State shared by the harness and the metrics' setup/run/teardown. */
struct ctx {
	const struct options *opt;
	const struct metric *metric; /* the one running; run functions read its param */
	const char *workdir;
	char reason[96];        /* why the current metric failed; first failure wins */
	int64_t timed_ns;       /* self-timed metrics: what run() timed */
	double value;           /* REPORTED metrics: what run() measured */
	double twin_value;      /* ... and for the metric's twin */
	int fd;                 /* the metric's file, device or socket; -1 when closed */
	char path[PATH_MAX];    /* the file behind fd, if the metric made one */
	void *buf[2];           /* the metric's buffers; NULL when freed */
	pid_t self;             /* signal.catch */
	struct peer peer;
	struct ring ring;
	struct selection sel;
	struct aes256 aes;
	int alg_op;             /* crypto.aes256cbc_kernel: the socket that encrypts */
};

enum kind {
	LATENCY,   /* ns per operation */
	BANDWIDTH, /* MB/s, from .bytes moved per operation */
	REPORTED,  /* run() measures the value itself into ctx.value, once per sample */
};

/*
 * LATENCY and BANDWIDTH metrics run() `iters` operations, calibrated so a
 * sample lasts about KL_TARGET_US.  The harness times the whole call,
 * unless the metric is self_timed: then run() times only the part that
 * matters (creates but not deletes, faults but not mmap) into ctx.timed_ns.
 *
 * A REPORTED metric may have a twin: a second metric, with the same unit,
 * whose value each run() measures too, into ctx.twin_value, because the two
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
	int (*setup)(struct ctx *);                    /* optional; 0 or -errno */
	int (*run)(struct ctx *, unsigned long iters); /* 0 or -errno */
	int (*teardown)(struct ctx *);                 /* optional; runs iff setup succeeded */
};

static int pid1;
static unsigned long next_seq;
static char local_workdir[] = "/tmp/kl-agent-XXXXXX";
static size_t page_size;
/* Results the compiler must compute, though nothing reads them. */
static volatile unsigned long sink;

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
		if (!isalnum((unsigned char)*p) && !strchr("._+-/,", *p))
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

/* Records a failure that has no errno behind it. */
static int fail_because(struct ctx *c, const char *reason)
{
	if (!c->reason[0])
		snprintf(c->reason, sizeof(c->reason), "%s", reason);
	return -EIO;
}

/* Closes *fd if it is open and marks it closed. */
static int close_fd(struct ctx *c, int *fd)
{
	int err = *fd >= 0 && close(*fd) < 0 ? fail(c, "close") : 0;

	*fd = -1;
	return err;
}

/* Closes one end of a channel: two descriptors, or one socket used both ways. */
static int close_end(int a, int b)
{
	int ret = 0;

	if (a >= 0 && close(a) < 0)
		ret = -1;
	if (b >= 0 && b != a && close(b) < 0)
		ret = -1;
	return ret;
}

/* Reads exactly len bytes; EOF reads as EPIPE (the other side went away). */
static int read_full(struct ctx *c, int fd, void *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n < 0)
			return fail(c, "read");
		if (n == 0) {
			errno = EPIPE;
			return fail(c, "read");
		}
		got += (size_t)n;
	}
	return 0;
}

static int wait_child(struct ctx *c, pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return fail(c, "waitpid");
	return 0;
}

/*
 * Children report failure by exiting with the errno of the call that
 * failed, so a non-zero exit status is reported as that errno.
 */
static int check_exit(struct ctx *c, int status, const char *what)
{
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

static int reap(struct ctx *c, pid_t pid, const char *what)
{
	int status, err = wait_child(c, pid, &status);

	return err ? err : check_exit(c, status, what);
}

/*
 * Writes text to an existing file, such as a /proc setting.  Returns 0, or
 * -1 after warning, so callers that carry on regardless may ignore it.
 */
static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;
	ssize_t n;

	if (fd < 0) {
		warn("open %s: %s", path, strerror(errno));
		return -1;
	}
	n = write(fd, text, strlen(text));
	if (n < 0) {
		warn("write %s: %s", path, strerror(errno));
		ret = -1;
	} else if ((size_t)n != strlen(text)) {
		warn("write %s: short write", path);
		ret = -1;
	}
	if (close(fd) < 0) {
		warn("close %s: %s", path, strerror(errno));
		ret = -1;
	}
	return ret;
}

/* ---- metric helpers ----------------------------------------------------- */

/*
 * noipa: GCC may neither drop nor hoist calls to these, as it could if it
 * saw that a sum is pure or a buffer is never read.
 */
static unsigned long __attribute__((noipa)) sum_words(const unsigned long *w, size_t n)
{
	unsigned long sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += w[i];
	return sum;
}

static void __attribute__((noipa)) fill_words(unsigned long *w, size_t n, unsigned long v)
{
	for (size_t i = 0; i < n; i++)
		w[i] = v;
}

static void __attribute__((noipa)) copy_bytes(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

static int free_buffers(struct ctx *c)
{
	for (int i = 0; i < 2; i++) {
		free(c->buf[i]);
		c->buf[i] = NULL;
	}
	return 0;
}

/* Two buffers of size bytes, written so every page is present and private. */
static int alloc_buffers(struct ctx *c, size_t size)
{
	for (int i = 0; i < 2; i++) {
		c->buf[i] = malloc(size);
		if (!c->buf[i]) {
			int err = fail(c, "malloc");

			free_buffers(c);
			return err;
		}
		memset(c->buf[i], i + 1, size);
	}
	return 0;
}

/* Creates workdir/name holding size bytes and keeps it open in c->fd. */
static int create_file(struct ctx *c, const char *name, size_t size)
{
	static const char zeros[64 * KIB];

	snprintf(c->path, sizeof(c->path), "%s/%s", c->workdir, name);
	c->fd = open(c->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (c->fd < 0)
		return fail(c, "create");
	for (size_t done = 0; done < size;) {
		ssize_t n = write(c->fd, zeros, size - done < sizeof(zeros) ? size - done : sizeof(zeros));

		if (n <= 0) {
			int err = fail(c, "write");

			close_fd(c, &c->fd);
			unlink(c->path);
			return err;
		}
		done += (size_t)n;
	}
	return 0;
}

static int remove_file(struct ctx *c)
{
	int err = close_fd(c, &c->fd);

	if (unlink(c->path) < 0 && !err)
		err = fail(c, "unlink");
	return err;
}

static int close_file(struct ctx *c)
{
	return close_fd(c, &c->fd);
}

/* Sends one byte down out and waits for one to come back on in. */
static int round_trip(struct ctx *c, int out, int in)
{
	char byte = 0;

	if (write(out, &byte, 1) != 1)
		return fail(c, "write");
	return read_full(c, in, &byte, 1);
}

/* ---- system calls and signals ------------------------------------------- */

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
	c->fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	return c->fd < 0 ? fail(c, "open") : 0;
}

static int run_read(struct ctx *c, unsigned long iters)
{
	char byte;

	for (unsigned long i = 0; i < iters; i++)
		if (read(c->fd, &byte, 1) < 0)
			return fail(c, "read");
	return 0;
}

static int run_write(struct ctx *c, unsigned long iters)
{
	char byte = 0;

	for (unsigned long i = 0; i < iters; i++)
		if (write(c->fd, &byte, 1) != 1)
			return fail(c, "write");
	return 0;
}

static int run_fstat(struct ctx *c, unsigned long iters)
{
	struct stat st;

	for (unsigned long i = 0; i < iters; i++)
		if (fstat(c->fd, &st) < 0)
			return fail(c, "fstat");
	return 0;
}

static int create_open_target(struct ctx *c)
{
	return create_file(c, OPEN_TARGET, 0);
}

static int run_open_close(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int fd = open(c->path, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return fail(c, "open");
		if (close(fd) < 0)
			return fail(c, "close");
	}
	return 0;
}

static int run_stat(struct ctx *c, unsigned long iters)
{
	struct stat st;

	for (unsigned long i = 0; i < iters; i++)
		if (stat(c->path, &st) < 0)
			return fail(c, "stat");
	return 0;
}

static volatile sig_atomic_t signals_caught;

static void count_signal(int sig)
{
	(void)sig;
	signals_caught++;
}

static int catch_sigusr1(struct ctx *c)
{
	struct sigaction sa = { .sa_handler = count_signal };

	return sigaction(SIGUSR1, &sa, NULL) < 0 ? fail(c, "sigaction") : 0;
}

static int default_sigusr1(struct ctx *c)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };

	return sigaction(SIGUSR1, &sa, NULL) < 0 ? fail(c, "sigaction") : 0;
}

static int run_sig_install(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int err = catch_sigusr1(c);

		if (err)
			return err;
	}
	return 0;
}

static int start_sig_catch(struct ctx *c)
{
	/* getpid() is a system call in current glibc; keep it out of the loop. */
	c->self = getpid();
	return catch_sigusr1(c);
}

static int run_sig_catch(struct ctx *c, unsigned long iters)
{
	signals_caught = 0;
	for (unsigned long i = 0; i < iters; i++)
		if (kill(c->self, SIGUSR1) < 0)
			return fail(c, "kill");
	/* A signal a process sends itself is handled before kill() returns. */
	if ((unsigned long)signals_caught != iters)
		return fail_because(c, "signal_lost");
	return 0;
}

/* ---- helper processes: echo, stream, connection server ------------------ */

static int stop_peer(struct ctx *c)
{
	int err = close_end(c->peer.tx, c->peer.rx) < 0 ? fail(c, "close") : 0;
	int reaped = reap(c, c->peer.pid, "helper");

	c->peer.tx = c->peer.rx = -1;
	return err ? err : reaped;
}

/*
 * Forks a helper that runs body(in, out) on its end of a channel and exits
 * with what it returns (0 or an errno); the agent keeps tx and rx.  One
 * helper serves a whole metric, so no fork lands in a timed loop.
 */
static int fork_peer(struct ctx *c, int tx, int rx, int in, int out, int (*body)(int in, int out))
{
	pid_t pid = fork();
	int err;

	if (pid < 0) {
		err = fail(c, "fork");
		close_end(tx, rx);
		close_end(in, out);
		return err;
	}
	if (pid == 0) {
		/* The agent's ends would keep the helper from ever seeing EOF. */
		if (close_end(tx, rx) < 0)
			_exit(errno);
		_exit(body(in, out));
	}
	c->peer.pid = pid;
	c->peer.tx = tx;
	c->peer.rx = rx;
	if (close_end(in, out) < 0) {
		err = fail(c, "close");
		stop_peer(c);
		return err;
	}
	return 0;
}

/* Echoes bytes until EOF, or until an empty datagram for UDP. */
static int echo(int in, int out)
{
	char byte;

	for (;;) {
		ssize_t n = read(in, &byte, 1);

		if (n == 0)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write(out, &byte, 1) != 1)
			return errno ? errno : EIO;
	}
}

/* bw.*: writes chunks until the reader goes away (lmbench bw_pipe's writer). */
static int stream_writer(int in, int out)
{
	static const char chunk[STREAM_CHUNK];

	(void)in;
	for (;;)
		if (write(out, chunk, sizeof(chunk)) < 0 && errno != EINTR)
			return errno == EPIPE || errno == ECONNRESET ? 0 : errno;
}

/* A socket bound to an ephemeral port on 127.0.0.1, listening if a stream. */
static int loopback_socket(struct ctx *c, int type, struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return fail(c, "socket");
	*addr = (struct sockaddr_in){ .sin_family = AF_INET,
				      .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) < 0)
		err = fail(c, "bind");
	else if (getsockname(fd, (struct sockaddr *)addr, &len) < 0)
		err = fail(c, "getsockname");
	else if (type == SOCK_STREAM && listen(fd, SOMAXCONN) < 0)
		err = fail(c, "listen");
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* A connected TCP socket pair over loopback, like socketpair(). */
static int tcp_pair(struct ctx *c, int sv[2])
{
	struct sockaddr_in addr;
	int listener = loopback_socket(c, SOCK_STREAM, &addr), err = 0;

	if (listener < 0)
		return listener;
	sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sv[0] < 0)
		err = fail(c, "socket");
	else if (connect(sv[0], (struct sockaddr *)&addr, sizeof(addr)) < 0)
		err = fail(c, "connect");
	else if ((sv[1] = accept4(listener, NULL, NULL, SOCK_CLOEXEC)) < 0)
		err = fail(c, "accept");
	if (err && sv[0] >= 0)
		close(sv[0]);
	if (close(listener) < 0 && !err) {
		err = fail(c, "close");
		close_end(sv[0], sv[1]);
	}
	return err;
}

/* Two UDP sockets on loopback, each connected to the other. */
static int udp_pair(struct ctx *c, int sv[2])
{
	struct sockaddr_in addr[2];
	int err = 0;

	sv[0] = loopback_socket(c, SOCK_DGRAM, &addr[0]);
	if (sv[0] < 0)
		return sv[0];
	sv[1] = loopback_socket(c, SOCK_DGRAM, &addr[1]);
	if (sv[1] < 0) {
		close(sv[0]);
		return sv[1];
	}
	if (connect(sv[0], (struct sockaddr *)&addr[1], sizeof(addr[1])) < 0 ||
	    connect(sv[1], (struct sockaddr *)&addr[0], sizeof(addr[0])) < 0) {
		err = fail(c, "connect");
		close(sv[0]);
		close(sv[1]);
	}
	return err;
}

static int start_pipe_peer(struct ctx *c, int (*body)(int, int))
{
	int down[2], up[2];

	if (pipe2(down, O_CLOEXEC) < 0)
		return fail(c, "pipe");
	if (pipe2(up, O_CLOEXEC) < 0) {
		int err = fail(c, "pipe");

		close_end(down[0], down[1]);
		return err;
	}
	return fork_peer(c, down[1], up[0], down[0], up[1], body);
}

/* The agent keeps sv[0], the helper gets sv[1]. */
static int start_socket_peer(struct ctx *c, int (*make_pair)(struct ctx *, int[2]),
			     int (*body)(int, int))
{
	int sv[2], err = make_pair(c, sv);

	return err ? err : fork_peer(c, sv[0], sv[0], sv[1], sv[1], body);
}

static int unix_pair(struct ctx *c, int sv[2])
{
	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ? fail(c, "socketpair") : 0;
}

static int start_pipe_echo(struct ctx *c)
{
	return start_pipe_peer(c, echo);
}

static int start_unix_echo(struct ctx *c)
{
	return start_socket_peer(c, unix_pair, echo);
}

static int start_tcp_echo(struct ctx *c)
{
	return start_socket_peer(c, tcp_pair, echo);
}

static int start_udp_echo(struct ctx *c)
{
	return start_socket_peer(c, udp_pair, echo);
}

/* UDP has no EOF: an empty datagram tells the echo helper to finish. */
static int stop_udp_echo(struct ctx *c)
{
	int err = 0, stopped;

	if (send(c->peer.tx, "", 0, 0) < 0) {
		err = fail(c, "send");
		if (kill(c->peer.pid, SIGKILL) < 0)
			warn("kill: %s", strerror(errno));
	}
	stopped = stop_peer(c);
	return err ? err : stopped;
}

static int run_rtt(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int err = round_trip(c, c->peer.tx, c->peer.rx);

		if (err)
			return err;
	}
	return 0;
}

static int start_pipe_stream(struct ctx *c)
{
	return start_pipe_peer(c, stream_writer);
}

static int start_unix_stream(struct ctx *c)
{
	return start_socket_peer(c, unix_pair, stream_writer);
}

static int start_tcp_stream(struct ctx *c)
{
	return start_socket_peer(c, tcp_pair, stream_writer);
}

/* bw.pipe, bw.unix, bw.tcp: op = reading one STREAM_CHUNK the helper wrote. */
static int run_stream(struct ctx *c, unsigned long iters)
{
	static char chunk[STREAM_CHUNK];

	for (unsigned long i = 0; i < iters; i++) {
		int err = read_full(c, c->peer.rx, chunk, sizeof(chunk));

		if (err)
			return err;
	}
	return 0;
}

/*
 * ipc.tcp_connect, as lmbench lat_connect: the helper accepts connections
 * and waits for each to close; one that brings a byte tells it to finish.
 */
static int connection_server(int listener, int unused)
{
	(void)unused;
	for (;;) {
		int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
		char byte;
		ssize_t n;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		n = read(fd, &byte, 1);
		if (n < 0) {
			int err = errno;

			close(fd);
			return err;
		}
		if (close(fd) < 0)
			return errno;
		if (n == 1)
			return 0;
	}
}

static int start_connection_server(struct ctx *c)
{
	int listener = loopback_socket(c, SOCK_STREAM, &c->peer.server);

	if (listener < 0)
		return listener;
	return fork_peer(c, -1, -1, listener, -1, connection_server);
}

static int connect_to_server(struct ctx *c)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return fail(c, "socket");
	if (connect(fd, (struct sockaddr *)&c->peer.server, sizeof(c->peer.server)) < 0) {
		int err = fail(c, "connect");

		close(fd);
		return err;
	}
	return fd;
}

/* op = socket + connect + close; the server's accept and close overlap the next op. */
static int run_connect(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int fd = connect_to_server(c);

		if (fd < 0)
			return fd;
		if (close(fd) < 0)
			return fail(c, "close");
	}
	return 0;
}

static int stop_connection_server(struct ctx *c)
{
	int fd = connect_to_server(c), err = fd < 0 ? fd : 0, stopped;

	if (!err && write(fd, "", 1) != 1)
		err = fail(c, "write");
	if (fd >= 0 && close(fd) < 0 && !err)
		err = fail(c, "close");
	if (err && kill(c->peer.pid, SIGKILL) < 0)
		warn("kill: %s", strerror(errno));
	stopped = stop_peer(c);
	return err ? err : stopped;
}

/* ---- processes ---------------------------------------------------------- */

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

/*
 * ctx.ringN_Wk, as lmbench lat_ctx: N processes (the agent one of them) pass
 * a token round a ring of pipes; each, on getting it, sums its own W KiB
 * working set.  From the time per hop the harness subtracts the same pipe
 * writes, reads and sums made by the agent alone through N other pipes,
 * leaving the context switch.  As in lmbench the agent sums one working set
 * there, which stays cached: refilling the cache after a switch counts as
 * part of the switch.
 */

/* A private working set: written, so no page is the shared zero page. */
static int new_working_set(unsigned long **ws, size_t words)
{
	*ws = NULL;
	if (!words)
		return 0;
	*ws = malloc(words * sizeof(**ws));
	if (!*ws)
		return -1;
	for (size_t i = 0; i < words; i++)
		(*ws)[i] = i;
	return 0;
}

/* Child i of the ring; returns its exit status. */
static int ring_member(const struct ring *r, int i)
{
	int in = r->pipe[i - 1][0], out = r->pipe[i][1];
	unsigned long *ws;
	char token;

	/* Any other pipe end held open here would keep the ring from seeing EOF. */
	for (int k = 0; k < r->n; k++)
		for (int end = 0; end < 2; end++) {
			int fd = r->pipe[k][end];

			if ((fd != in && fd != out && close(fd) < 0) || close(r->solo[k][end]) < 0)
				return errno;
		}
	if (new_working_set(&ws, r->ws_words) < 0)
		return ENOMEM;
	for (;;) {
		ssize_t n = read(in, &token, 1);

		if (n == 0)
			return 0; /* the agent closed the ring */
		if (n < 0)
			return errno;
		sink = sum_words(ws, r->ws_words);
		if (write(out, &token, 1) != 1)
			return errno;
	}
}

/* Closing pipe 0 ends the ring: each member exits on EOF, closing the next pipe. */
static int stop_ring(struct ctx *c)
{
	struct ring *r = &c->ring;
	int err = 0;

	for (int k = 0; k < RING_MAX; k++)
		for (int end = 0; end < 2; end++) {
			int closed = close_fd(c, &r->pipe[k][end]);
			int closed_solo = close_fd(c, &r->solo[k][end]);

			if (!err)
				err = closed ? closed : closed_solo;
		}
	for (int i = 0; i < r->children; i++) {
		int reaped = reap(c, r->pid[i], "ring_member");

		if (!err)
			err = reaped;
	}
	r->children = 0;
	free(r->ws);
	r->ws = NULL;
	return err;
}

/* param[0]: processes in the ring; param[1]: bytes of working set each. */
static int start_ring(struct ctx *c)
{
	struct ring *r = &c->ring;
	int err = 0;

	r->n = (int)c->metric->param[0];
	r->ws_words = (size_t)c->metric->param[1] / sizeof(unsigned long);
	r->children = 0;
	for (int k = 0; k < RING_MAX; k++)
		r->pipe[k][0] = r->pipe[k][1] = r->solo[k][0] = r->solo[k][1] = -1;
	if (new_working_set(&r->ws, r->ws_words) < 0)
		return fail(c, "malloc");
	for (int k = 0; k < r->n && !err; k++)
		if (pipe2(r->pipe[k], O_CLOEXEC) < 0 || pipe2(r->solo[k], O_CLOEXEC) < 0)
			err = fail(c, "pipe");
	for (int i = 1; i < r->n && !err; i++) {
		pid_t pid = fork();

		if (pid < 0)
			err = fail(c, "fork");
		else if (pid == 0)
			_exit(ring_member(r, i));
		else
			r->pid[r->children++] = pid;
	}
	/* The agent keeps only its own two ring ends, so EOF can travel round. */
	for (int k = 0; k < r->n && !err; k++) {
		if (k != 0)
			err = close_fd(c, &r->pipe[k][1]);
		if (k != r->n - 1 && !err)
			err = close_fd(c, &r->pipe[k][0]);
	}
	if (err)
		stop_ring(c);
	return err;
}

/*
 * iters laps round the ring.  A lap is n switches, so the self-timed ns
 * are (ring - solo) / n, and the harness's ns per lap is ns per switch.
 */
static int run_ring(struct ctx *c, unsigned long iters)
{
	struct ring *r = &c->ring;
	int64_t t0 = now_ns(), ring_ns, solo_ns;

	for (unsigned long i = 0; i < iters; i++) {
		int err = round_trip(c, r->pipe[0][1], r->pipe[r->n - 1][0]);

		if (err)
			return err;
		sink = sum_words(r->ws, r->ws_words);
	}
	ring_ns = now_ns() - t0;

	t0 = now_ns();
	for (unsigned long i = 0; i < iters; i++)
		for (int k = 0; k < r->n; k++) {
			int err = round_trip(c, r->solo[k][1], r->solo[k][0]);

			if (err)
				return err;
			sink = sum_words(r->ws, r->ws_words);
		}
	solo_ns = now_ns() - t0;

	/* A lap of the ring is n switches. */
	c->timed_ns = (ring_ns - solo_ns) / r->n;
	return 0;
}

/* ---- file system and VM ------------------------------------------------- */

/* Files in the fs.* directory are named by number, relative to its descriptor. */
static int create_numbered_file(struct ctx *c, int dir, unsigned long i, size_t size)
{
	static const char data[FS_FILE_MAX];
	char name[24];
	int fd;

	snprintf(name, sizeof(name), "%lu", i);
	fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(c, "create");
	if (size && write(fd, data, size) != (ssize_t)size) {
		int err = fail(c, "write");

		close(fd);
		return err;
	}
	return close(fd) < 0 ? fail(c, "close") : 0;
}

static int remove_numbered_files(struct ctx *c, int dir, unsigned long count)
{
	char name[24];

	for (unsigned long i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "%lu", i);
		if (unlinkat(dir, name, 0) < 0)
			return fail(c, "unlink");
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

static int run_fs(struct ctx *c, unsigned long iters)
{
	size_t size = (size_t)c->metric->param[0];
	char path[PATH_MAX];
	unsigned long made = 0;
	int64_t t0, create_ns, delete_ns;
	int dir, err = 0, removed;

	snprintf(path, sizeof(path), "%s/kl-fs", c->workdir);
	if (mkdir(path, 0755) < 0)
		return fail(c, "mkdir");
	dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		err = fail(c, "open");
		rmdir(path);
		return err;
	}
	t0 = now_ns();
	while (made < iters && !(err = create_numbered_file(c, dir, made, size)))
		made++;
	create_ns = now_ns() - t0;

	t0 = now_ns();
	removed = remove_numbered_files(c, dir, made);
	delete_ns = now_ns() - t0;

	if (!err)
		err = removed;
	if (close(dir) < 0 && !err)
		err = fail(c, "close");
	if (rmdir(path) < 0 && !err)
		err = fail(c, "rmdir");
	c->timed_ns = c->metric->param[1] == TIME_DELETES ? delete_ns : create_ns;
	return err;
}

static int create_mmap_file(struct ctx *c)
{
	return create_file(c, "kl-mmap", MIB);
}

/*
 * mm.mmap_1m, as lmbench lat_mmap: op = mmap 1 MiB of a work-directory file
 * (tmpfs in PID-1 mode), read one byte per page, munmap.  The reads fault
 * in page-cache pages, up to 16 per fault with fault-around.
 */
static int run_mmap(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		const unsigned char *p = mmap(NULL, MIB, PROT_READ, MAP_SHARED, c->fd, 0);
		unsigned long sum = 0;

		if (p == MAP_FAILED)
			return fail(c, "mmap");
		for (size_t off = 0; off < MIB; off += page_size)
			sum += p[off];
		sink = sum;
		if (munmap((void *)p, MIB) < 0)
			return fail(c, "munmap");
	}
	return 0;
}

static int create_fault_file(struct ctx *c)
{
	return create_file(c, "kl-fault", FAULT_BYTES);
}

/*
 * mm.page_fault: op = the first write to one page of a MAP_PRIVATE mapping
 * of a cached file: one fault each, which copies the page (a read would be
 * served by fault-around, many pages per fault).  Self-timed: only the
 * writes count, not the mmap and munmap around each pass over the file.
 */
static int run_page_fault(struct ctx *c, unsigned long iters)
{
	size_t file_pages = FAULT_BYTES / page_size;

	c->timed_ns = 0;
	for (unsigned long done = 0; done < iters;) {
		size_t pages = iters - done < file_pages ? iters - done : file_pages;
		volatile char *p = mmap(NULL, pages * page_size, PROT_READ | PROT_WRITE,
					MAP_PRIVATE, c->fd, 0);
		int64_t t0;

		if (p == MAP_FAILED)
			return fail(c, "mmap");
		t0 = now_ns();
		for (size_t k = 0; k < pages; k++)
			p[k * page_size] = 1;
		c->timed_ns += now_ns() - t0;
		if (munmap((void *)p, pages * page_size) < 0)
			return fail(c, "munmap");
		done += pages;
	}
	return 0;
}

static int stop_select(struct ctx *c)
{
	int err = 0;

	for (int k = 0; k < c->sel.n; k++)
		if (close_end(c->sel.pipe[k][0], c->sel.pipe[k][1]) < 0 && !err)
			err = fail(c, "close");
	c->sel.n = 0;
	return err;
}

/* param[0]: pipes to watch; their write ends stay open, so none is ready. */
static int start_select(struct ctx *c)
{
	struct selection *s = &c->sel;

	s->n = 0;
	s->max_fd = -1;
	FD_ZERO(&s->watched);
	while (s->n < c->metric->param[0]) {
		int *p = s->pipe[s->n];

		if (pipe2(p, O_CLOEXEC) < 0) {
			int err = fail(c, "pipe");

			stop_select(c);
			return err;
		}
		s->n++;
		/* select() cannot watch descriptors from FD_SETSIZE on. */
		if (p[0] >= FD_SETSIZE) {
			int err = fail_because(c, "fd_beyond_FD_SETSIZE");

			stop_select(c);
			return err;
		}
		FD_SET(p[0], &s->watched);
		if (p[0] > s->max_fd)
			s->max_fd = p[0];
	}
	return 0;
}

/* fs.select_*, as lmbench lat_select: op = select() with a zero timeout. */
static int run_select(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		fd_set ready = c->sel.watched;
		struct timeval timeout = { 0, 0 };
		int n = select(c->sel.max_fd + 1, &ready, NULL, NULL, &timeout);

		if (n < 0)
			return fail(c, "select");
		if (n > 0)
			return fail_because(c, "select_found_a_ready_pipe");
	}
	return 0;
}

/* ---- memory ------------------------------------------------------------- */

static int alloc_mem_buffers(struct ctx *c)
{
	return alloc_buffers(c, MEM_BYTES);
}

/* bw.mem_read: op = summing the buffer's words. */
static int run_mem_read(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++)
		sink = sum_words(c->buf[0], MEM_BYTES / sizeof(unsigned long));
	return 0;
}

/* bw.mem_write: op = storing every word of the buffer. */
static int run_mem_write(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++)
		fill_words(c->buf[0], MEM_BYTES / sizeof(unsigned long), i);
	return 0;
}

/* bw.mem_copy: op = memcpy of the buffer, counted as MEM_BYTES moved. */
static int run_mem_copy(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++)
		copy_bytes(c->buf[1], c->buf[0], MEM_BYTES);
	return 0;
}

/* The child of mem.alloc_max; returns its exit status. */
static int alloc_until_refused(int out, long cap_mb)
{
	for (long mb = 0; mb < cap_mb; mb++) {
		volatile char *chunk = malloc(MIB);

		if (!chunk)
			return 0;
		for (size_t off = 0; off < MIB; off += page_size)
			chunk[off] = 1;
		if (write(out, "", 1) != 1)
			return errno;
	}
	return 0;
}

/*
 * mem.alloc_max, in MiB: how much memory one process gets.  A child mallocs
 * 1 MiB chunks and writes every page of each, then one byte to a pipe, until
 * malloc fails, the OOM killer ends it or it reaches KL_ALLOC_CAP_MB; the
 * bytes that came through the pipe are the MiB it got.  Slow (it touches all
 * of memory), so at most SLOW_REPEATS samples.
 */
static int run_alloc_max(struct ctx *c, unsigned long iters)
{
	char buf[256];
	int p[2], status, waited, err = 0;
	long got = 0;
	pid_t pid;

	(void)iters;
	if (pipe2(p, O_CLOEXEC) < 0)
		return fail(c, "pipe");
	pid = fork();
	if (pid < 0) {
		err = fail(c, "fork");
		close_end(p[0], p[1]);
		return err;
	}
	if (pid == 0) {
		if (close(p[0]) < 0)
			_exit(errno);
		_exit(alloc_until_refused(p[1], c->opt->alloc_cap_mb));
	}
	if (close(p[1]) < 0)
		err = fail(c, "close");
	while (!err) {
		ssize_t n = read(p[0], buf, sizeof(buf));

		if (n == 0)
			break;
		if (n > 0)
			got += n;
		else if (errno != EINTR)
			err = fail(c, "read");
	}
	/* Closed before waiting, so a child still writing gets EPIPE, not stuck. */
	if (close(p[0]) < 0 && !err)
		err = fail(c, "close");
	waited = wait_child(c, pid, &status);
	if (!err)
		err = waited;
	/* The OOM killer's SIGKILL is one of the normal ends. */
	if (!err && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
		err = check_exit(c, status, "alloc_child");
	c->value = (double)got;
	return err;
}

/* ---- AES-256-CBC, in user space and through AF_ALG ----------------------- */

/*
 * The user-space AES is the same kind of code as the kernel's generic "aes"
 * cipher (crypto/aes_generic.c, CONFIG_CRYPTO_AES), which AF_ALG's cbc(aes)
 * runs on when no accelerated driver (AES-NI, ARMv8 CE) is built in: 32-bit
 * T-tables, each round unrolled into 16 table look-ups on 32-bit words.
 * The crypto.* pair reproduces a study that ran one AES in a kernel module
 * and in a process, so the two must differ only in where they run, not in
 * how well they are written (a byte-oriented AES is about 8 times slower).
 * Blocks are loaded and stored as little-endian words byte by byte, as
 * aes_generic does with get_unaligned_le32, so the code is right on
 * big-endian machines too.
 */
static const uint8_t aes_sbox[256] = {
	0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
	0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
	0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
	0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
	0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
	0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
	0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
	0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
	0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
	0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
	0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
	0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
	0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
	0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
	0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
	0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
};

/* NIST SP 800-38A F.2.5 CBC-AES256.Encrypt; its key and IV serve the benchmarks too. */
static const uint8_t nist_key[32] = {
	0x60, 0x3d, 0xeb, 0x10, 0x15, 0xca, 0x71, 0xbe, 0x2b, 0x73, 0xae, 0xf0, 0x85, 0x7d, 0x77, 0x81,
	0x1f, 0x35, 0x2c, 0x07, 0x3b, 0x61, 0x08, 0xd7, 0x2d, 0x98, 0x10, 0xa3, 0x09, 0x14, 0xdf, 0xf4,
};
static const uint8_t nist_iv[AES_BLOCK] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
};
static const uint8_t nist_plaintext[4 * AES_BLOCK] = {
	0x6b, 0xc1, 0xbe, 0xe2, 0x2e, 0x40, 0x9f, 0x96, 0xe9, 0x3d, 0x7e, 0x11, 0x73, 0x93, 0x17, 0x2a,
	0xae, 0x2d, 0x8a, 0x57, 0x1e, 0x03, 0xac, 0x9c, 0x9e, 0xb7, 0x6f, 0xac, 0x45, 0xaf, 0x8e, 0x51,
	0x30, 0xc8, 0x1c, 0x46, 0xa3, 0x5c, 0xe4, 0x11, 0xe5, 0xfb, 0xc1, 0x19, 0x1a, 0x0a, 0x52, 0xef,
	0xf6, 0x9f, 0x24, 0x45, 0xdf, 0x4f, 0x9b, 0x17, 0xad, 0x2b, 0x41, 0x7b, 0xe6, 0x6c, 0x37, 0x10,
};
static const uint8_t nist_ciphertext[4 * AES_BLOCK] = {
	0xf5, 0x8c, 0x4c, 0x04, 0xd6, 0xe5, 0xf1, 0xba, 0x77, 0x9e, 0xab, 0xfb, 0x5f, 0x7b, 0xfb, 0xd6,
	0x9c, 0xfc, 0x4e, 0x96, 0x7e, 0xdb, 0x80, 0x8d, 0x67, 0x9f, 0x77, 0x7b, 0xc6, 0x70, 0x2c, 0x7d,
	0x39, 0xf2, 0x33, 0x69, 0xa9, 0xd9, 0xba, 0xcf, 0xa5, 0x30, 0xe2, 0x63, 0x04, 0x23, 0x14, 0x61,
	0xb2, 0xeb, 0x05, 0xe2, 0xc3, 0x9b, 0xe9, 0xfc, 0xda, 0x6c, 0x19, 0x07, 0x8c, 0x6a, 0x9d, 0x1b,
};

/*
 * The T-tables, as aes_generic's crypto_ft_tab and crypto_fl_tab: aes_ft[r][x]
 * is what input byte x in row r adds to its output column in a full round
 * (S-box, then MixColumns), aes_fl[r][x] the same in the last round, which
 * has no MixColumns.  Cache-line aligned like the kernel's.
 */
static uint32_t aes_ft[4][256] __attribute__((aligned(64)));
static uint32_t aes_fl[4][256] __attribute__((aligned(64)));

/* Multiplication by x (that is, 2) in AES's GF(2^8). */
static uint8_t xtime(uint8_t b)
{
	return (uint8_t)((b << 1) ^ (b & 0x80 ? 0x1b : 0));
}

static uint32_t load_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

/*
 * Computed from the S-box rather than written out as 8 KiB of data.  A
 * column is a little-endian word, row 0 in its low byte.  MixColumns sends
 * s in row 0 to (2s, s, s, 3s); in row r the same column is rotated down r
 * rows, which is a rotation left by 8r bits.
 */
static void aes_init_tables(void)
{
	for (int x = 0; x < 256; x++) {
		uint8_t s = aes_sbox[x];
		uint32_t col = (uint32_t)xtime(s) | (uint32_t)s << 8 | (uint32_t)s << 16 |
			       (uint32_t)(xtime(s) ^ s) << 24;

		for (int r = 0; r < 4; r++) {
			aes_ft[r][x] = col;
			aes_fl[r][x] = (uint32_t)s << 8 * r;
			col = col << 8 | col >> 24;
		}
	}
}

static uint32_t sub_word(uint32_t w)
{
	return (uint32_t)aes_sbox[w & 0xff] | (uint32_t)aes_sbox[w >> 8 & 0xff] << 8 |
	       (uint32_t)aes_sbox[w >> 16 & 0xff] << 16 | (uint32_t)aes_sbox[w >> 24] << 24;
}

/* Key expansion over little-endian words, as the kernel's aes_expandkey. */
static void aes256_expand_key(struct aes256 *k, const uint8_t key[32])
{
	uint32_t *w = k->round_keys;
	uint8_t rcon = 1;

	for (int i = 0; i < 8; i++)
		w[i] = load_le32(key + 4 * i);
	for (int i = 8; i < 4 * (AES256_ROUNDS + 1); i++) {
		uint32_t t = w[i - 1];

		if (i % 8 == 0) {
			/* RotWord (a right rotation of a little-endian word), SubWord, Rcon */
			t = sub_word(t >> 8 | t << 24) ^ rcon;
			rcon = xtime(rcon);
		} else if (i % 8 == 4) {
			t = sub_word(t);
		}
		w[i] = w[i - 8] ^ t;
	}
}

/* Output column of a round: aes_generic's f_rn, four look-ups and the round key. */
static inline uint32_t aes_column(const uint32_t table[4][256], uint32_t row0, uint32_t row1,
				  uint32_t row2, uint32_t row3, uint32_t key)
{
	return table[0][row0 & 0xff] ^ table[1][row1 >> 8 & 0xff] ^
	       table[2][row2 >> 16 & 0xff] ^ table[3][row3 >> 24] ^ key;
}

/*
 * One round from state in to state out: aes_generic's f_nround with table
 * aes_ft, its f_lround with aes_fl.  ShiftRows is in the arguments: row r of
 * output column n comes from input column n + r.  Written out and always
 * inlined, so the rounds become straight-line code on 32-bit registers as
 * the kernel's macros do (a loop over the columns, GCC would vectorize).
 */
static inline __attribute__((always_inline)) void
aes_round(uint32_t out[4], const uint32_t in[4], const uint32_t table[4][256], const uint32_t *key)
{
	out[0] = aes_column(table, in[0], in[1], in[2], in[3], key[0]);
	out[1] = aes_column(table, in[1], in[2], in[3], in[0], key[1]);
	out[2] = aes_column(table, in[2], in[3], in[0], in[1], key[2]);
	out[3] = aes_column(table, in[3], in[0], in[1], in[2], key[3]);
}

/* Encrypts one block, held as four little-endian words, in place. */
static void aes256_encrypt_block(const struct aes256 *k, uint32_t block[4])
{
	const uint32_t *rk = k->round_keys;
	uint32_t b0[4], b1[4]; /* the state, alternately */

	for (int n = 0; n < 4; n++)
		b0[n] = block[n] ^ rk[n];
	aes_round(b1, b0, aes_ft, rk + 4);
	aes_round(b0, b1, aes_ft, rk + 8);
	aes_round(b1, b0, aes_ft, rk + 12);
	aes_round(b0, b1, aes_ft, rk + 16);
	aes_round(b1, b0, aes_ft, rk + 20);
	aes_round(b0, b1, aes_ft, rk + 24);
	aes_round(b1, b0, aes_ft, rk + 28);
	aes_round(b0, b1, aes_ft, rk + 32);
	aes_round(b1, b0, aes_ft, rk + 36);
	aes_round(b0, b1, aes_ft, rk + 40);
	aes_round(b1, b0, aes_ft, rk + 44);
	aes_round(b0, b1, aes_ft, rk + 48);
	aes_round(b1, b0, aes_ft, rk + 52);
	aes_round(b0, b1, aes_fl, rk + 56); /* round 14, the last: no MixColumns */
	for (int n = 0; n < 4; n++)
		block[n] = b0[n];
}

/*
 * len must be a multiple of AES_BLOCK; in and out may be the same buffer.
 * The chaining value stays in words from block to block: the kernel's cbc
 * template XORs a word at a time, and bytes XORed in memory and read back
 * as words would stall store forwarding on every block.
 */
static void aes256_cbc_encrypt(const struct aes256 *k, const uint8_t iv[AES_BLOCK],
			       const uint8_t *in, uint8_t *out, size_t len)
{
	uint32_t chain[4];

	for (int n = 0; n < 4; n++)
		chain[n] = load_le32(iv + 4 * n);
	for (size_t off = 0; off < len; off += AES_BLOCK) {
		for (int n = 0; n < 4; n++)
			chain[n] ^= load_le32(in + off + 4 * n);
		aes256_encrypt_block(k, chain);
		for (int n = 0; n < 4; n++)
			store_le32(out + off + 4 * n, chain[n]);
	}
}

static bool aes_selftest(void)
{
	struct aes256 k;
	uint8_t out[sizeof(nist_plaintext)];

	aes256_expand_key(&k, nist_key);
	aes256_cbc_encrypt(&k, nist_iv, nist_plaintext, out, sizeof(out));
	return memcmp(out, nist_ciphertext, sizeof(out)) == 0;
}

/* crypto.*: a checked key schedule, buf[0] plaintext and buf[1] for the ciphertext. */
static int start_user_aes(struct ctx *c)
{
	uint8_t *plain;
	int err;

	aes_init_tables();
	if (!aes_selftest())
		return fail_because(c, "aes_selftest_failed");
	aes256_expand_key(&c->aes, nist_key);
	err = alloc_buffers(c, CRYPTO_BYTES);
	if (err)
		return err;
	plain = c->buf[0];
	for (size_t i = 0; i < CRYPTO_BYTES; i++)
		plain[i] = (uint8_t)(i * 7 + 1);
	return 0;
}

/* crypto.aes256cbc_user: op = encrypting CRYPTO_BYTES, IV reset each time. */
static int run_user_aes(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++)
		aes256_cbc_encrypt(&c->aes, nist_iv, c->buf[0], c->buf[1], CRYPTO_BYTES);
	return 0;
}

/* One AF_ALG request: encrypt len bytes with nist_iv, read the ciphertext back. */
static int alg_encrypt(struct ctx *c, const void *in, void *out, size_t len)
{
	union { /* aligned for the cmsghdrs inside */
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(uint32_t)) +
			 CMSG_SPACE(sizeof(struct af_alg_iv) + AES_BLOCK)];
	} control;
	struct iovec iov = { .iov_base = (void *)in, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
	struct af_alg_iv iv = { .ivlen = AES_BLOCK };
	uint32_t op = ALG_OP_ENCRYPT;
	struct cmsghdr *cmsg;
	ssize_t n;

	memset(&control, 0, sizeof(control));
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_ALG;
	cmsg->cmsg_type = ALG_SET_OP;
	cmsg->cmsg_len = CMSG_LEN(sizeof(op));
	memcpy(CMSG_DATA(cmsg), &op, sizeof(op));
	cmsg = CMSG_NXTHDR(&msg, cmsg);
	cmsg->cmsg_level = SOL_ALG;
	cmsg->cmsg_type = ALG_SET_IV;
	cmsg->cmsg_len = CMSG_LEN(sizeof(iv) + AES_BLOCK);
	memcpy(CMSG_DATA(cmsg), &iv, sizeof(iv));
	memcpy(CMSG_DATA(cmsg) + sizeof(iv), nist_iv, AES_BLOCK);

	n = sendmsg(c->alg_op, &msg, 0);
	if (n < 0)
		return fail(c, "sendmsg");
	if ((size_t)n != len)
		return fail_because(c, "sendmsg_short");
	return read_full(c, c->alg_op, out, len);
}

/* The kernel's ciphertext of the benchmark buffer must be ours. */
static int check_kernel_aes(struct ctx *c)
{
	uint8_t *ours = malloc(CRYPTO_BYTES);
	int err;

	if (!ours)
		return fail(c, "malloc");
	aes256_cbc_encrypt(&c->aes, nist_iv, c->buf[0], ours, CRYPTO_BYTES);
	err = alg_encrypt(c, c->buf[0], c->buf[1], CRYPTO_BYTES);
	if (!err && memcmp(ours, c->buf[1], CRYPTO_BYTES) != 0)
		err = fail_because(c, "aes_mismatch");
	free(ours);
	return err;
}

static int stop_kernel_aes(struct ctx *c)
{
	int err = close_fd(c, &c->alg_op), closed = close_fd(c, &c->fd);

	free_buffers(c);
	return err ? err : closed;
}

static int start_kernel_aes(struct ctx *c)
{
	struct sockaddr_alg sa = { .salg_family = AF_ALG, .salg_type = "skcipher",
				   .salg_name = "cbc(aes)" };
	int err = start_user_aes(c);

	if (err)
		return err;
	c->fd = socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		err = fail(c, "socket");
	else if (bind(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		err = fail(c, "bind");
	else if (setsockopt(c->fd, SOL_ALG, ALG_SET_KEY, nist_key, sizeof(nist_key)) < 0)
		err = fail(c, "setsockopt");
	else if ((c->alg_op = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		err = fail(c, "accept");
	else
		err = check_kernel_aes(c);
	if (err)
		stop_kernel_aes(c);
	return err;
}

/* crypto.aes256cbc_kernel: the same op as run_user_aes, done by the kernel. */
static int run_kernel_aes(struct ctx *c, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int err = alg_encrypt(c, c->buf[0], c->buf[1], CRYPTO_BYTES);

		if (err)
			return err;
	}
	return 0;
}

/* ---- idle interrupts ---------------------------------------------------- */

struct irq_counts {
	unsigned long long timer, total;
};

/*
 * Which /proc/interrupts lines are timer ticks, by name (first column) or
 * description: x86 LOC is the local APIC timer and IRQ 0 "timer" the
 * PIT/HPET; arm64 has arch_timer; s390 CLK is the clock comparator; powerpc
 * LOC is the decrementer; some platforms name theirs "timer" or TMR.  Other
 * lines describing themselves as timers (e.g. Hyper-V stimer) count too.
 */
static bool is_timer_line(const char *name, const char *description)
{
	static const char *const names[] = { "LOC", "timer", "arch_timer", "CLK", "TMR" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return strstr(description, "timer") != NULL;
}

static int count_words(const char *s)
{
	int n = 0;

	for (bool in_word = false; *s; s++) {
		bool space = isspace((unsigned char)*s);

		n += !space && !in_word;
		in_word = !space;
	}
	return n;
}

/*
 * Sums /proc/interrupts over all CPUs: every line into total, timer lines
 * into timer.  If names is not NULL, lists the timer lines there.
 */
static int read_interrupts(struct ctx *c, struct irq_counts *sum, char *names, size_t names_len)
{
	FILE *f = fopen("/proc/interrupts", "re");
	char *line = NULL;
	size_t cap = 0;
	int cpus, err = 0;

	if (!f)
		return fail(c, "open");
	*sum = (struct irq_counts){ 0, 0 };
	errno = 0;
	if (getline(&line, &cap, f) < 0) {
		err = fail(c, "read");
		goto out;
	}
	cpus = count_words(line); /* the header: CPU0 CPU1 ... */
	while (getline(&line, &cap, f) >= 0) {
		char *colon = strchr(line, ':'), *name = line, *p;
		unsigned long long count = 0;

		if (!colon)
			continue;
		*colon = '\0';
		while (isspace((unsigned char)*name))
			name++;
		/* One count per CPU; ERR and MIS have a single one. */
		p = colon + 1;
		for (int cpu = 0; cpu < cpus; cpu++) {
			char *end;
			unsigned long long n = strtoull(p, &end, 10);

			if (end == p)
				break;
			count += n;
			p = end;
		}
		sum->total += count;
		if (!is_timer_line(name, p))
			continue;
		sum->timer += count;
		if (names && strlen(names) + strlen(name) + 2 <= names_len) {
			if (names[0])
				strcat(names, ",");
			strcat(names, name);
		}
	}
	if (ferror(f))
		err = fail(c, "read");
out:
	free(line);
	if (fclose(f) != 0 && !err)
		err = fail(c, "close");
	return err;
}

/* irq.*: says which lines are counted as timers, in a t=meta record. */
static int describe_timer_irqs(struct ctx *c)
{
	struct irq_counts sum;
	char names[128] = "";
	int err = read_interrupts(c, &sum, names, sizeof(names));

	if (!err)
		emit("t=meta key=irq_timer_lines value=%s", names[0] ? sanitize(names) : "none");
	return err;
}

/*
 * irq.idle_timer and its twin irq.idle_total, in irq/s: interrupts while
 * the agent sleeps KL_IDLE_MS, on the timer lines and on all lines.  Both
 * come from the same two snapshots, so timer never exceeds total.  Each
 * sample is one idle window, so at most SLOW_REPEATS of them.
 */
static int run_idle_irqs(struct ctx *c, unsigned long iters)
{
	struct timespec idle = { .tv_sec = c->opt->idle_ms / 1000,
				 .tv_nsec = c->opt->idle_ms % 1000 * 1000000 };
	struct irq_counts before, after;
	int64_t t0, ns;
	int err;

	(void)iters;
	err = read_interrupts(c, &before, NULL, 0);
	if (err)
		return err;
	t0 = now_ns();
	while ((err = clock_nanosleep(CLOCK_MONOTONIC, 0, &idle, &idle)) == EINTR)
		;
	if (err) {
		errno = err;
		return fail(c, "clock_nanosleep");
	}
	ns = now_ns() - t0;
	err = read_interrupts(c, &after, NULL, 0);
	if (err)
		return err;
	c->value = (double)(after.timer - before.timer) * 1e9 / (double)ns;
	c->twin_value = (double)(after.total - before.total) * 1e9 / (double)ns;
	return 0;
}

/* ---- block I/O ---------------------------------------------------------- */

static int close_scratch(struct ctx *c)
{
	free_buffers(c);
	return close_fd(c, &c->fd);
}

/* Opens the scratch disk and allocates one request buffer aligned for O_DIRECT. */
static int open_scratch(struct ctx *c, int flags)
{
	uint64_t region = (uint64_t)c->opt->block_mb * BLOCK_REQ;
	off_t size;
	int err = 0;

	if (!c->opt->block_dev)
		return fail_because(c, "no_scratch_disk");
	c->fd = open(c->opt->block_dev, O_RDWR | O_CLOEXEC | flags);
	if (c->fd < 0)
		return fail(c, "open");
	size = lseek(c->fd, 0, SEEK_END); /* a block device's size, or a file's */
	if (size < 0)
		err = fail(c, "lseek");
	else if ((uint64_t)size < region)
		err = fail_because(c, "scratch_disk_smaller_than_block_mb");
	else if ((err = posix_memalign(&c->buf[0], 4096, BLOCK_REQ)) != 0) {
		errno = err;
		err = fail(c, "posix_memalign");
	}
	if (err) {
		close_scratch(c);
		return err;
	}
	memset(c->buf[0], 0x5a, BLOCK_REQ);
	return 0;
}

static int open_scratch_direct(struct ctx *c)
{
	return open_scratch(c, O_DIRECT);
}

static int open_scratch_cached(struct ctx *c)
{
	return open_scratch(c, 0);
}

/* Writes or reads the first KL_BLOCK_MB of the disk in 1 MiB requests. */
static int transfer(struct ctx *c, bool writing)
{
	for (long i = 0; i < c->opt->block_mb; i++) {
		off_t off = (off_t)i * (off_t)BLOCK_REQ;
		ssize_t n = writing ? pwrite(c->fd, c->buf[0], BLOCK_REQ, off)
				    : pread(c->fd, c->buf[0], BLOCK_REQ, off);

		if (n < 0)
			return fail(c, writing ? "pwrite" : "pread");
		if ((size_t)n != BLOCK_REQ)
			return fail_because(c, "short_transfer");
	}
	return 0;
}

/* Sets the sample to KL_BLOCK_MB moved since t0, in MB/s. */
static void set_block_rate(struct ctx *c, int64_t t0)
{
	int64_t ns = now_ns() - t0;

	c->value = (double)c->opt->block_mb * (double)BLOCK_REQ * 1e3 / (double)(ns > 0 ? ns : 1);
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
static int drop_scratch_cache(struct ctx *c)
{
	bool dropped;
	int err;

	if (fsync(c->fd) < 0)
		return fail(c, "fsync");
	err = posix_fadvise(c->fd, 0, 0, POSIX_FADV_DONTNEED);
	if (err && err != ENOSYS) /* ENOSYS is expected, and would warn every pass */
		warn("posix_fadvise %s: %s", c->opt->block_dev, strerror(err));
	dropped = err == 0;
	if (pid1 && write_file("/proc/sys/vm/drop_caches", "3") == 0)
		dropped = true;
	return dropped ? 0 : fail_because(c, "cannot_drop_page_cache");
}

/*
 * blk.*, in MB/s: self-reported, one pass over KL_BLOCK_MB per sample (at
 * most SLOW_REPEATS).  Direct: O_DIRECT requests, param[0] says which way.
 */
static int run_blk_direct(struct ctx *c, unsigned long iters)
{
	int64_t t0 = now_ns();
	int err = transfer(c, c->metric->param[0] == 'w');

	(void)iters;
	set_block_rate(c, t0);
	return err;
}

/* Cached writes: through the page cache, with the fsync that makes them durable. */
static int run_blk_cached_write(struct ctx *c, unsigned long iters)
{
	int64_t t0 = now_ns();
	int err = transfer(c, true);

	(void)iters;
	if (!err && fsync(c->fd) < 0)
		err = fail(c, "fsync");
	set_block_rate(c, t0);
	return err;
}

/* Cached reads: through the page cache, starting cold. */
static int run_blk_cached_read(struct ctx *c, unsigned long iters)
{
	int64_t t0;
	int err = drop_scratch_cache(c);

	(void)iters;
	if (err)
		return err;
	t0 = now_ns();
	err = transfer(c, false);
	set_block_rate(c, t0);
	return err;
}

/* ---- the metric table --------------------------------------------------- */

#define RING(metric_name, procs, ws_bytes)                                              \
	{ .name = metric_name, .self_timed = true, .param = { procs, ws_bytes },         \
	  .setup = start_ring, .run = run_ring, .teardown = stop_ring }
#define FS(metric_name, bytes, which)                                                   \
	{ .name = metric_name, .self_timed = true, .param = { bytes, which }, .run = run_fs }
#define SELECT(metric_name, pipes)                                                      \
	{ .name = metric_name, .param = { pipes }, .setup = start_select,                \
	  .run = run_select, .teardown = stop_select }
#define MEM_BW(metric_name, run_fn)                                                     \
	{ .name = metric_name, .kind = BANDWIDTH, .bytes = MEM_BYTES,                    \
	  .setup = alloc_mem_buffers, .run = run_fn, .teardown = free_buffers }
#define BLOCK(metric_name, setup_fn, run_fn, direction)                                 \
	{ .name = metric_name, .kind = REPORTED, .unit = "MB/s", .param = { direction },  \
	  .max_repeats = SLOW_REPEATS, .setup = setup_fn, .run = run_fn,                 \
	  .teardown = close_scratch }

static const struct metric metrics[] = {
	{ .name = "syscall.null", .run = run_null },
	{ .name = "syscall.read", .setup = open_devnull, .run = run_read, .teardown = close_file },
	{ .name = "syscall.write", .setup = open_devnull, .run = run_write, .teardown = close_file },
	{ .name = "syscall.open_close", .setup = create_open_target, .run = run_open_close,
	  .teardown = remove_file },
	{ .name = "syscall.stat", .setup = create_open_target, .run = run_stat,
	  .teardown = remove_file },
	{ .name = "syscall.fstat", .setup = open_devnull, .run = run_fstat, .teardown = close_file },
	{ .name = "signal.install", .run = run_sig_install, .teardown = default_sigusr1 },
	{ .name = "signal.catch", .setup = start_sig_catch, .run = run_sig_catch,
	  .teardown = default_sigusr1 },
	{ .name = "ipc.pipe_rtt", .setup = start_pipe_echo, .run = run_rtt, .teardown = stop_peer },
	{ .name = "ipc.unix_rtt", .setup = start_unix_echo, .run = run_rtt, .teardown = stop_peer },
	{ .name = "ipc.tcp_rtt", .setup = start_tcp_echo, .run = run_rtt, .teardown = stop_peer },
	{ .name = "ipc.udp_rtt", .setup = start_udp_echo, .run = run_rtt, .teardown = stop_udp_echo },
	{ .name = "ipc.tcp_connect", .setup = start_connection_server, .run = run_connect,
	  .teardown = stop_connection_server },
	{ .name = "proc.fork_exit", .run = run_fork_exit },
	{ .name = "proc.fork_exec", .run = run_fork_exec },
	RING("ctx.ring2_0k", 2, 0),
	RING("ctx.ring4_0k", 4, 0),
	RING("ctx.ring8_0k", 8, 0),
	RING("ctx.ring16_0k", 16, 0),
	RING("ctx.ring2_16k", 2, 16 * KIB),
	RING("ctx.ring4_16k", 4, 16 * KIB),
	RING("ctx.ring8_16k", 8, 16 * KIB),
	RING("ctx.ring16_16k", 16, 16 * KIB),
	{ .name = "bw.pipe", .kind = BANDWIDTH, .bytes = STREAM_CHUNK, .setup = start_pipe_stream,
	  .run = run_stream, .teardown = stop_peer },
	{ .name = "bw.unix", .kind = BANDWIDTH, .bytes = STREAM_CHUNK, .setup = start_unix_stream,
	  .run = run_stream, .teardown = stop_peer },
	{ .name = "bw.tcp", .kind = BANDWIDTH, .bytes = STREAM_CHUNK, .setup = start_tcp_stream,
	  .run = run_stream, .teardown = stop_peer },
	FS("fs.create_0k", 0, TIME_CREATES),
	FS("fs.delete_0k", 0, TIME_DELETES),
	FS("fs.create_10k", 10 * KIB, TIME_CREATES),
	FS("fs.delete_10k", 10 * KIB, TIME_DELETES),
	{ .name = "mm.mmap_1m", .setup = create_mmap_file, .run = run_mmap, .teardown = remove_file },
	{ .name = "mm.page_fault", .self_timed = true, .setup = create_fault_file,
	  .run = run_page_fault, .teardown = remove_file },
	SELECT("fs.select_10", 10),
	SELECT("fs.select_100", SELECT_MAX),
	MEM_BW("bw.mem_read", run_mem_read),
	MEM_BW("bw.mem_write", run_mem_write),
	MEM_BW("bw.mem_copy", run_mem_copy),
	{ .name = "crypto.aes256cbc_kernel", .kind = BANDWIDTH, .bytes = CRYPTO_BYTES,
	  .setup = start_kernel_aes, .run = run_kernel_aes, .teardown = stop_kernel_aes },
	{ .name = "crypto.aes256cbc_user", .kind = BANDWIDTH, .bytes = CRYPTO_BYTES,
	  .setup = start_user_aes, .run = run_user_aes, .teardown = free_buffers },
	/* Idle before alloc_max and the disk, whose aftermath (reclaim, writeback) is not idle. */
	{ .name = "irq.idle_timer", .twin = "irq.idle_total", .kind = REPORTED, .unit = "irq/s",
	  .max_repeats = SLOW_REPEATS, .setup = describe_timer_irqs, .run = run_idle_irqs },
	{ .name = "mem.alloc_max", .kind = REPORTED, .unit = "MiB", .max_repeats = SLOW_REPEATS,
	  .run = run_alloc_max },
	BLOCK("blk.seq_write_direct", open_scratch_direct, run_blk_direct, 'w'),
	BLOCK("blk.seq_read_direct", open_scratch_direct, run_blk_direct, 'r'),
	BLOCK("blk.seq_write_cached", open_scratch_cached, run_blk_cached_write, 'w'),
	BLOCK("blk.seq_read_cached", open_scratch_cached, run_blk_cached_read, 'r'),
};

/* Not a timed metric, but selectable with KL_ONLY like one. */
#define MEMINFO "meminfo"

/* ---- harness ------------------------------------------------------------ */

/* Costs taken out of latency samples, measured once per run. */
static struct {
	int64_t clock_ns; /* the pair of clock reads around a sample */
	double loop_ns;   /* one iteration of a loop around a call */
} overhead;

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

static void __attribute__((noipa)) nothing(void)
{
}

/* The metrics' loops call a function per operation: time that with an empty one. */
static double loop_overhead_ns(void)
{
	const unsigned long n = 1UL << 14;
	int64_t best = INT64_MAX;

	for (int i = 0; i < 16; i++) {
		int64_t t0 = now_ns();

		for (unsigned long k = 0; k < n; k++)
			nothing();
		int64_t t = now_ns() - t0 - overhead.clock_ns;

		if (t < best)
			best = t;
	}
	return best > 0 ? (double)best / (double)n : 0;
}

/*
 * Doubles iters until the interval a sample uses (the whole run, or the
 * part a self-timed run timed) reaches the target, so timer resolution is
 * noise.  A self-timed metric may time only a small part of its run (a ring
 * whose switches cost little), so a run of CALIBRATE_CAP targets ends it too.
 */
#define CALIBRATE_CAP 8

static int calibrate(const struct metric *m, struct ctx *c, int64_t target_ns,
		     unsigned long *iters)
{
	for (unsigned long n = 1;; n *= 2) {
		int64_t t0 = now_ns();
		int err = m->run(c, n);
		int64_t wall = now_ns() - t0;
		int64_t timed = m->self_timed ? c->timed_ns : wall;

		if (err)
			return err;
		if (timed >= target_ns || wall >= CALIBRATE_CAP * target_ns || n >= MAX_ITERS) {
			*iters = n;
			return 0;
		}
	}
}

/*
 * One sample.  The interval is what a self-timed run() timed, otherwise the
 * whole call less the clock reads and, for latencies, less the loop around
 * the operations; at least 1 ns, so a bandwidth is always finite.
 */
static int sample(const struct metric *m, struct ctx *c, unsigned long iters, double *value)
{
	int64_t t0, ns;
	int err;

	if (m->kind == REPORTED) {
		err = m->run(c, iters);
		*value = c->value;
		return err;
	}
	t0 = now_ns();
	err = m->run(c, iters);
	ns = now_ns() - t0 - overhead.clock_ns;
	if (m->self_timed)
		ns = c->timed_ns;
	else if (m->kind == LATENCY)
		ns -= (int64_t)((double)iters * overhead.loop_ns);
	if (ns < 1)
		ns = 1;
	if (m->kind == LATENCY)
		*value = (double)ns / (double)iters;
	else /* bytes per ns are GB/s */
		*value = (double)m->bytes * (double)iters * 1e3 / (double)ns;
	return err;
}

static const char *unit_of(const struct metric *m)
{
	switch (m->kind) {
	case LATENCY:
		return "ns";
	case BANDWIDTH:
		return "MB/s";
	case REPORTED:
		break;
	}
	return m->unit;
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

/* Whether m runs: it or its twin is selected. */
static bool wanted(const char *only, const struct metric *m)
{
	return selected(only, m->name) || (m->twin && selected(only, m->twin));
}

/*
 * The records of a metric and of its twin, if selected: each sample from
 * value[0] and value[1], or one na each if reason is not NULL.
 */
static void report(const struct metric *m, const char *only, const char *reason, long repeats,
		   unsigned long iters, double value[2][MAX_REPEATS])
{
	const char *names[2] = { m->name, m->twin };

	for (int i = 0; i < 2; i++) {
		if (!names[i] || !selected(only, names[i]))
			continue;
		if (reason) {
			emit("t=na metric=%s reason=%s", names[i], reason);
			continue;
		}
		for (long rep = 0; rep < repeats; rep++)
			emit("t=sample metric=%s unit=%s rep=%ld iters=%lu value=%.3f",
			     names[i], unit_of(m), rep, iters, value[i][rep]);
	}
}

static void run_metric(const struct metric *m, struct ctx *c, const struct options *o)
{
	/*
	 * Samples are held back until teardown succeeds, so a metric gets
	 * either all its samples or one na record.  value[1] is the twin's.
	 */
	double value[2][MAX_REPEATS];
	long repeats = m->max_repeats && m->max_repeats < o->repeats ? m->max_repeats : o->repeats;
	unsigned long iters = 1;
	int err = 0;

	c->reason[0] = '\0';
	c->metric = m;
	if (m->setup && m->setup(c) < 0) {
		report(m, o->only, c->reason, 0, 0, value);
		return;
	}
	/*
	 * A reported value is one measurement.  Other metrics first run one
	 * op, so helper start-up and cold caches do not fool the calibration;
	 * its last run, at full size, is the warm-up (caches, TLB, page tables).
	 */
	if (m->kind != REPORTED) {
		err = m->run(c, 1);
		if (!err)
			err = calibrate(m, c, (int64_t)o->target_us * 1000, &iters);
	}
	for (long rep = 0; !err && rep < repeats; rep++) {
		err = sample(m, c, iters, &value[0][rep]);
		value[1][rep] = c->twin_value;
	}
	if (m->teardown) {
		int torn = m->teardown(c);

		if (!err)
			err = torn;
	}
	report(m, o->only, err ? c->reason : NULL, repeats, iters, value);
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

/* Whether the len bytes at name are m's name or its twin's. */
static bool is_named(const struct metric *m, const char *name, size_t len)
{
	return (strlen(m->name) == len && memcmp(name, m->name, len) == 0) ||
	       (m->twin && strlen(m->twin) == len && memcmp(name, m->twin, len) == 0);
}

/* A typo in KL_ONLY would otherwise look like a metric that silently vanished. */
static void report_unknown_names(const char *only)
{
	char name[64];

	for (const char *p = only; p && *p; ) {
		size_t len = strcspn(p, ",");
		int known = len == strlen(MEMINFO) && memcmp(p, MEMINFO, len) == 0;

		for (size_t i = 0; !known && i < sizeof(metrics) / sizeof(metrics[0]); i++)
			known = is_named(&metrics[i], p, len);
		if (!known && len > 0) {
			snprintf(name, sizeof(name), "%.*s", (int)len, p);
			emit("t=na metric=%s reason=unknown_metric", sanitize(name));
		}
		p += len + (p[len] == ',');
	}
}

/*
 * Every timing rests on the kernel's clocksource.  Under emulation the TSC can fail
 * its calibration and leave the kernel on jiffies, whose 1-10 ms steps turn every
 * latency into 0 or a tick: the host refuses such timings, so say which one it is.
 */
static void report_clocksource(void)
{
	char name[64] = "unknown";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");

	if (f) {
		if (!fgets(name, sizeof(name), f))
			snprintf(name, sizeof(name), "unknown");
		name[strcspn(name, "\n")] = '\0';
		if (fclose(f) != 0)
			warn("closing current_clocksource: %s", strerror(errno));
	}
	emit("t=meta key=clocksource value=%s", sanitize(name));
}

static void run_suite(const struct options *o, const char *workdir)
{
	struct utsname u;
	struct timespec res;
	char block_dev[128];
	struct ctx c = { .opt = o, .workdir = workdir, .fd = -1, .alg_op = -1,
			 .peer = { .tx = -1, .rx = -1 } };

	if (uname(&u) < 0)
		die("uname: %s", strerror(errno));
	if (clock_getres(CLOCK_MONOTONIC, &res) < 0)
		die("clock_getres: %s", strerror(errno));
	snprintf(block_dev, sizeof(block_dev), "%s", o->block_dev ? o->block_dev : "none");
	emit("t=hello v=%d agent=" AGENT_NAME " mode=%s arch=%s kernel=%s clock_res_ns=%lld"
	     " repeats=%ld target_us=%ld idle_ms=%ld block_dev=%s block_mb=%ld",
	     RECORD_VERSION, pid1 ? "pid1" : "local", sanitize(u.machine), sanitize(u.release),
	     (long long)res.tv_sec * 1000000000 + res.tv_nsec, o->repeats, o->target_us,
	     o->idle_ms, sanitize(block_dev), o->block_mb);
	report_unknown_names(o->only);
	report_clocksource();

	overhead.clock_ns = clock_overhead_ns();
	overhead.loop_ns = loop_overhead_ns();
	emit("t=meta key=clock_overhead_ns value=%lld", (long long)overhead.clock_ns);
	emit("t=meta key=loop_overhead_ns value=%.3f", overhead.loop_ns);

	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
		if (wanted(o->only, &metrics[i]))
			run_metric(&metrics[i], &c, o);
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

/* The kernel leaves lo down; the TCP and UDP metrics need it. */
static void bring_up_loopback(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return; /* no IPv4: the metrics that need it will say so */
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		warn("SIOCGIFFLAGS lo: %s", strerror(errno));
	} else {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			warn("SIOCSIFFLAGS lo: %s", strerror(errno));
	}
	if (close(fd) < 0)
		warn("close: %s", strerror(errno));
}

/*
 * PID-1 mode's scratch disk: the first virtio disk, which the host attaches
 * for nothing else (the root file system is the initramfs).
 */
static const char *find_scratch_disk(void)
{
	static char path[16 + NAME_MAX];
	char first[NAME_MAX + 1] = "";
	DIR *dir = opendir("/sys/block");
	struct dirent *e;

	if (!dir) {
		warn("opendir /sys/block: %s", strerror(errno));
		return NULL;
	}
	errno = 0;
	while ((e = readdir(dir)))
		if (strncmp(e->d_name, "vd", 2) == 0 && (!first[0] || strcmp(e->d_name, first) < 0))
			snprintf(first, sizeof(first), "%s", e->d_name);
	if (errno)
		warn("readdir /sys/block: %s", strerror(errno));
	if (closedir(dir) < 0)
		warn("closedir /sys/block: %s", strerror(errno));
	if (!first[0])
		return NULL;
	snprintf(path, sizeof(path), "/dev/%s", first);
	return path;
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
	bring_up_loopback();

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
	if ((v = getenv("KL_IDLE_MS")))
		o->idle_ms = parse_long("KL_IDLE_MS", v, MAX_IDLE_MS);
	if ((v = getenv("KL_BLOCK_DEV")) && *v)
		o->block_dev = v;
	if ((v = getenv("KL_BLOCK_MB")))
		o->block_mb = parse_long("KL_BLOCK_MB", v, MAX_BLOCK_MB);
	if ((v = getenv("KL_ALLOC_CAP_MB")))
		o->alloc_cap_mb = parse_long("KL_ALLOC_CAP_MB", v, ALLOC_CAP_MB);
}

static void options_from_argv(struct options *o, int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!val)
			die(USAGE);
		if (strcmp(opt, "--repeats") == 0)
			o->repeats = parse_long(opt, val, MAX_REPEATS);
		else if (strcmp(opt, "--target-us") == 0)
			o->target_us = parse_long(opt, val, MAX_TARGET_US);
		else if (strcmp(opt, "--only") == 0)
			o->only = *val ? val : NULL;
		else if (strcmp(opt, "--idle-ms") == 0)
			o->idle_ms = parse_long(opt, val, MAX_IDLE_MS);
		else if (strcmp(opt, "--block-dev") == 0)
			o->block_dev = *val ? val : NULL;
		else
			die("unknown option '%s'; " USAGE, opt);
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
	struct options o = { .repeats = 11, .target_us = 2000, .only = NULL, .idle_ms = 1000,
			     .block_dev = NULL, .block_mb = 32, .alloc_cap_mb = ALLOC_CAP_MB };
	const char *workdir;
	long page;

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
		if (!o.block_dev)
			o.block_dev = find_scratch_disk();
	} else {
		o.alloc_cap_mb = LOCAL_ALLOC_CAP_MB;
		options_from_env(&o);
		options_from_argv(&o, argc, argv); /* flags override the environment */
		workdir = mkdtemp(local_workdir);
		if (!workdir)
			die("mkdtemp %s: %s", local_workdir, strerror(errno));
		if (atexit(remove_local_workdir) != 0)
			die("atexit failed");
	}

	page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		die("sysconf(_SC_PAGESIZE): %s", strerror(errno));
	page_size = (size_t)page;
	/* A dead helper must fail its metric with EPIPE, not kill the agent. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die("ignoring SIGPIPE: %s", strerror(errno));

	run_suite(&o, workdir);
	finish(0);
}
