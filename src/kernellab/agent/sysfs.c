/*
 * sysfs.entries and sysfs.bus_devices: how big the device model's tree is,
 * the figure that grows with every device a machine has (each one a
 * directory of attributes under /sys/devices, and links under /sys/bus and
 * /sys/class).  main.c runs these after /proc/meminfo is reported: opening
 * the directories of the walk brings their dentries and inodes into the
 * caches, which would show in Slab.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: see record.h */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define SYSFS "/sys"
#define MAX_DEPTH 64 /* sysfs is about 20 deep; a loop would be a kernel bug */

static bool is_dot(const char *name)
{
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

/*
 * The entries under the directory fd (which it closes), recursively: every
 * name readdir gives, except . and ..; symbolic links are counted, never
 * followed.  readdir's d_type says which are directories, so nothing is
 * stat()ed: only the directories get dentries.  Returns the count, or -errno.
 */
static long count_entries(struct run *r, int fd, int depth)
{
	DIR *dir = fdopendir(fd);
	struct dirent *d;
	long total = 0;

	if (!dir) {
		int err = fail(r, "fdopendir");

		close(fd);
		return err;
	}
	for (errno = 0; (d = readdir(dir)); errno = 0) {
		int sub;
		long below;

		if (is_dot(d->d_name))
			continue;
		total++;
		if (d->d_type != DT_DIR)
			continue;
		if (depth >= MAX_DEPTH) {
			closedir(dir);
			return fail_because(r, "sysfs_deeper_than_64");
		}
		sub = openat(dirfd(dir), d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			if (errno == ENOENT) /* gone since readdir: a device went away */
				continue;
			below = fail(r, "openat");
			closedir(dir);
			return below;
		}
		below = count_entries(r, sub, depth + 1);
		if (below < 0) {
			closedir(dir);
			return below;
		}
		total += below;
	}
	if (errno) {
		total = fail(r, "readdir");
		closedir(dir);
		return total;
	}
	if (closedir(dir) < 0)
		return fail(r, "closedir");
	return total;
}

/* The devices of every bus: the entries of /sys/bus/NAME/devices/. */
static long count_bus_devices(struct run *r)
{
	DIR *buses = opendir(SYSFS "/bus");
	struct dirent *d;
	long total = 0;

	if (!buses)
		return fail(r, "opendir_sys_bus");
	for (errno = 0; (d = readdir(buses)); errno = 0) {
		char path[300];
		DIR *devices;
		struct dirent *e;

		if (is_dot(d->d_name))
			continue;
		snprintf(path, sizeof(path), SYSFS "/bus/%s/devices", d->d_name);
		devices = opendir(path);
		if (!devices)
			continue; /* a bus without a devices directory */
		while ((e = readdir(devices)))
			total += !is_dot(e->d_name);
		closedir(devices);
	}
	if (errno)
		total = fail(r, "readdir");
	closedir(buses);
	return total;
}

/*
 * sysfs.entries: the entries under /sys, walked once (a count does not
 * vary); its twin sysfs.bus_devices: the devices all buses have, which says
 * how many devices the kernel registered for the machine's (one virtio-ccw
 * device is a css subchannel, a ccw device and a virtio device).
 */
static int run_sysfs(struct run *r, unsigned long iters)
{
	int fd = open(SYSFS, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long entries, devices;

	(void)iters;
	if (fd < 0)
		return fail(r, "open_sys");
	entries = count_entries(r, fd, 0);
	if (entries < 0)
		return (int)entries;
	if (entries == 0)
		return fail_because(r, "sysfs_not_mounted");
	devices = count_bus_devices(r);
	if (devices < 0)
		return (int)devices;
	r->value = (double)entries;
	r->twin_value = (double)devices;
	return 0;
}

static const struct metric metrics[] = {
	{ .name = "sysfs.entries", .twin = "sysfs.bus_devices", .kind = REPORTED, .unit = "count",
	  .max_repeats = 1, .run = run_sysfs },
};

const struct metric_table sysfs_metrics = METRIC_TABLE(metrics);
