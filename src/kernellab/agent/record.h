/*
 * What the agent prints: framed records on stdout (the format is described
 * at the top of main.c; the host's parser is kernellab/guest/records.py)
 * and warnings on stderr.
 */
#ifndef KL_RECORD_H
#define KL_RECORD_H

#include <sys/types.h>

#define AGENT_NAME "kernellab-agent"
/*
 * The t=hello record's v.  The host refuses an agent whose version is not
 * its kernellab.agent.RECORD_VERSION, so change both together, whenever a
 * record's fields or their meaning change (a test keeps the two equal).
 */
#define RECORD_VERSION 1

/*
 * Every agent source defines _GNU_SOURCE and _FILE_OFFSET_BITS 64 before
 * its first include: 32-bit targets need 64-bit offsets for disks over
 * 2 GiB, and the files must agree on the system calls that implies.
 */
_Static_assert(sizeof(off_t) == 8, "define _FILE_OFFSET_BITS 64 before any #include");

/* Prints one record, "seq=N " and the payload fmt makes, framed and checksummed. */
void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The records printed so far, which is the next record's seq. */
unsigned long records_emitted(void);
/* Makes s usable as a record value: no spaces, no '#', printable ASCII. */
char *sanitize(char *s);

void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Warns and ends the run: by the function on_die() registered, else exit(). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/*
 * How die() ends the run.  main() registers finish() (pid1.c) before anything
 * can die, so that init powers the VM down rather than exit; record.c, which
 * every file uses, calls no other file of the agent.  end must not return.
 */
void on_die(void (*end)(int status));

#endif
