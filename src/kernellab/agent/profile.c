/*
 * KL_PROFILE=1: the kernel's own tick profiler (profile=N on the kernel command
 * line, CONFIG_PROFILING).  Its counters are reset before the suite and read
 * after it, so they hold where the kernel's time went while the chosen metrics
 * ran.  /proc/profile is one unsigned int, the bucket size in bytes, then one
 * counter per bucket of kernel text from _stext.  Only the nonzero buckets are
 * sent:
 *
 *     t=prof step=4 buckets=1048576
 *     t=prof b=INDEX:COUNT,INDEX:COUNT,...   (up to PAIRS_PER_RECORD pairs)
 *     t=prof done=1 hits=TOTAL
 *
 * The host maps an index to _stext + index * step and that to a function.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile.h"
#include "record.h"

#define PROC_PROFILE "/proc/profile"
#define PAIRS_PER_RECORD 16

bool profile_reset(void)
{
	int fd = open(PROC_PROFILE, O_WRONLY | O_CLOEXEC);

	/* Any write of other than sizeof(int) bytes clears the counters. */
	if (fd < 0 || write(fd, "0", 1) != 1) {
		emit("t=na metric=profile reason=%s_errno_%d", fd < 0 ? "open" : "write", errno);
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	return true;
}

static unsigned char *read_all(const char *path, size_t *len)
{
	size_t size = 1 << 20, have = 0;
	unsigned char *buf = malloc(size);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((got = read(fd, buf + have, size - have)) > 0) {
		have += (size_t)got;
		if (have == size) {
			unsigned char *bigger = realloc(buf, size * 2);

			if (!bigger)
				break;
			buf = bigger;
			size *= 2;
		}
	}
	close(fd);
	if (got < 0) {
		free(buf);
		return NULL;
	}
	*len = have;
	return buf;
}

void profile_report(void)
{
	size_t len = 0, n;
	unsigned char *buf = read_all(PROC_PROFILE, &len);
	unsigned int step, count;
	unsigned long long hits = 0;
	char pairs[PAIRS_PER_RECORD * 24];
	int used = 0, in_record = 0;

	if (!buf || len < 2 * sizeof(unsigned int)) {
		emit("t=na metric=profile reason=read_errno_%d", errno);
		free(buf);
		return;
	}
	memcpy(&step, buf, sizeof(step));
	n = len / sizeof(unsigned int) - 1;
	emit("t=prof step=%u buckets=%zu", step, n);
	for (size_t i = 0; i < n; i++) {
		memcpy(&count, buf + (i + 1) * sizeof(unsigned int), sizeof(count));
		if (!count)
			continue;
		hits += count;
		used += snprintf(pairs + used, sizeof(pairs) - (size_t)used, "%s%zu:%u",
				 in_record ? "," : "", i, count);
		if (++in_record == PAIRS_PER_RECORD) {
			emit("t=prof b=%s", pairs);
			used = in_record = 0;
		}
	}
	if (in_record)
		emit("t=prof b=%s", pairs);
	emit("t=prof done=1 hits=%llu", hits);
	free(buf);
}
