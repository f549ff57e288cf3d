/*
 * Workloads: the programs the host asks for (kernellab/guest/workloads.py
 * writes the file this reads), each run with a timeout after the suite's
 * tables, its output framed into records the host reassembles and parses:
 *
 *     t=wl_begin w=N name=LABEL
 *     t=wl_out w=N data=ESCAPED          (as many as its output needs)
 *     t=wl_end w=N status=STATUS code=C elapsed_ns=T
 *
 * data is a piece of the program's output, each byte outside '!'..'~' and
 * each '%' and '#' written %XX; the pieces, joined, are the output exactly.
 * STATUS is ok (exit 0), exit (code C), signal (signal C), timeout (killed
 * after its timeout), exec_failed (errno C: the program is not there, or
 * cannot run) or setup_failed (errno C: its directory or files).
 *
 * The file: NUL-terminated words.  "kernellab-workloads 1", the number of
 * workloads, then for each: its label, its timeout in ms, the stream to
 * capture (stdout, stderr or both), the number of files to write into its
 * directory and each file's name and content, the number of argv words
 * and the words.  "{workdir}" in a word or a file's content stands for the
 * workload's directory, which only the agent knows.  Programs are found in
 * the bin directory beside the file first, then in PATH; nothing goes
 * through a shell.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "record.h"
#include "workload.h"

#define MAGIC "kernellab-workloads 1"
#define MAX_FILE_BYTES (16L << 20)
#define MAX_WORDS 1024L
#define MAX_TIMEOUT_MS (7L * 24 * 3600 * 1000)
/* Raw bytes per t=wl_out: escaped, at most three times as many, under the 512 of a record. */
#define PIECE 140
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define PLACEHOLDER "{workdir}"

struct words {
	char *next, *end;
};

struct workload {
	const char *label, *stream;
	long timeout_ms, files, argc;
	char **file; /* name, content, name, content, ... */
	char **argv; /* NULL-terminated */
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

/* One workload's description; -1 when the file is damaged. */
static int parse_workload(struct words *w, struct workload *wl)
{
	wl->label = word(w);
	wl->timeout_ms = number(w, MAX_TIMEOUT_MS);
	wl->stream = word(w);
	wl->files = number(w, MAX_WORDS);
	if (!wl->label || wl->timeout_ms < 1 || !wl->stream || wl->files < 0)
		return -1;
	wl->file = calloc((size_t)wl->files * 2 + 1, sizeof(char *));
	if (!wl->file)
		return -1;
	for (long i = 0; i < wl->files * 2; i++)
		if (!(wl->file[i] = (char *)word(w)))
			return -1;
	wl->argc = number(w, MAX_WORDS);
	if (wl->argc < 1)
		return -1;
	wl->argv = calloc((size_t)wl->argc + 1, sizeof(char *));
	if (!wl->argv)
		return -1;
	for (long i = 0; i < wl->argc; i++)
		if (!(wl->argv[i] = (char *)word(w)))
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

/* The workload's directory, its files written and its argv filled; -1 with errno. */
static int set_up(const struct workload *wl, const char *dir, char **argv)
{
	if (mkdir(dir, 0755) < 0)
		return -1;
	for (long i = 0; i < wl->files; i++)
		if (write_text(dir, wl->file[2 * i], wl->file[2 * i + 1]) < 0)
			return -1;
	for (long i = 0; i < wl->argc; i++)
		if (!(argv[i] = fill(wl->argv[i], dir)))
			return -1;
	return 0;
}

static void emit_piece(int index, const char *buf, size_t len)
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
	emit("t=wl_out w=%d data=%s", index, escaped);
}

/* Sends the output in pieces that end at a newline where one is near. */
struct output {
	char buf[PIECE];
	size_t len;
};

static void take(struct output *out, int index, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		out->buf[out->len++] = data[i];
		if (data[i] == '\n' || out->len == PIECE) {
			emit_piece(index, out->buf, out->len);
			out->len = 0;
		}
	}
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void child(const struct workload *wl, const char *dir, char **argv, const char *bin_dir, int out, int err)
{
	const char *path = getenv("PATH");
	char search[PATH_MAX + 256];
	int null = open("/dev/null", O_RDONLY);

	setpgid(0, 0);
	signal(SIGPIPE, SIG_DFL); /* the agent ignores it; an exec'd program must not */
	if (null >= 0)
		dup2(null, 0);
	if (strcmp(wl->stream, "stderr") != 0)
		dup2(out, 1);
	else
		dup2(2, 1); /* never among the records */
	if (strcmp(wl->stream, "stdout") != 0)
		dup2(out, 2);
	snprintf(search, sizeof(search), "%s:%s", bin_dir, path && *path ? path : DEFAULT_PATH);
	setenv("PATH", search, 1);
	if (chdir(dir) == 0)
		execvp(argv[0], argv);
	if (write(err, &errno, sizeof(errno)) < 0)
		_exit(126);
	_exit(127);
}

/* Reads the program's output until it ends or the deadline passes: true when it passed. */
static bool relay(int index, int fd, long long deadline)
{
	struct output out = { .len = 0 };
	char buf[4096];

	for (;;) {
		long long left = deadline - now_ns();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int ready;
		ssize_t n;

		if (left <= 0)
			break;
		ready = poll(&p, 1, (int)(left / 1000000 > INT_MAX ? INT_MAX : left / 1000000 + 1));
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			continue; /* the deadline is checked above */
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			emit_piece(index, out.buf, out.len);
			return false;
		}
		take(&out, index, buf, (size_t)n);
	}
	emit_piece(index, out.buf, out.len);
	return true;
}

static void run_one(int index, const struct workload *wl, const char *workdir, const char *bin_dir)
{
	char dir[PATH_MAX], label[128];
	char **argv = calloc((size_t)wl->argc + 1, sizeof(char *));
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, status = 0, exec_errno = 0;
	const char *verdict = "ok";
	long long start, code = 0;
	bool timed_out;
	pid_t pid;

	snprintf(label, sizeof(label), "%s", wl->label);
	emit("t=wl_begin w=%d name=%s", index, sanitize(label));
	snprintf(dir, sizeof(dir), "%s/wl-%d", workdir, index);
	if (!argv || set_up(wl, dir, argv) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		emit("t=wl_end w=%d status=setup_failed code=%d elapsed_ns=0", index, errno);
		goto done;
	}
	start = now_ns();
	pid = fork();
	if (pid < 0) {
		emit("t=wl_end w=%d status=setup_failed code=%d elapsed_ns=0", index, errno);
		goto done;
	}
	if (pid == 0)
		child(wl, dir, argv, bin_dir, out[1], err[1]);
	setpgid(pid, pid); /* whichever of the two runs first */
	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	timed_out = relay(index, out[0], start + wl->timeout_ms * 1000000LL);
	if (timed_out)
		kill(-pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	kill(-pid, SIGKILL); /* what it left running */
	if (read(err[0], &exec_errno, sizeof(exec_errno)) == (ssize_t)sizeof(exec_errno)) {
		verdict = "exec_failed";
		code = exec_errno;
	} else if (timed_out) {
		verdict = "timeout";
		code = wl->timeout_ms;
	} else if (WIFSIGNALED(status)) {
		verdict = "signal";
		code = WTERMSIG(status);
	} else if (WEXITSTATUS(status) != 0) {
		verdict = "exit";
		code = WEXITSTATUS(status);
	}
	emit("t=wl_end w=%d status=%s code=%lld elapsed_ns=%lld", index, verdict, code, now_ns() - start);
done:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	for (long i = 0; argv && i < wl->argc; i++)
		free(argv[i]);
	free(argv);
	if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		warn("removing %s: %s", dir, strerror(errno));
}

void run_workloads(const char *path, const char *workdir)
{
	char bin_dir[PATH_MAX], *slash;
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
			break;
		}
		run_one((int)i, &wl, workdir, bin_dir);
		free(wl.file);
		free(wl.argv);
	}
	free(data);
}
