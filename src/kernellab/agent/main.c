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
 * prints one t=hello (whose v is RECORD_VERSION), t=meta records (facts
 * about the run that are not measurements, such as the harness overheads
 * and, in PID-1 mode, key=module.NAME for each kernel module of the
 * initramfs: loaded or why not), then for each metric either one t=sample
 * per repeat or one t=na saying why it could not run, with one t=sample
 * per /proc/meminfo line among them (before the groups whose load leaves the
 * memory changed: net.*, mem.alloc_max, blk.*, file.*; and before sysfs.*,
 * whose walk of /sys fills the dentry and inode caches) and a t=meta
 * key=fine_timers.GROUP before the groups that sleep to deadlines (lat.*,
 * net.*: harness.h), then the workloads' t=wl_* records (workload.c), then
 * one t=meta key=vulnerability.NAME per file of
 * /sys/devices/system/cpu/vulnerabilities, and last t=end records=<number
 * of records before it>.
 *
 * The suite is lmbench-class: system calls, signals, IPC latency and
 * bandwidth, context switches, file system, VM, memory bandwidth, AES in the
 * kernel (AF_ALG) and in user space, idle interrupt rates and block I/O.
 * Each metric is a latency (ns per operation), a bandwidth (MB/s, 10^6
 * bytes per second) or a value it measures itself (see struct metric in
 * harness.h).
 *
 * The sources, one static binary:
 *   main.c     options, the hello/meta/end records, the suite's order
 *   record.c   record framing and checksums, warnings (record.h)
 *   harness.c  clock, calibration, repeats, overhead subtraction, KL_ONLY
 *              (harness.h: struct metric and what a group implements)
 *   pid1.c     mounts, console, loopback, scratch disk, modules, the host
 *              link's network device, reboot (pid1.h)
 *   util.c     helpers the groups share: children, files, buffers (util.h)
 *   profile.c  KL_PROFILE: the kernel tick profiler's counters (profile.h)
 *   workload.c KL_WORKLOADS: real programs the host asks for (workload.h)
 *   syscall.c ipc.c proc.c fs.c mem.c crypto.c irq.c latency.c net.c blk.c
 *   file.c
 *   sysfs.c
 *              the metric groups, each with its tables and its own state
 *              (ctx.* is in ipc.c: its hops are ipc.pipe_rtt's round trips)
 *
 * Build: gcc -static -O2 -Wall -Wextra -o agent *.c
 * (kernellab/agent/compile.py does, per arch, and caches the result.)
 * Options come from the environment (the kernel hands unknown key=value boot
 * arguments to init that way):
 *   KL_REPEATS       samples per metric (11; the slow metrics take at most 3)
 *   KL_TARGET_US     calibrate each sample to last about this long (2000)
 *   KL_ONLY          comma-separated metrics to run (all)
 *   KL_WITH          opt-in groups to run too: net (a data server under load)
 *   KL_NET_MS        net.*: length of one window of load (500)
 *   KL_IDLE_MS       irq.*: length of one idle window (1000)
 *   KL_BLOCK_DEV     blk.*: scratch disk, overwritten! (PID-1 mode: the first
 *                    /sys/block/vd*; local mode: none)
 *   KL_BLOCK_MB      blk.*: MiB moved per sample (32)
 *   KL_ALLOC_CAP_MB  mem.alloc_max: stop there (4096; local mode 64)
 *   KL_FS            file.*: PID-1 mode: the file system the host made on a
 *                    disk of its own (ext4), mounted on /mnt/fs (file.c);
 *                    the workloads that need a disk work there too
 *   KL_FILE_DIR      file.*: local mode: the directory holding tst.dd, and
 *                    where the workloads that need a disk work (else the
 *                    agent's own /tmp directory)
 *   KL_FILE_MB       file.*: MiB moved per sample (the whole file)
 *   KL_PROFILE       1: the kernel tick profiler's counters, reset before the
 *                    suite and sent after it (profile.c; needs profile=N)
 *   KL_WORKLOADS     local mode: the file of workloads to run after the
 *                    suite (workload.c); PID-1 mode reads
 *                    /kernellab/workloads when the initramfs has it
 *   KL_NET_IF        local mode: the interface the host's link to a
 *                    workload's server comes in on; where it is missing,
 *                    such a workload is not run (as in a guest without a
 *                    network device); unset, nothing is checked (PID-1
 *                    mode: the first interface that is not lo, brought up)
 * Local mode also accepts --repeats N --target-us N --only a,b --with net --idle-ms N
 * --block-dev PATH, which override the environment.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "harness.h"
#include "pid1.h"
#include "profile.h"
#include "record.h"
#include "util.h"
#include "workload.h"

#define MAX_TARGET_US 10000000L
#define MAX_IDLE_MS 60000L
#define MAX_BLOCK_MB 65536L
#define USAGE "usage: agent [--repeats N] [--target-us N] [--only a,b] [--with net] [--idle-ms N] [--block-dev PATH]"

#define ALLOC_CAP_MB 4096L     /* mem.alloc_max: stop there so big machines finish */
#define LOCAL_ALLOC_CAP_MB 64L /* ... and in local mode, where the memory is the host's */

/*
 * The suite, in the order it runs.  Idle before alloc_max and the disk,
 * whose aftermath (reclaim, writeback) is not idle; /proc/meminfo is read
 * between the two (see FIRST_LOADED).
 */
static const struct metric_table *const suite[] = {
	&syscall_metrics,
	&ipc_latency_metrics,
	&proc_metrics,
	&ctx_metrics,
	&ipc_bandwidth_metrics,
	&fs_metrics,
	&mem_bandwidth_metrics,
	&crypto_metrics,
	&irq_metrics,
	&latency_metrics,
	&net_metrics,
	&mem_alloc_metrics,
	&blk_metrics,
	&file_metrics,
	&sysfs_metrics, /* last: its walk of /sys fills Slab with dentries */
};

#define SUITE_TABLES (sizeof(suite) / sizeof(suite[0]))
/*
 * The first table whose load leaves the memory otherwise than it found it:
 * the server's sockets, alloc_max's reclaim, the disk's and the file's page
 * cache and writeback.  /proc/meminfo is read just before it, so the memory
 * rows describe a guest at rest, the same whether net.* runs or not.
 */
#define FIRST_LOADED (&net_metrics)

static char local_workdir[] = "/tmp/kl-agent-XXXXXX";

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

/*
 * Which CPU flaws the kernel believes this CPU has, and what it does about
 * each: a mitigation that the kernel switched off on an unaffected (often
 * emulated) CPU costs nothing, and a report must say so rather than show 0%.
 * Read after the suite, so the sysfs lookups touch no measured cache.
 */
static void report_vulnerabilities(void)
{
	static const char dir_path[] = "/sys/devices/system/cpu/vulnerabilities";
	DIR *dir = opendir(dir_path);
	struct dirent *d;

	if (!dir)
		return; /* older kernels and non-x86/arm64 arches have none */
	while ((d = readdir(dir))) {
		char path[512], state[160] = "";
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir_path, d->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(state, sizeof(state), f))
			snprintf(state, sizeof(state), "unreadable");
		fclose(f);
		state[strcspn(state, "\n")] = '\0';
		emit("t=meta key=vulnerability.%s value=%s", sanitize(d->d_name), sanitize(state));
	}
	closedir(dir);
}

/* An opt-in table runs when KL_WITH names it, or when KL_ONLY picks its metrics. */
static bool table_runs(const struct metric_table *t, const struct options *o)
{
	return !t->with || o->only || (o->with && selected(o->with, t->with));
}

static void run_table(const struct metric_table *t, const struct options *o, const char *workdir)
{
	bool waited = false;

	if (!table_runs(t, o))
		return;
	for (size_t i = 0; i < t->count; i++) {
		if (!wanted(o->only, &t->metric[i]))
			continue;
		if (t->fine_timers && !waited) {
			wait_for_fine_timers(t);
			waited = true;
		}
		run_metric(&t->metric[i], o, workdir);
	}
}

static void run_suite(const struct options *o, const char *workdir)
{
	struct utsname u;
	struct timespec res;
	char block_dev[128];

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
	report_modules();
	report_file_system();
	report_unknown_names(o->only, suite, SUITE_TABLES);
	report_clocksource();
	measure_overheads();
	bool profiling = o->profile && profile_reset();

	for (size_t t = 0; t < SUITE_TABLES; t++) {
		if (suite[t] == FIRST_LOADED && selected(o->only, MEMINFO))
			report_meminfo();
		run_table(suite[t], o, workdir);
	}
	if (profiling)
		profile_report();
	run_workloads(o->workloads, workdir);
	report_vulnerabilities();

	emit("t=end records=%lu", records_emitted());
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
	if ((v = getenv("KL_WITH")) && *v)
		o->with = v;
	if ((v = getenv("KL_IDLE_MS")))
		o->idle_ms = parse_long("KL_IDLE_MS", v, MAX_IDLE_MS);
	if ((v = getenv("KL_BLOCK_DEV")) && *v)
		o->block_dev = v;
	if ((v = getenv("KL_BLOCK_MB")))
		o->block_mb = parse_long("KL_BLOCK_MB", v, MAX_BLOCK_MB);
	if ((v = getenv("KL_ALLOC_CAP_MB")))
		o->alloc_cap_mb = parse_long("KL_ALLOC_CAP_MB", v, ALLOC_CAP_MB);
	if ((v = getenv("KL_PROFILE")))
		o->profile = parse_long("KL_PROFILE", v, 1);
	if ((v = getenv("KL_WORKLOADS")) && *v && !pid1)
		o->workloads = v;
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
		else if (strcmp(opt, "--with") == 0)
			o->with = *val ? val : NULL;
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

	on_die(finish); /* before anything can die: init must not exit */
	pid1 = getpid() == 1;
	if (pid1) {
		/*
		 * Console first, so option errors are seen.  Init's argv may
		 * hold stray boot words, so options come from the environment.
		 */
		workdir = init_system();
		load_modules(); /* a prebuilt kernel's: the scratch disk's driver may be one */
		options_from_env(&o);
		if (access(WORKLOADS_PID1_FILE, R_OK) == 0)
			o.workloads = WORKLOADS_PID1_FILE;
		if (!o.block_dev)
			o.block_dev = find_scratch_disk();
		file_setup(); /* KL_FS: mounts the file system the host made */
	} else {
		o.alloc_cap_mb = LOCAL_ALLOC_CAP_MB;
		options_from_env(&o);
		options_from_argv(&o, argc, argv); /* flags override the environment */
		file_setup(); /* KL_FILE_DIR */
		workdir = mkdtemp(local_workdir);
		if (!workdir)
			die("mkdtemp %s: %s", local_workdir, strerror(errno));
		if (atexit(remove_local_workdir) != 0)
			die("atexit failed");
	}

	page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		die("sysconf(_SC_PAGESIZE): %s", strerror(errno));
	system_page_size = (size_t)page;
	/* A dead helper must fail its metric with EPIPE, not kill the agent. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die("ignoring SIGPIPE: %s", strerror(errno));

	run_suite(&o, workdir);
	finish(0);
}
