/*
 * Record framing, the counterpart of the host's parser
 * (kernellab/guest/records.py):
 *
 *     @KL seq=N t=TYPE key=value ... #crc32
 *
 * where crc32 (zlib's) covers the payload between "@KL " and " #", and seq
 * counts the records from 0 so the host notices a lost one.  Also the
 * agent's warnings and fatal errors, on stderr.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record.h"

static unsigned long next_seq;
static void (*die_end)(int status);   /* on_die()'s; NULL: exit */

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

void warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("", fmt, ap);
	va_end(ap);
}

void on_die(void (*end)(int status))
{
	die_end = end;
}

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("fatal: ", fmt, ap);
	va_end(ap);
	if (die_end)
		die_end(1);
	exit(1);
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
void emit(const char *fmt, ...)
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

unsigned long records_emitted(void)
{
	return next_seq;
}

char *sanitize(char *s)
{
	for (char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._+-/,", *p))
			*p = '_';
	return s;
}
