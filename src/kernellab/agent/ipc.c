/*
 * ipc.*, bw.pipe, bw.unix, bw.tcp and ctx.*: latency and bandwidth of pipes,
 * Unix and loopback TCP and UDP sockets, as lmbench lat_pipe, lat_unix,
 * lat_tcp, lat_udp, lat_connect and bw_pipe, bw_unix, bw_tcp, and context
 * switches, as lmbench lat_ctx.  Each ipc.* and bw.* metric talks to a
 * helper process: an echo, a stream writer or a connection server.  ctx.*
 * passes a token round a ring of processes; it is here, not in proc.c,
 * because its hops are ipc.pipe_rtt's round trips: the two share
 * round_trip() and read_full(), which GCC compiles for both loops together,
 * as it did when the agent was one file.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "record.h"
#include "util.h"

#define RING_MAX 16             /* ctx.*: processes in the largest ring */
#define STREAM_CHUNK (64 * KIB) /* bw.pipe, bw.unix, bw.tcp: bytes per write and per op */

/* A helper process and the agent's ends of the channel to it (-1: unused). */
struct peer {
	pid_t pid;
	int tx, rx;                /* one descriptor in both for a socket */
	struct sockaddr_in server; /* ipc.tcp_connect: where the helper listens */
};

static struct peer peer = { .tx = -1, .rx = -1 };

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

static struct ring ring;

/* Sends one byte down out and waits for one to come back on in. */
static int round_trip(struct run *r, int out, int in)
{
	char byte = 0;

	if (write(out, &byte, 1) != 1)
		return fail(r, "write");
	return read_full(r, in, &byte, 1);
}

static int stop_peer(struct run *r)
{
	int err = close_end(peer.tx, peer.rx) < 0 ? fail(r, "close") : 0;
	int reaped = reap(r, peer.pid, "helper");

	peer.tx = peer.rx = -1;
	return err ? err : reaped;
}

/*
 * Forks a helper that runs body(in, out) on its end of a channel and exits
 * with what it returns (0 or an errno); the agent keeps tx and rx.  One
 * helper serves a whole metric, so no fork lands in a timed loop.
 */
static int fork_peer(struct run *r, int tx, int rx, int in, int out, int (*body)(int in, int out))
{
	pid_t pid = fork();
	int err;

	if (pid < 0) {
		err = fail(r, "fork");
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
	peer.pid = pid;
	peer.tx = tx;
	peer.rx = rx;
	if (close_end(in, out) < 0) {
		err = fail(r, "close");
		stop_peer(r);
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
static int loopback_socket(struct run *r, int type, struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return fail(r, "socket");
	*addr = (struct sockaddr_in){ .sin_family = AF_INET,
				      .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) < 0)
		err = fail(r, "bind");
	else if (getsockname(fd, (struct sockaddr *)addr, &len) < 0)
		err = fail(r, "getsockname");
	else if (type == SOCK_STREAM && listen(fd, SOMAXCONN) < 0)
		err = fail(r, "listen");
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* A connected TCP socket pair over loopback, like socketpair(). */
static int tcp_pair(struct run *r, int sv[2])
{
	struct sockaddr_in addr;
	int listener = loopback_socket(r, SOCK_STREAM, &addr), err = 0;

	if (listener < 0)
		return listener;
	sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sv[0] < 0)
		err = fail(r, "socket");
	else if (connect(sv[0], (struct sockaddr *)&addr, sizeof(addr)) < 0)
		err = fail(r, "connect");
	else if ((sv[1] = accept4(listener, NULL, NULL, SOCK_CLOEXEC)) < 0)
		err = fail(r, "accept");
	if (err && sv[0] >= 0)
		close(sv[0]);
	if (close(listener) < 0 && !err) {
		err = fail(r, "close");
		close_end(sv[0], sv[1]);
	}
	return err;
}

/* Two UDP sockets on loopback, each connected to the other. */
static int udp_pair(struct run *r, int sv[2])
{
	struct sockaddr_in addr[2];
	int err = 0;

	sv[0] = loopback_socket(r, SOCK_DGRAM, &addr[0]);
	if (sv[0] < 0)
		return sv[0];
	sv[1] = loopback_socket(r, SOCK_DGRAM, &addr[1]);
	if (sv[1] < 0) {
		close(sv[0]);
		return sv[1];
	}
	if (connect(sv[0], (struct sockaddr *)&addr[1], sizeof(addr[1])) < 0 ||
	    connect(sv[1], (struct sockaddr *)&addr[0], sizeof(addr[0])) < 0) {
		err = fail(r, "connect");
		close(sv[0]);
		close(sv[1]);
	}
	return err;
}

static int start_pipe_peer(struct run *r, int (*body)(int, int))
{
	int down[2], up[2];

	if (pipe2(down, O_CLOEXEC) < 0)
		return fail(r, "pipe");
	if (pipe2(up, O_CLOEXEC) < 0) {
		int err = fail(r, "pipe");

		close_end(down[0], down[1]);
		return err;
	}
	return fork_peer(r, down[1], up[0], down[0], up[1], body);
}

/* The agent keeps sv[0], the helper gets sv[1]. */
static int start_socket_peer(struct run *r, int (*make_pair)(struct run *, int[2]),
			     int (*body)(int, int))
{
	int sv[2], err = make_pair(r, sv);

	return err ? err : fork_peer(r, sv[0], sv[0], sv[1], sv[1], body);
}

static int unix_pair(struct run *r, int sv[2])
{
	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ? fail(r, "socketpair") : 0;
}

static int start_pipe_echo(struct run *r)
{
	return start_pipe_peer(r, echo);
}

static int start_unix_echo(struct run *r)
{
	return start_socket_peer(r, unix_pair, echo);
}

static int start_tcp_echo(struct run *r)
{
	return start_socket_peer(r, tcp_pair, echo);
}

static int start_udp_echo(struct run *r)
{
	return start_socket_peer(r, udp_pair, echo);
}

/* UDP has no EOF: an empty datagram tells the echo helper to finish. */
static int stop_udp_echo(struct run *r)
{
	int err = 0, stopped;

	if (send(peer.tx, "", 0, 0) < 0) {
		err = fail(r, "send");
		if (kill(peer.pid, SIGKILL) < 0)
			warn("kill: %s", strerror(errno));
	}
	stopped = stop_peer(r);
	return err ? err : stopped;
}

static int run_rtt(struct run *r, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int err = round_trip(r, peer.tx, peer.rx);

		if (err)
			return err;
	}
	return 0;
}

static int start_pipe_stream(struct run *r)
{
	return start_pipe_peer(r, stream_writer);
}

static int start_unix_stream(struct run *r)
{
	return start_socket_peer(r, unix_pair, stream_writer);
}

static int start_tcp_stream(struct run *r)
{
	return start_socket_peer(r, tcp_pair, stream_writer);
}

/* bw.pipe, bw.unix, bw.tcp: op = reading one STREAM_CHUNK the helper wrote. */
static int run_stream(struct run *r, unsigned long iters)
{
	static char chunk[STREAM_CHUNK];

	for (unsigned long i = 0; i < iters; i++) {
		int err = read_full(r, peer.rx, chunk, sizeof(chunk));

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

static int start_connection_server(struct run *r)
{
	int listener = loopback_socket(r, SOCK_STREAM, &peer.server);

	if (listener < 0)
		return listener;
	return fork_peer(r, -1, -1, listener, -1, connection_server);
}

static int connect_to_server(struct run *r)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return fail(r, "socket");
	if (connect(fd, (struct sockaddr *)&peer.server, sizeof(peer.server)) < 0) {
		int err = fail(r, "connect");

		close(fd);
		return err;
	}
	return fd;
}

/* op = socket + connect + close; the server's accept and close overlap the next op. */
static int run_connect(struct run *r, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int fd = connect_to_server(r);

		if (fd < 0)
			return fd;
		if (close(fd) < 0)
			return fail(r, "close");
	}
	return 0;
}

static int stop_connection_server(struct run *r)
{
	int fd = connect_to_server(r), err = fd < 0 ? fd : 0, stopped;

	if (!err && write(fd, "", 1) != 1)
		err = fail(r, "write");
	if (fd >= 0 && close(fd) < 0 && !err)
		err = fail(r, "close");
	if (err && kill(peer.pid, SIGKILL) < 0)
		warn("kill: %s", strerror(errno));
	stopped = stop_peer(r);
	return err ? err : stopped;
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

/* Child i of the ring, in its copy of ring; returns its exit status. */
static int ring_member(int i)
{
	int in = ring.pipe[i - 1][0], out = ring.pipe[i][1];
	unsigned long *ws;
	char token;

	/* Any other pipe end held open here would keep the ring from seeing EOF. */
	for (int k = 0; k < ring.n; k++)
		for (int end = 0; end < 2; end++) {
			int fd = ring.pipe[k][end];

			if ((fd != in && fd != out && close(fd) < 0) || close(ring.solo[k][end]) < 0)
				return errno;
		}
	if (new_working_set(&ws, ring.ws_words) < 0)
		return ENOMEM;
	for (;;) {
		ssize_t n = read(in, &token, 1);

		if (n == 0)
			return 0; /* the agent closed the ring */
		if (n < 0)
			return errno;
		sink = sum_words(ws, ring.ws_words);
		if (write(out, &token, 1) != 1)
			return errno;
	}
}

/* Closing pipe 0 ends the ring: each member exits on EOF, closing the next pipe. */
static int stop_ring(struct run *r)
{
	int err = 0;

	for (int k = 0; k < RING_MAX; k++)
		for (int end = 0; end < 2; end++) {
			int closed = close_fd(r, &ring.pipe[k][end]);
			int closed_solo = close_fd(r, &ring.solo[k][end]);

			if (!err)
				err = closed ? closed : closed_solo;
		}
	for (int i = 0; i < ring.children; i++) {
		int reaped = reap(r, ring.pid[i], "ring_member");

		if (!err)
			err = reaped;
	}
	ring.children = 0;
	free(ring.ws);
	ring.ws = NULL;
	return err;
}

/* param[0]: processes in the ring; param[1]: bytes of working set each. */
static int start_ring(struct run *r)
{
	int err = 0;

	ring.n = (int)r->metric->param[0];
	ring.ws_words = (size_t)r->metric->param[1] / sizeof(unsigned long);
	ring.children = 0;
	for (int k = 0; k < RING_MAX; k++)
		ring.pipe[k][0] = ring.pipe[k][1] = ring.solo[k][0] = ring.solo[k][1] = -1;
	if (new_working_set(&ring.ws, ring.ws_words) < 0)
		return fail(r, "malloc");
	for (int k = 0; k < ring.n && !err; k++)
		if (pipe2(ring.pipe[k], O_CLOEXEC) < 0 || pipe2(ring.solo[k], O_CLOEXEC) < 0)
			err = fail(r, "pipe");
	for (int i = 1; i < ring.n && !err; i++) {
		pid_t pid = fork();

		if (pid < 0)
			err = fail(r, "fork");
		else if (pid == 0)
			_exit(ring_member(i));
		else
			ring.pid[ring.children++] = pid;
	}
	/* The agent keeps only its own two ring ends, so EOF can travel round. */
	for (int k = 0; k < ring.n && !err; k++) {
		if (k != 0)
			err = close_fd(r, &ring.pipe[k][1]);
		if (k != ring.n - 1 && !err)
			err = close_fd(r, &ring.pipe[k][0]);
	}
	if (err)
		stop_ring(r);
	return err;
}

/*
 * iters laps round the ring.  A lap is n switches, so the self-timed ns
 * are (ring - solo) / n, and the harness's ns per lap is ns per switch.
 */
static int run_ring(struct run *r, unsigned long iters)
{
	int64_t t0 = now_ns(), ring_ns, solo_ns;

	for (unsigned long i = 0; i < iters; i++) {
		int err = round_trip(r, ring.pipe[0][1], ring.pipe[ring.n - 1][0]);

		if (err)
			return err;
		sink = sum_words(ring.ws, ring.ws_words);
	}
	ring_ns = now_ns() - t0;

	t0 = now_ns();
	for (unsigned long i = 0; i < iters; i++)
		for (int k = 0; k < ring.n; k++) {
			int err = round_trip(r, ring.solo[k][1], ring.solo[k][0]);

			if (err)
				return err;
			sink = sum_words(ring.ws, ring.ws_words);
		}
	solo_ns = now_ns() - t0;

	/* A lap of the ring is n switches. */
	r->timed_ns = (ring_ns - solo_ns) / ring.n;
	return 0;
}

static const struct metric latency[] = {
	{ .name = "ipc.pipe_rtt", .setup = start_pipe_echo, .run = run_rtt, .teardown = stop_peer },
	{ .name = "ipc.unix_rtt", .setup = start_unix_echo, .run = run_rtt, .teardown = stop_peer },
	{ .name = "ipc.tcp_rtt", .setup = start_tcp_echo, .run = run_rtt, .teardown = stop_peer },
	{ .name = "ipc.udp_rtt", .setup = start_udp_echo, .run = run_rtt, .teardown = stop_udp_echo },
	{ .name = "ipc.tcp_connect", .setup = start_connection_server, .run = run_connect,
	  .teardown = stop_connection_server },
};

#define RING(metric_name, procs, ws_bytes)                                              \
	{ .name = metric_name, .self_timed = true, .param = { procs, ws_bytes },         \
	  .setup = start_ring, .run = run_ring, .teardown = stop_ring }

static const struct metric ring_metrics[] = {
	RING("ctx.ring2_0k", 2, 0),
	RING("ctx.ring4_0k", 4, 0),
	RING("ctx.ring8_0k", 8, 0),
	RING("ctx.ring16_0k", 16, 0),
	RING("ctx.ring2_16k", 2, 16 * KIB),
	RING("ctx.ring4_16k", 4, 16 * KIB),
	RING("ctx.ring8_16k", 8, 16 * KIB),
	RING("ctx.ring16_16k", 16, 16 * KIB),
};

static const struct metric bandwidth[] = {
	{ .name = "bw.pipe", .kind = BANDWIDTH, .bytes = STREAM_CHUNK, .setup = start_pipe_stream,
	  .run = run_stream, .teardown = stop_peer },
	{ .name = "bw.unix", .kind = BANDWIDTH, .bytes = STREAM_CHUNK, .setup = start_unix_stream,
	  .run = run_stream, .teardown = stop_peer },
	{ .name = "bw.tcp", .kind = BANDWIDTH, .bytes = STREAM_CHUNK, .setup = start_tcp_stream,
	  .run = run_stream, .teardown = stop_peer },
};

const struct metric_table ipc_latency_metrics = METRIC_TABLE(latency);
const struct metric_table ctx_metrics = METRIC_TABLE(ring_metrics);
const struct metric_table ipc_bandwidth_metrics = METRIC_TABLE(bandwidth);
