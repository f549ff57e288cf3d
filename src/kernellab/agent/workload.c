/*
 * Workloads: the programs the host asks for (kernellab/guest/workloads.py
 * writes the file this reads), each run with a timeout after the suite's
 * tables, its output framed into records the host reassembles and parses:
 *
 *     t=wl_begin w=N name=LABEL
 *     t=wl_out w=N data=ESCAPED          (as many as its output needs)
 *     t=wl_srv w=N data=ESCAPED          (its server's output, as many)
 *     t=wl_ready w=N                     (a workload whose client is the host's)
 *     t=wl_end w=N status=STATUS code=C elapsed_ns=T
 *
 * data is a piece of the program's output, each byte outside '!'..'~' and
 * each '%' and '#' written %XX; the pieces, joined, are the output exactly.
 * STATUS is ok (exit 0), exit (code C), signal (signal C), timeout (killed
 * after its timeout), exec_failed (errno C: the program is not there, or
 * cannot run) or setup_failed (errno C: its directory or files); for a
 * workload with a server, also server_exec_failed (errno C),
 * server_port_busy (port C answered before the server started: another
 * program holds it), server_failed (it ended before it was ready: C is its
 * exit status, or 256 + the signal that killed it), server_not_ready (not
 * ready within C ms; killed) and server_died (it ended while the client
 * ran, with C as for server_failed: a non-zero status or a signal; a
 * server that leaves with status 0, like iperf3 --one-off, is not a
 * failure).  elapsed_ns is the client's run time.  A workload that needs a
 * disk when there is none to give it is not run:
 *
 *     t=wl_end w=N status=no_disk code=0 elapsed_ns=0 reason=WHY
 *
 * WHY as the file.* metrics say it (file.c: the file system did not mount,
 * and why), never run on the tmpfs instead.
 *
 * A workload whose client runs on the host (a network link from the host:
 * iperf3 from the host into the guest) has no client here: its server
 * starts as any other's, t=wl_ready says it is ready (the host then starts
 * its client against it), and the server ends by itself once the host's
 * client is done (iperf3 --one-off): status ok (exit 0), server_died (C as
 * above), or timeout (still running at the timeout; killed), elapsed_ns
 * from ready to its end.  Its server's output is its only output here.  In
 * PID-1 mode the agent first brings up the guest's network device (pid1.c:
 * bring_up_link(), once); where there is none, or it cannot be brought up,
 * the workload is not run:
 *
 *     t=wl_end w=N status=no_link code=0 elapsed_ns=0 reason=WHY
 *
 * (WHY: no_network_device, or the request that failed and its errno.)  As a
 * program on a machine the agent touches no interface: the machine's own
 * network is the link, and KL_NET_IF, if set, names the interface it must
 * have (else no_link as above).  A workload that needs more CPUs or memory
 * than the machine has is not run either:
 *
 *     t=wl_end w=N status=too_small code=0 elapsed_ns=0 reason=WHAT_HAS
 *
 * (WHAT: vcpus or memory_mib, the first it lacks; HAS: what the machine
 * has: the CPUs the agent may run on, MemTotal in MiB).  The host checks
 * first where it knows the machine (a QEMU guest, a machine it asked); on a
 * board whose console is all it sees (LAVA) this is the only check.
 *
 * The file: NUL-terminated words.  "kernellab-workloads 5", the number of
 * workloads, then for each: its label, its timeout in ms (the server's
 * start and the client together), whether it needs a disk (1: its
 * directory goes on the file system of a disk, file.c's
 * workload_disk_dir(); 0: on the agent's own workdir, a guest's tmpfs),
 * whether its client runs on the host (1: it has a server and no argv
 * words here; 0: both run here), the CPUs and the MiB of memory it needs
 * (0: any), the stream to capture (stdout, stderr or
 * both), the number of files to write into its directory and each file's
 * name and content, the number of argv words and the words, then the
 * number of its server's argv words (0: no server) and, with a server, the
 * words, how it is known to be ready ("line" and a POSIX extended regular
 * expression that a line of its output matches, or "port" and a TCP port
 * on 127.0.0.1 that accepts a connection), the ms it may take to be ready,
 * the signal that stops it (TERM, INT or QUIT) and the ms it is given to
 * stop before SIGKILL.  "{workdir}" in a word or a file's content stands
 * for the workload's directory, which only the agent knows.  Programs are
 * found in the bin directory beside the file first, then in PATH; nothing
 * goes through a shell.
 *
 * A server runs in its own process group, stdout and stderr into one pipe
 * the agent drains all along (a server blocked on a full pipe would stall
 * the client); the client runs once it is ready, and the server is
 * stopped after the client ends, its group killed.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <regex.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "pid1.h"
#include "record.h"
#include "workload.h"

#define MAGIC "kernellab-workloads 5"
#define MAX_FILE_BYTES (16L << 20)
#define MAX_WORDS 1024L
#define MAX_TIMEOUT_MS (7L * 24 * 3600 * 1000)
#define MAX_NEED (1L << 30) /* vCPUs or MiB: beyond any machine */
/* Raw bytes per t=wl_out: escaped, at most three times as many, under the 512 of a record. */
#define PIECE 140
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define PLACEHOLDER "{workdir}"
/* How often a server's port is tried while it starts (guest time). */
#define PORT_TRY_MS 20
/* A longer line of a server's output is matched by its first part. */
#define MAX_LINE 1024

struct words {
	char *next, *end;
};

struct server {
	long argc;
	char **argv; /* NULL-terminated; argc 0: the workload has none */
	const char *ready_kind, *ready_value; /* "line" and a regex, or "port" and a port */
	long ready_timeout_ms, grace_ms;
	int stop_signal;
};

struct workload {
	const char *label, *stream;
	long timeout_ms, disk, host, files, argc; /* disk: 1 if it needs one; host: its client is the host's */
	long vcpus, memory_mib;                   /* what it needs of the machine (0: any) */
	char **file; /* name, content, name, content, ... */
	char **argv; /* NULL-terminated */
	struct server server;
};

static const char *word(struct words *w)
{
	char *start = w->next, *nul;

	if (start >= w->end)
		return NULL;
	nul = memchr(start, '\0', (size_t)(w->end - start));
	if (!nul)
		return NULL;
	w->next = nul + 1;
	return start;
}

static long number(struct words *w, long max)
{
	const char *text = word(w);
	char *end;
	long value;

	if (!text)
		return -1;
	errno = 0;
	value = strtol(text, &end, 10);
	if (errno || end == text || *end || value < 0 || value > max)
		return -1;
	return value;
}

static char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf;
	struct stat st;
	size_t got = 0;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || st.st_size > MAX_FILE_BYTES) {
		if (errno == 0)
			errno = EFBIG;
		close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	while (buf && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			free(buf);
			buf = NULL;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return buf;
}

/* s with each PLACEHOLDER replaced by dir (malloc'd; NULL when out of memory). */
static char *fill(const char *s, const char *dir)
{
	size_t n = 0, dlen = strlen(dir), plen = strlen(PLACEHOLDER);
	char *out, *o;

	for (const char *p = strstr(s, PLACEHOLDER); p; p = strstr(p + plen, PLACEHOLDER))
		n++;
	out = malloc(strlen(s) + n * dlen + 1);
	if (!out)
		return NULL;
	o = out;
	for (const char *p = s, *hit; *p; p = hit + plen) {
		hit = strstr(p, PLACEHOLDER);
		if (!hit) {
			strcpy(o, p);
			return out;
		}
		memcpy(o, p, (size_t)(hit - p));
		o += hit - p;
		memcpy(o, dir, dlen);
		o += dlen;
	}
	*o = '\0';
	return out;
}

static int signal_named(const char *name)
{
	if (!name)
		return -1;
	if (strcmp(name, "TERM") == 0)
		return SIGTERM;
	if (strcmp(name, "INT") == 0)
		return SIGINT;
	if (strcmp(name, "QUIT") == 0)
		return SIGQUIT;
	return -1;
}

/* A workload's server, if it has one; -1 when the file is damaged. */
static int parse_server(struct words *w, struct server *srv)
{
	srv->argc = number(w, MAX_WORDS);
	if (srv->argc <= 0)
		return srv->argc; /* 0: none */
	srv->argv = calloc((size_t)srv->argc + 1, sizeof(char *));
	if (!srv->argv)
		return -1;
	for (long i = 0; i < srv->argc; i++)
		if (!(srv->argv[i] = (char *)word(w)))
			return -1;
	srv->ready_kind = word(w);
	srv->ready_value = word(w);
	srv->ready_timeout_ms = number(w, MAX_TIMEOUT_MS);
	srv->stop_signal = signal_named(word(w));
	srv->grace_ms = number(w, MAX_TIMEOUT_MS);
	if (!srv->ready_kind || !srv->ready_value || srv->ready_timeout_ms < 1 || srv->stop_signal < 0 ||
	    srv->grace_ms < 0)
		return -1;
	if (strcmp(srv->ready_kind, "line") != 0 && strcmp(srv->ready_kind, "port") != 0)
		return -1;
	return 0;
}

/* One workload's description; -1 when the file is damaged. */
static int parse_workload(struct words *w, struct workload *wl)
{
	wl->label = word(w);
	wl->timeout_ms = number(w, MAX_TIMEOUT_MS);
	wl->disk = number(w, 1);
	wl->host = number(w, 1);
	wl->vcpus = number(w, MAX_NEED);
	wl->memory_mib = number(w, MAX_NEED);
	wl->stream = word(w);
	wl->files = number(w, MAX_WORDS);
	if (!wl->label || wl->timeout_ms < 1 || wl->disk < 0 || wl->host < 0 || wl->vcpus < 0 || wl->memory_mib < 0 ||
	    !wl->stream || wl->files < 0)
		return -1;
	wl->file = calloc((size_t)wl->files * 2 + 1, sizeof(char *));
	if (!wl->file)
		return -1;
	for (long i = 0; i < wl->files * 2; i++)
		if (!(wl->file[i] = (char *)word(w)))
			return -1;
	wl->argc = number(w, MAX_WORDS);
	if (wl->argc < (wl->host ? 0 : 1) || (wl->host && wl->argc))
		return -1;
	wl->argv = calloc((size_t)wl->argc + 1, sizeof(char *));
	if (!wl->argv)
		return -1;
	for (long i = 0; i < wl->argc; i++)
		if (!(wl->argv[i] = (char *)word(w)))
			return -1;
	if (parse_server(w, &wl->server) < 0 || (wl->host && !wl->server.argc))
		return -1;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0)
		warn("remove %s: %s", path, strerror(errno));
	return 0;
}

static int write_text(const char *dir, const char *name, const char *content)
{
	char path[PATH_MAX];
	char *text = fill(content, dir);
	int fd, ret = 0;
	size_t len;
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= sizeof(path)) {
		free(text);
		errno = ENAMETOOLONG;
		return -1;
	}
	if (!text)
		return -1;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		ret = -1;
	if (fd >= 0 && close(fd) < 0)
		ret = -1;
	free(text);
	return ret;
}

/* words with each PLACEHOLDER filled, into out (argc + 1 slots); -1 with errno. */
static int fill_words(char **out, char *const *words, long argc, const char *dir)
{
	for (long i = 0; i < argc; i++)
		if (!(out[i] = fill(words[i], dir)))
			return -1;
	return 0;
}

static void free_words(char **words, long argc)
{
	for (long i = 0; words && i < argc; i++)
		free(words[i]);
	free(words);
}

/* The workload's directory, its files written and its argvs filled; -1 with errno. */
static int set_up(const struct workload *wl, const char *dir, char **argv, char **server_argv)
{
	if (mkdir(dir, 0755) < 0)
		return -1;
	for (long i = 0; i < wl->files; i++)
		if (write_text(dir, wl->file[2 * i], wl->file[2 * i + 1]) < 0)
			return -1;
	if (fill_words(argv, wl->argv, wl->argc, dir) < 0)
		return -1;
	return fill_words(server_argv, wl->server.argv, wl->server.argc, dir);
}

static void emit_piece(const char *type, int index, const char *buf, size_t len)
{
	char escaped[PIECE * 3 + 1], *o = escaped;

	if (!len)
		return;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c < '!' || c > '~' || c == '%' || c == '#')
			o += sprintf(o, "%%%02X", c);
		else
			*o++ = (char)c;
	}
	*o = '\0';
	emit("t=%s w=%d data=%s", type, index, escaped);
}

/*
 * One program's output as it arrives: sent in pieces that end at a newline
 * where one is near (type: wl_out or wl_srv), and, for a server waiting to
 * be ready, matched line by line against its ready_line.
 */
struct stream {
	const char *type;
	int index, fd; /* fd -1: its end was read */
	char buf[PIECE];
	size_t len;
	regex_t *ready_line; /* NULL: not looked for (or found) */
	char line[MAX_LINE];
	size_t line_len;
	bool ready;
};

static void match_line(struct stream *s, char c)
{
	if (c != '\n') {
		if (s->line_len < sizeof(s->line) - 1)
			s->line[s->line_len++] = c;
		return;
	}
	s->line[s->line_len] = '\0';
	s->line_len = 0;
	if (regexec(s->ready_line, s->line, 0, NULL, 0) == 0) {
		s->ready = true;
		s->ready_line = NULL;
	}
}

static void take(struct stream *s, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		s->buf[s->len++] = data[i];
		if (data[i] == '\n' || s->len == PIECE) {
			emit_piece(s->type, s->index, s->buf, s->len);
			s->len = 0;
		}
		if (s->ready_line)
			match_line(s, data[i]);
	}
}

/* Reads what is there (the fd polled readable); at its end, sends the rest and closes it. */
static void pump(struct stream *s)
{
	char buf[4096];
	ssize_t n = read(s->fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n > 0) {
		take(s, buf, (size_t)n);
		return;
	}
	emit_piece(s->type, s->index, s->buf, s->len);
	s->len = 0;
	close(s->fd);
	s->fd = -1;
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/*
 * Waits for output on the streams (NULL or fd -1: none) and reads it, for at
 * most wait_ms (and not past the deadline): false once the deadline passed.
 */
static bool pump_for(struct stream *a, struct stream *b, long long wait_ms, long long deadline)
{
	struct pollfd p[2];
	struct stream *of[2];
	long long left = deadline - now_ns();
	nfds_t n = 0;
	int ready;

	if (left <= 0)
		return false;
	if (left / 1000000 + 1 < wait_ms)
		wait_ms = left / 1000000 + 1;
	if (wait_ms > INT_MAX)
		wait_ms = INT_MAX;
	for (struct stream **s = (struct stream *[]){ a, b, NULL }; *s; s++)
		if ((*s)->fd >= 0) {
			p[n] = (struct pollfd){ .fd = (*s)->fd, .events = POLLIN };
			of[n++] = *s;
		}
	ready = poll(p, n, (int)wait_ms);
	for (nfds_t i = 0; ready > 0 && i < n; i++)
		if (p[i].revents)
			pump(of[i]);
	return true;
}

/* Runs argv in dir in a process group of its own, stdin /dev/null, its output into out. */
static void child(char **argv, const char *dir, const char *stream, const char *bin_dir, int out, int err)
{
	const char *path = getenv("PATH");
	char search[PATH_MAX + 256];
	int null = open("/dev/null", O_RDONLY);

	setpgid(0, 0);
	signal(SIGPIPE, SIG_DFL); /* the agent ignores it; an exec'd program must not */
	if (null >= 0)
		dup2(null, 0);
	if (strcmp(stream, "stderr") != 0)
		dup2(out, 1);
	else
		dup2(2, 1); /* never among the records */
	if (strcmp(stream, "stdout") != 0)
		dup2(out, 2);
	snprintf(search, sizeof(search), "%s:%s", bin_dir, path && *path ? path : DEFAULT_PATH);
	setenv("PATH", search, 1);
	if (chdir(dir) == 0)
		execvp(argv[0], argv);
	if (write(err, &errno, sizeof(errno)) < 0)
		_exit(126);
	_exit(127);
}

struct proc {
	pid_t pid;
	struct stream out;
	bool ended;
	int status; /* its wait status, once ended */
};

/*
 * Starts argv; 0, or -1 with errno: the pipes or fork failed, or exec did
 * (then *exec_errno says why and the process has been reaped).
 */
static int start(struct proc *p, char **argv, const char *dir, const char *stream, const char *bin_dir,
		 int *exec_errno)
{
	int out[2], err[2];
	ssize_t got;

	*exec_errno = 0;
	if (pipe2(out, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(err, O_CLOEXEC) < 0) {
		close(out[0]);
		close(out[1]);
		return -1;
	}
	p->pid = fork();
	if (p->pid == 0)
		child(argv, dir, stream, bin_dir, out[1], err[1]);
	if (p->pid < 0) {
		int fork_errno = errno;

		for (int i = 0; i < 2; i++) {
			close(out[i]);
			close(err[i]);
		}
		errno = fork_errno;
		return -1;
	}
	close(out[1]);
	close(err[1]);
	setpgid(p->pid, p->pid); /* whichever of the two runs first */
	p->out.fd = out[0];
	/* The end of err comes with exec (close-on-exec), or the errno of a failed one. */
	while ((got = read(err[0], exec_errno, sizeof(*exec_errno))) < 0 && errno == EINTR)
		;
	close(err[0]);
	if (got != (ssize_t)sizeof(*exec_errno)) {
		*exec_errno = 0;
		return 0;
	}
	while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
		;
	p->ended = true;
	errno = *exec_errno;
	return -1;
}

/* True once the process has ended (reaped, its status kept). */
static bool ended(struct proc *p)
{
	if (!p->ended && waitpid(p->pid, &p->status, WNOHANG) == p->pid)
		p->ended = true;
	return p->ended;
}

/* A wait status as a record's code: the exit status, or 256 + the signal. */
static int status_code(int status)
{
	return WIFSIGNALED(status) ? 256 + WTERMSIG(status) : WEXITSTATUS(status);
}

static bool port_answers(long port)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool answers;

	if (fd < 0)
		return false;
	answers = connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0;
	close(fd);
	return answers;
}

struct verdict {
	const char *status;
	long long code;
};

/* Reads the rest of an ended server's output (a process of its group that escaped may hold the pipe). */
static void drain(struct proc *p)
{
	long long give_up = now_ns() + 100000000LL;

	while (p->out.fd >= 0 && pump_for(&p->out, &(struct stream){ .fd = -1 }, 100, give_up))
		;
	if (p->out.fd >= 0) {
		emit_piece(p->out.type, p->out.index, p->out.buf, p->out.len);
		p->out.len = 0;
		close(p->out.fd);
		p->out.fd = -1;
	}
}

/*
 * Starts the server and waits until it is ready: true, or false with the
 * verdict (the server, if it started, is killed and reaped).
 */
static bool start_server(const struct server *srv, struct proc *p, char **argv, const char *dir,
			 const char *bin_dir, long long deadline, struct verdict *v)
{
	bool by_line = strcmp(srv->ready_kind, "line") == 0;
	long port = by_line ? 0 : strtol(srv->ready_value, NULL, 10);
	long long ready_by = now_ns() + srv->ready_timeout_ms * 1000000LL;
	regex_t regex;
	int exec_errno, rc;

	if (!by_line && port_answers(port)) {
		*v = (struct verdict){ "server_port_busy", port };
		return false;
	}
	if (by_line && (rc = regcomp(&regex, srv->ready_value, REG_EXTENDED | REG_NOSUB)) != 0) {
		*v = (struct verdict){ "setup_failed", EINVAL };
		return false;
	}
	p->out.ready_line = by_line ? &regex : NULL;
	if (start(p, argv, dir, "both", bin_dir, &exec_errno) < 0) {
		*v = exec_errno ? (struct verdict){ "server_exec_failed", exec_errno }
				: (struct verdict){ "setup_failed", errno };
	} else {
		if (ready_by > deadline)
			ready_by = deadline;
		while (!(by_line ? p->out.ready : port_answers(port)) && !ended(p) &&
		       pump_for(&p->out, &(struct stream){ .fd = -1 }, PORT_TRY_MS, ready_by))
			;
		if (by_line ? p->out.ready : !p->ended && port_answers(port))
			*v = (struct verdict){ "ok", 0 };
		else if (ended(p))
			*v = (struct verdict){ "server_failed", status_code(p->status) };
		else
			*v = (struct verdict){ "server_not_ready", srv->ready_timeout_ms };
	}
	if (by_line)
		regfree(&regex);
	p->out.ready_line = NULL;
	if (strcmp(v->status, "ok") == 0)
		return true;
	if (p->pid > 0) {
		if (!p->ended)
			kill(-p->pid, SIGKILL);
		while (!p->ended && waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
			;
		p->ended = true;
		drain(p);
	}
	return false;
}

/* Stops the server (its signal, then SIGKILL after its grace), reads the rest of its output. */
static void stop_server(const struct server *srv, struct proc *p)
{
	long long give_up = now_ns() + srv->grace_ms * 1000000LL;

	if (!ended(p)) {
		kill(-p->pid, srv->stop_signal);
		while (!ended(p) && pump_for(&p->out, &(struct stream){ .fd = -1 }, 10, give_up))
			;
	}
	kill(-p->pid, SIGKILL); /* it, if it outlived its grace, and what it left running */
	while (!p->ended && waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
		;
	p->ended = true;
	drain(p);
}

/*
 * Runs the client to its end or its deadline, reading its output and the
 * server's (server: NULL without one): its verdict.
 */
static struct verdict run_client(struct proc *c, struct proc *server, long long deadline, long timeout_ms)
{
	struct stream none = { .fd = -1 };
	struct proc *s = server;
	bool timed_out = false;
	int status;

	while (c->out.fd >= 0) {
		if (!pump_for(&c->out, s ? &s->out : &none, 1000, deadline)) {
			timed_out = true;
			break;
		}
		if (s && !s->ended)
			ended(s); /* its status, while the client still runs */
	}
	if (!timed_out) /* its output ended: it did, or it will by the deadline */
		while (!ended(c) && pump_for(&none, s ? &s->out : &none, 10, deadline))
			;
	timed_out = !ended(c);
	if (timed_out)
		kill(-c->pid, SIGKILL);
	while (!c->ended && waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
		;
	c->ended = true;
	kill(-c->pid, SIGKILL); /* what it left running */
	status = c->status;
	if (s && ended(s) && (WIFSIGNALED(s->status) || WEXITSTATUS(s->status) != 0))
		return (struct verdict){ "server_died", status_code(s->status) };
	if (timed_out)
		return (struct verdict){ "timeout", timeout_ms };
	if (WIFSIGNALED(status))
		return (struct verdict){ "signal", WTERMSIG(status) };
	if (WEXITSTATUS(status) != 0)
		return (struct verdict){ "exit", WEXITSTATUS(status) };
	return (struct verdict){ "ok", 0 };
}

/*
 * A workload whose client is the host's: its server, waited for until it
 * ends by itself (the host's client done) or the deadline; its verdict.
 */
static struct verdict await_server(struct proc *s, long long deadline, long timeout_ms)
{
	struct stream none = { .fd = -1 };

	while (!ended(s))
		if (!pump_for(&s->out, &none, 100, deadline))
			return (struct verdict){ "timeout", timeout_ms };
	if (WIFSIGNALED(s->status) || WEXITSTATUS(s->status) != 0)
		return (struct verdict){ "server_died", status_code(s->status) };
	return (struct verdict){ "ok", 0 };
}

/* A workload that cannot run here (status no_disk, no_link or too_small): why, in its t=wl_end. */
static void not_run(int index, const struct workload *wl, const char *status, const char *why)
{
	char label[128], reason[96];

	snprintf(label, sizeof(label), "%s", wl->label);
	snprintf(reason, sizeof(reason), "%s", why);
	emit("t=wl_begin w=%d name=%s", index, sanitize(label));
	emit("t=wl_end w=%d status=%s code=0 elapsed_ns=0 reason=%s", index, status, sanitize(reason));
}

/*
 * What of the machine a workload needs more of than there is, with what
 * there is ("vcpus_1"; NULL: nothing): the CPUs this process may run on (as
 * nproc counts them) and MemTotal.
 */
static const char *too_small(const struct workload *wl, char *why, size_t size)
{
	struct sysinfo si;
	cpu_set_t cpus;
	long have;

	if (wl->vcpus > 1) {
		have = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : sysconf(_SC_NPROCESSORS_ONLN);
		if (have > 0 && have < wl->vcpus) {
			snprintf(why, size, "vcpus_%ld", have);
			return why;
		}
	}
	if (wl->memory_mib > 0 && sysinfo(&si) == 0) {
		have = (long)((unsigned long long)si.totalram * si.mem_unit >> 20);
		if (have < wl->memory_mib) {
			snprintf(why, size, "memory_mib_%ld", have);
			return why;
		}
	}
	return NULL;
}

/*
 * Why the host cannot reach a workload's server here (NULL: it can): in
 * PID-1 mode, the guest's network device brought up (pid1.c); as a program,
 * the interface KL_NET_IF names, when it names one, missing.
 */
static const char *link_missing(void)
{
	const char *name = getenv("KL_NET_IF");

	if (pid1)
		return bring_up_link();
	if (name && *name && if_nametoindex(name) == 0)
		return "no_network_device";
	return NULL;
}

static void run_one(int index, const struct workload *wl, const char *workdir, const char *bin_dir)
{
	const struct server *srv = &wl->server;
	char dir[PATH_MAX], label[128];
	char **argv = calloc((size_t)wl->argc + 1, sizeof(char *));
	char **server_argv = calloc((size_t)srv->argc + 1, sizeof(char *));
	struct proc client = { .out = { .type = "wl_out", .index = index, .fd = -1 } };
	struct proc server = { .out = { .type = "wl_srv", .index = index, .fd = -1 } };
	struct verdict v = { "ok", 0 };
	long long start_ns = now_ns(), deadline = start_ns + wl->timeout_ms * 1000000LL, elapsed = 0;
	int exec_errno;

	snprintf(label, sizeof(label), "%s", wl->label);
	emit("t=wl_begin w=%d name=%s", index, sanitize(label));
	snprintf(dir, sizeof(dir), "%s/wl-%d", workdir, index);
	if (!argv || !server_argv || set_up(wl, dir, argv, server_argv) < 0) {
		v = (struct verdict){ "setup_failed", errno };
		goto done;
	}
	if (srv->argc && !start_server(srv, &server, server_argv, dir, bin_dir, deadline, &v))
		goto done;
	start_ns = now_ns();
	if (wl->host) {
		emit("t=wl_ready w=%d", index);
		v = await_server(&server, deadline, wl->timeout_ms);
	} else if (start(&client, argv, dir, wl->stream, bin_dir, &exec_errno) < 0)
		v = exec_errno ? (struct verdict){ "exec_failed", exec_errno } : (struct verdict){ "setup_failed", errno };
	else
		v = run_client(&client, srv->argc ? &server : NULL, deadline, wl->timeout_ms);
	elapsed = now_ns() - start_ns;
	if (srv->argc)
		stop_server(srv, &server);
done:
	emit("t=wl_end w=%d status=%s code=%lld elapsed_ns=%lld", index, v.status, v.code, elapsed);
	for (struct proc *p = &client; p; p = p == &client ? &server : NULL)
		if (p->out.fd >= 0)
			close(p->out.fd);
	free_words(argv, wl->argc);
	free_words(server_argv, srv->argc);
	if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		warn("removing %s: %s", dir, strerror(errno));
}

void run_workloads(const char *path, const char *workdir)
{
	char bin_dir[PATH_MAX], *slash;
	const char *disk_dir, *no_disk, *no_link, *small;
	char small_why[48];
	struct words w;
	size_t len;
	long count;
	char *data;

	if (!path)
		return;
	data = read_file(path, &len);
	if (!data) {
		emit("t=meta key=workloads value=unreadable_errno_%d", errno);
		return;
	}
	w.next = data;
	w.end = data + len;
	snprintf(bin_dir, sizeof(bin_dir), "%s", path);
	slash = strrchr(bin_dir, '/');
	snprintf(slash ? slash + 1 : bin_dir, sizeof(bin_dir) - (size_t)(slash ? slash + 1 - bin_dir : 0), "bin");
	if (!word(&w) || strcmp(data, MAGIC) != 0 || (count = number(&w, MAX_WORDS)) < 0) {
		emit("t=meta key=workloads value=damaged");
		free(data);
		return;
	}
	for (long i = 0; i < count; i++) {
		struct workload wl = { 0 };

		if (parse_workload(&w, &wl) < 0) {
			emit("t=meta key=workloads value=damaged");
			free(wl.file);
			free(wl.argv);
			free(wl.server.argv);
			break;
		}
		if ((small = too_small(&wl, small_why, sizeof(small_why))))
			not_run((int)i, &wl, "too_small", small);
		else if (wl.host && (no_link = link_missing()))
			not_run((int)i, &wl, "no_link", no_link);
		else if (!wl.disk)
			run_one((int)i, &wl, workdir, bin_dir);
		else if ((disk_dir = workload_disk_dir(workdir, &no_disk)))
			run_one((int)i, &wl, disk_dir, bin_dir);
		else
			not_run((int)i, &wl, "no_disk", no_disk);
		free(wl.file);
		free(wl.argv);
		free(wl.server.argv);
	}
	free(data);
}
