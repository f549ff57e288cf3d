/*
 * PID-1 mode: booted as /init of an initramfs, the agent sets up the
 * minimal userspace it needs (proc, sys, dev, a console, lo, a tmpfs to work
 * in; the network device for a workload whose client is the host's) and at
 * the end reboots, which ends QEMU (the host runs it with -no-reboot).
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "pid1.h"
#include "record.h"

int pid1;

void finish(int status)
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

int write_file(const char *path, const char *text)
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
 * QEMU's user networking (the host's -netdev user) forwards the host's ports
 * to this address of the guest, on its /24; the guest needs no route, as the
 * forwarded connections come from 10.0.2.2, on that network.
 */
#define LINK_ADDRESS "10.0.2.15"
#define LINK_NETMASK "255.255.255.0"

static int set_address(int fd, struct ifreq *ifr, unsigned long request, const char *address)
{
	struct sockaddr_in in = { .sin_family = AF_INET };

	inet_pton(AF_INET, address, &in.sin_addr);
	memcpy(&ifr->ifr_addr, &in, sizeof(in));
	return ioctl(fd, request, ifr);
}

/* The first interface that is not loopback into ifr (its name); false if there is none. */
static bool first_device(int fd, struct ifreq *ifr)
{
	struct if_nameindex *names = if_nameindex(), *n;
	bool found = false;

	for (n = names; n && n->if_index && !found; n++) {
		snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "%s", n->if_name);
		found = ioctl(fd, SIOCGIFFLAGS, ifr) == 0 && !(ifr->ifr_flags & IFF_LOOPBACK);
	}
	if (names)
		if_freenameindex(names);
	return found;
}

const char *bring_up_link(void)
{
	static bool done;
	static char why[64];
	struct ifreq ifr = { 0 };
	int fd;

	if (done)
		return why[0] ? why : NULL;
	done = true;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, sizeof(why), "socket_failed_errno_%d", errno);
		return why;
	}
	if (!first_device(fd, &ifr))
		snprintf(why, sizeof(why), "no_network_device");
	else if (set_address(fd, &ifr, SIOCSIFADDR, LINK_ADDRESS) < 0)
		snprintf(why, sizeof(why), "SIOCSIFADDR_failed_errno_%d", errno);
	else if (set_address(fd, &ifr, SIOCSIFNETMASK, LINK_NETMASK) < 0)
		snprintf(why, sizeof(why), "SIOCSIFNETMASK_failed_errno_%d", errno);
	else if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		snprintf(why, sizeof(why), "SIOCGIFFLAGS_failed_errno_%d", errno);
	else {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			snprintf(why, sizeof(why), "SIOCSIFFLAGS_failed_errno_%d", errno);
	}
	if (close(fd) < 0)
		warn("close: %s", strerror(errno));
	return why[0] ? why : NULL;
}

/* The ext4 superblock at byte 1024: magic 0xef53 at 56, log2(block size / 1024) at 24. */
int ext4_block_size(const char *dev, unsigned long *block)
{
	unsigned char sb[64];
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = pread(fd, sb, sizeof(sb), 1024);
	if (close(fd) < 0)
		warn("close %s: %s", dev, strerror(errno));
	if (n != (ssize_t)sizeof(sb) || sb[56] != 0x53 || sb[57] != 0xef)
		return -1;
	*block = 1024UL << (sb[24] | sb[25] << 8 | sb[26] << 16 | (unsigned long)sb[27] << 24);
	return 0;
}

static bool holds_file_system(const char *dev)
{
	unsigned long block;

	return ext4_block_size(dev, &block) == 0;
}

/*
 * PID-1 mode's disks, both virtio: the scratch disk, which the host attaches
 * for nothing else (the root file system is the initramfs), and with the fs:
 * axis a second one holding a file system the host made (file.c).  Told apart
 * by content, not name: virtio disks are named in the machine's probe order.
 * The first (by name) of the kind asked for, in buf, or NULL.
 */
static const char *find_disk(bool file_system, char *buf, size_t size)
{
	char first[NAME_MAX + 1] = "";
	DIR *dir = opendir("/sys/block");
	struct dirent *e;

	if (!dir) {
		warn("opendir /sys/block: %s", strerror(errno));
		return NULL;
	}
	errno = 0;
	while ((e = readdir(dir))) {
		if (strncmp(e->d_name, "vd", 2) != 0 || (first[0] && strcmp(e->d_name, first) >= 0))
			continue;
		snprintf(buf, size, "/dev/%s", e->d_name);
		if (holds_file_system(buf) == file_system)
			snprintf(first, sizeof(first), "%s", e->d_name);
		errno = 0;
	}
	if (errno)
		warn("readdir /sys/block: %s", strerror(errno));
	if (closedir(dir) < 0)
		warn("closedir /sys/block: %s", strerror(errno));
	if (!first[0])
		return NULL;
	snprintf(buf, size, "/dev/%s", first);
	return buf;
}

const char *find_scratch_disk(void)
{
	static char path[16 + NAME_MAX];

	return find_disk(false, path, sizeof(path));
}

const char *find_file_system_disk(void)
{
	static char path[16 + NAME_MAX];

	return find_disk(true, path, sizeof(path));
}

/*
 * PREEMPT_RT prints to the console from a kernel thread once the system runs,
 * and that thread checks the console level when it prints, not when the line
 * was logged: lowered at once, it would drop "Run /init" and our ready line.
 * A moment of idle guest time lets it catch up (a few lines; it runs while we
 * sleep).
 */
static void wait_for_console_thread(void)
{
	struct timespec moment = { .tv_sec = 0, .tv_nsec = 100 * 1000 * 1000 };
	struct utsname u;

	if (uname(&u) < 0 || !strstr(u.version, "PREEMPT_RT"))
		return;
	while (nanosleep(&moment, &moment) < 0 && errno == EINTR)
		;
}

const char *init_system(void)
{
	/* Warnings before open_console() show only if the kernel found a console for us. */
	mount_fs("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	mount_fs("sysfs", "/sys", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	mount_fs("devtmpfs", "/dev", MS_NOSUID);
	open_console();

	/* The host waits for this line, with its printk timestamp, as a boot milestone. */
	write_file("/dev/kmsg", AGENT_NAME ": ready\n");
	wait_for_console_thread();
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

/*
 * A prebuilt kernel's modules that the suite needs (AF_ALG, the virtio disk):
 * the host packs them as /kl-modules/NN-NAME.ko, decompressed, numbered so
 * that name order is load order (dependencies first).  They load before the
 * scratch disk is looked for (its driver may be one of them), which is before
 * the t=hello record: what became of each is kept for report_modules().  A
 * module that does not load is a notice, not the end of the run: the metrics
 * that need it say n/a.
 */
#define MODULES_DIR "/kl-modules"
#define MAX_MODULES 64

static struct {
	char name[64];
	char result[32];
} modules[MAX_MODULES];
static int modules_loaded;

static void load_module(const char *file)
{
	char path[sizeof(MODULES_DIR) + NAME_MAX + 1];
	const char *dash = strchr(file, '-');
	char *name = modules[modules_loaded].name, *result = modules[modules_loaded].result;
	int fd;

	snprintf(name, sizeof(modules[0].name), "%s", dash ? dash + 1 : file);
	name[strcspn(name, ".")] = '\0';
	snprintf(path, sizeof(path), MODULES_DIR "/%s", file);
	modules_loaded++;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(result, sizeof(modules[0].result), "open_failed_errno_%d", errno);
		return;
	}
	/* glibc has no finit_module() wrapper. */
	if (syscall(SYS_finit_module, fd, "", 0) == 0)
		snprintf(result, sizeof(modules[0].result), "loaded");
	else if (errno == EEXIST)
		snprintf(result, sizeof(modules[0].result), "already_loaded");
	else
		snprintf(result, sizeof(modules[0].result), "failed_errno_%d", errno);
	if (close(fd) < 0)
		warn("close %s: %s", path, strerror(errno));
}

static int module_file(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

void load_modules(void)
{
	struct dirent **files;
	int n = scandir(MODULES_DIR, &files, module_file, alphasort);

	if (n < 0) {
		if (errno != ENOENT)
			warn("scandir " MODULES_DIR ": %s", strerror(errno));
		return; /* a built kernel: what it needs is built in */
	}
	for (int i = 0; i < n; i++) {
		if (modules_loaded < MAX_MODULES)
			load_module(files[i]->d_name);
		else
			warn("more than %d modules: %s not loaded", MAX_MODULES, files[i]->d_name);
		free(files[i]);
	}
	free(files);
}

void report_modules(void)
{
	for (int i = 0; i < modules_loaded; i++)
		emit("t=meta key=module.%s value=%s", sanitize(modules[i].name), modules[i].result);
}
