/*
 * net.*: a data server under load, the situation of seed 002 (an xrootd
 * server on 10 GbE): a server in the guest streams 64 KiB writes to
 * STREAMS clients over loopback TCP, one more client sends a small request
 * every REQUEST_GAP_NS and waits for the answer, and BUSY processes spin on
 * the CPU.  Each sample is one window of KL_NET_MS (default 500 ms) of that
 * load: delivered throughput; the softirq share of all CPU time (/proc/stat)
 * with ksoftirqd's CPU time; request latency (median, 99th percentile); and
 * context switches per second.
 *
 * Opt-in (KL_WITH=net, or the metrics named in KL_ONLY): a window of load
 * costs seconds of emulated time, which the default suite does not spend.
 * The load is loopback: guest-timed, so it means something in icount mode
 * too; nothing crosses a link from the host.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* every unit agrees on off_t (32-bit targets) */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "record.h"

#define STREAMS 4
#define BUSY 2
#define CHUNK (64 * 1024)
#define REQUEST_BYTES 64
#define REQUEST_GAP_NS 2000000L /* a request every 2 ms */
#define MAX_REQUESTS 4096
#define DEFAULT_WINDOW_MS 500L
#define MAX_CHILDREN (1 + STREAMS + 1 + BUSY)

/* What the load's processes tell the agent, in memory they share. */
struct shared {
	volatile uint64_t received[STREAMS];
	volatile int recording;
	volatile uint32_t requests;
	int64_t latency[MAX_REQUESTS];
};

static struct shared *shm;
static pid_t children[MAX_CHILDREN];
static int nchildren;

static long window_ms(void)
{
	const char *v = getenv("KL_NET_MS");
	long ms = v ? strtol(v, NULL, 10) : DEFAULT_WINDOW_MS;

	return ms > 0 && ms <= 60000 ? ms : DEFAULT_WINDOW_MS;
}

static void sleep_ns(int64_t ns)
{
	struct timespec t = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR)
		;
}

/* Moves all of len bytes through fd, one way; -1 when the peer is gone. */
static int move_all(int fd, char *buf, size_t len, bool writing)
{
	while (len) {
		ssize_t n = writing ? write(fd, buf, len) : read(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One accepted connection: 'S' streams forever, 'R' answers requests. */
static void serve(int fd)
{
	static char buf[CHUNK];
	char kind;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the server */
	if (move_all(fd, &kind, 1, false) != 0)
		_exit(0);
	memset(buf, 0x5a, sizeof(buf));
	if (kind == 'S')
		while (move_all(fd, buf, sizeof(buf), true) == 0)
			;
	else
		while (move_all(fd, buf, REQUEST_BYTES, false) == 0 && move_all(fd, buf, REQUEST_BYTES, true) == 0)
			;
	_exit(0);
}

static void server(int listener)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGCHLD, SIG_IGN); /* handlers reap themselves */
	for (;;) {
		int fd = accept(listener, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (fork() == 0) {
			close(listener);
			serve(fd);
		}
		close(fd);
	}
}

static int connect_to(const struct sockaddr_in *addr, char kind)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0 ||
	    move_all(fd, &kind, 1, true) != 0)
		_exit(1);
	return fd;
}

static void stream_client(const struct sockaddr_in *addr, int i)
{
	static char buf[CHUNK];
	int fd = connect_to(addr, 'S');

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n > 0)
			shm->received[i] += (uint64_t)n;
		else if (n == 0 || errno != EINTR)
			_exit(0);
	}
}

static void request_client(const struct sockaddr_in *addr)
{
	char buf[REQUEST_BYTES];
	int fd = connect_to(addr, 'R');

	memset(buf, 'r', sizeof(buf));
	for (;;) {
		int64_t t0 = now_ns();

		if (move_all(fd, buf, sizeof(buf), true) != 0 || move_all(fd, buf, sizeof(buf), false) != 0)
			_exit(0);
		if (shm->recording && shm->requests < MAX_REQUESTS)
			shm->latency[shm->requests++] = now_ns() - t0;
		sleep_ns(REQUEST_GAP_NS);
	}
}

static void busy(void)
{
	volatile unsigned long spin = 0;

	for (;;)
		spin++;
}

static int spawn(struct run *r, void (*body)(const struct sockaddr_in *, int), const struct sockaddr_in *addr,
		 int arg)
{
	pid_t pid = fork();

	if (pid < 0)
		return fail(r, "fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		body(addr, arg);
		_exit(0);
	}
	children[nchildren++] = pid;
	return 0;
}

static void run_server(const struct sockaddr_in *addr, int listener)
{
	(void)addr;
	server(listener);
}

static void run_stream(const struct sockaddr_in *addr, int i)
{
	stream_client(addr, i);
}

static void run_request(const struct sockaddr_in *addr, int unused)
{
	(void)unused;
	request_client(addr);
}

static void run_busy(const struct sockaddr_in *addr, int unused)
{
	(void)addr;
	(void)unused;
	busy();
}

static int teardown_net(struct run *r)
{
	(void)r;
	for (int i = 0; i < nchildren; i++)
		kill(children[i], SIGKILL);
	/* The children, and in PID-1 mode the server's handlers, which are ours once
	 * their server is gone. */
	while (wait(NULL) > 0 || errno == EINTR)
		;
	nchildren = 0;
	if (shm) {
		munmap(shm, sizeof(*shm));
		shm = NULL;
	}
	return 0;
}

static int setup_net(struct run *r)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int listener, err = 0;

	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		shm = NULL;
		return fail(r, "mmap");
	}
	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener < 0)
		return fail(r, "socket");
	if (bind(listener, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(listener, 16) != 0 ||
	    getsockname(listener, (struct sockaddr *)&addr, &len) != 0) {
		err = fail(r, "listen");
		close(listener);
		return err;
	}
	err = spawn(r, run_server, &addr, listener);
	close(listener);
	for (int i = 0; i < STREAMS && !err; i++)
		err = spawn(r, run_stream, &addr, i);
	if (!err)
		err = spawn(r, run_request, &addr, 0);
	for (int i = 0; i < BUSY && !err; i++)
		err = spawn(r, run_busy, &addr, 0);
	if (err)
		teardown_net(r);
	else
		sleep_ns(50000000); /* the connections up and the load running */
	return err;
}

/* CPU time from /proc/stat's first line: all of it, and softirq's; and ctxt. */
struct cpu_times {
	unsigned long long total, softirq, ctxt;
};

static int read_stat(struct run *r, struct cpu_times *t)
{
	FILE *f = fopen("/proc/stat", "re");
	char line[512];
	unsigned long long v[10] = { 0 };

	if (!f)
		return fail(r, "open_proc_stat");
	*t = (struct cpu_times){ 0, 0, 0 };
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "cpu ", 4) == 0) {
			int n = sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
				       &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);

			/* guest and guest_nice (8, 9) are already in user and nice */
			for (int i = 0; i < n && i < 8; i++)
				t->total += v[i];
			t->softirq = v[6];
		} else if (strncmp(line, "ctxt ", 5) == 0) {
			t->ctxt = strtoull(line + 5, NULL, 10);
		}
	}
	fclose(f);
	return t->total ? 0 : fail_because(r, "no_cpu_line_in_proc_stat");
}

/* utime + stime, in clock ticks, of every ksoftirqd/N thread. */
static int ksoftirqd_ticks(struct run *r, unsigned long long *ticks)
{
	DIR *proc = opendir("/proc");
	struct dirent *d;
	int found = 0;

	if (!proc)
		return fail(r, "open_proc");
	*ticks = 0;
	while ((d = readdir(proc))) {
		char path[300], buf[512], *p;
		FILE *f;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		p = fgets(buf, sizeof(buf), f);
		fclose(f);
		if (!p || !strstr(buf, "(ksoftirqd/"))
			continue;
		/* after "pid (comm) ": state, then fields 4..; utime and stime are 14 and 15 */
		p = strrchr(buf, ')');
		if (!p)
			continue;
		unsigned long long utime = 0, stime = 0;
		if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2) {
			*ticks += utime + stime;
			found = 1;
		}
	}
	closedir(proc);
	return found ? 0 : fail_because(r, "no_ksoftirqd_thread");
}

static uint64_t received(void)
{
	uint64_t sum = 0;

	for (int i = 0; i < STREAMS; i++)
		sum += shm->received[i];
	return sum;
}

/* net.stream_bw: MB/s delivered to the stream clients in one window. */
static int run_stream_window(struct run *r, unsigned long iters)
{
	uint64_t bytes0 = received();
	int64_t t0 = now_ns();

	(void)iters;
	sleep_ns(window_ms() * 1000000);
	r->value = (double)(received() - bytes0) * 1e3 / (double)(now_ns() - t0); /* bytes/ns * 1e3 */
	return 0;
}

/* net.softirq_pct (of all CPU time, /proc/stat) and its twin net.ksoftirqd_pct (of one CPU). */
static int run_softirq_window(struct run *r, unsigned long iters)
{
	unsigned long long k0, k1;
	struct cpu_times a, b;
	int64_t t0, ns;
	int err;

	(void)iters;
	if ((err = ksoftirqd_ticks(r, &k0)) || (err = read_stat(r, &a)))
		return err;
	t0 = now_ns();
	sleep_ns(window_ms() * 1000000);
	ns = now_ns() - t0;
	if ((err = ksoftirqd_ticks(r, &k1)) || (err = read_stat(r, &b)))
		return err;
	r->value = b.total > a.total ? 100.0 * (double)(b.softirq - a.softirq) / (double)(b.total - a.total) : 0;
	r->twin_value = 100.0 * (double)(k1 - k0) / (double)sysconf(_SC_CLK_TCK) * 1e9 / (double)ns;
	return 0;
}

/* net.ctxsw_rate: context switches per second, all CPUs, under the load. */
static int run_ctxsw_window(struct run *r, unsigned long iters)
{
	struct cpu_times a, b;
	int64_t t0;
	int err;

	(void)iters;
	if ((err = read_stat(r, &a)))
		return err;
	t0 = now_ns();
	sleep_ns(window_ms() * 1000000);
	if ((err = read_stat(r, &b)))
		return err;
	r->value = (double)(b.ctxt - a.ctxt) * 1e9 / (double)(now_ns() - t0);
	return 0;
}

static int compare_ns(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
}

/* net.req_p50 and its twin net.req_p99: request round trips in one window. */
static int run_request_window(struct run *r, unsigned long iters)
{
	uint32_t n;

	(void)iters;
	shm->requests = 0;
	shm->recording = 1;
	sleep_ns(window_ms() * 1000000);
	shm->recording = 0;
	n = shm->requests;
	if (n == 0)
		return fail_because(r, "no_request_answered_in_the_window");
	qsort(shm->latency, n, sizeof(shm->latency[0]), compare_ns);
	r->value = (double)shm->latency[n / 2];
	r->twin_value = (double)shm->latency[n * 99 / 100];
	return 0;
}

static const struct metric metrics[] = {
	{ .name = "net.stream_bw", .kind = REPORTED, .unit = "MB/s", .max_repeats = SLOW_REPEATS,
	  .setup = setup_net, .run = run_stream_window, .teardown = teardown_net },
	{ .name = "net.softirq_pct", .twin = "net.ksoftirqd_pct", .kind = REPORTED, .unit = "%",
	  .max_repeats = SLOW_REPEATS, .setup = setup_net, .run = run_softirq_window, .teardown = teardown_net },
	{ .name = "net.req_p50", .twin = "net.req_p99", .kind = REPORTED, .unit = "ns",
	  .max_repeats = SLOW_REPEATS, .setup = setup_net, .run = run_request_window, .teardown = teardown_net },
	{ .name = "net.ctxsw_rate", .kind = REPORTED, .unit = "1/s", .max_repeats = SLOW_REPEATS,
	  .setup = setup_net, .run = run_ctxsw_window, .teardown = teardown_net },
};

/* Windows of KL_NET_MS sleeps and 2 ms request gaps: fine timers, as lat.* */
const struct metric_table net_metrics = FINE_TIMER_TABLE(metrics, "net");
