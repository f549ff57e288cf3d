/*
 * irq.*: interrupts per second while the agent sleeps, on the timer lines
 * and on all lines of /proc/interrupts.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "record.h"

struct irq_counts {
	unsigned long long timer, total;
};

/*
 * Which /proc/interrupts lines are timer ticks, by name (first column) or
 * description: x86 LOC is the local APIC timer and IRQ 0 "timer" the
 * PIT/HPET; arm64 has arch_timer; s390 CLK is the clock comparator; powerpc
 * LOC is the decrementer; some platforms name theirs "timer" or TMR.  Other
 * lines describing themselves as timers (e.g. Hyper-V stimer) count too.
 */
static bool is_timer_line(const char *name, const char *description)
{
	static const char *const names[] = { "LOC", "timer", "arch_timer", "CLK", "TMR" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return strstr(description, "timer") != NULL;
}

static int count_words(const char *s)
{
	int n = 0;

	for (bool in_word = false; *s; s++) {
		bool space = isspace((unsigned char)*s);

		n += !space && !in_word;
		in_word = !space;
	}
	return n;
}

/*
 * Sums /proc/interrupts over all CPUs: every line into total, timer lines
 * into timer.  If names is not NULL, lists the timer lines there.
 */
static int read_interrupts(struct run *r, struct irq_counts *sum, char *names, size_t names_len)
{
	FILE *f = fopen("/proc/interrupts", "re");
	char *line = NULL;
	size_t cap = 0;
	int cpus, err = 0;

	if (!f)
		return fail(r, "open");
	*sum = (struct irq_counts){ 0, 0 };
	errno = 0;
	if (getline(&line, &cap, f) < 0) {
		err = fail(r, "read");
		goto out;
	}
	cpus = count_words(line); /* the header: CPU0 CPU1 ... */
	while (getline(&line, &cap, f) >= 0) {
		char *colon = strchr(line, ':'), *name = line, *p;
		unsigned long long count = 0;

		if (!colon)
			continue;
		*colon = '\0';
		while (isspace((unsigned char)*name))
			name++;
		/* One count per CPU; ERR and MIS have a single one. */
		p = colon + 1;
		for (int cpu = 0; cpu < cpus; cpu++) {
			char *end;
			unsigned long long n = strtoull(p, &end, 10);

			if (end == p)
				break;
			count += n;
			p = end;
		}
		sum->total += count;
		if (!is_timer_line(name, p))
			continue;
		sum->timer += count;
		if (names && strlen(names) + strlen(name) + 2 <= names_len) {
			if (names[0])
				strcat(names, ",");
			strcat(names, name);
		}
	}
	if (ferror(f))
		err = fail(r, "read");
out:
	free(line);
	if (fclose(f) != 0 && !err)
		err = fail(r, "close");
	return err;
}

/* irq.*: says which lines are counted as timers, in a t=meta record. */
static int describe_timer_irqs(struct run *r)
{
	struct irq_counts sum;
	char names[128] = "";
	int err = read_interrupts(r, &sum, names, sizeof(names));

	if (!err)
		emit("t=meta key=irq_timer_lines value=%s", names[0] ? sanitize(names) : "none");
	return err;
}

/*
 * irq.idle_timer and its twin irq.idle_total, in irq/s: interrupts while
 * the agent sleeps KL_IDLE_MS, on the timer lines and on all lines.  Both
 * come from the same two snapshots, so timer never exceeds total.  Each
 * sample is one idle window, so at most SLOW_REPEATS of them.
 */
static int run_idle_irqs(struct run *r, unsigned long iters)
{
	struct timespec idle = { .tv_sec = r->opt->idle_ms / 1000,
				 .tv_nsec = r->opt->idle_ms % 1000 * 1000000 };
	struct irq_counts before, after;
	int64_t t0, ns;
	int err;

	(void)iters;
	err = read_interrupts(r, &before, NULL, 0);
	if (err)
		return err;
	t0 = now_ns();
	while ((err = clock_nanosleep(CLOCK_MONOTONIC, 0, &idle, &idle)) == EINTR)
		;
	if (err) {
		errno = err;
		return fail(r, "clock_nanosleep");
	}
	ns = now_ns() - t0;
	err = read_interrupts(r, &after, NULL, 0);
	if (err)
		return err;
	r->value = (double)(after.timer - before.timer) * 1e9 / (double)ns;
	r->twin_value = (double)(after.total - before.total) * 1e9 / (double)ns;
	return 0;
}

static const struct metric metrics[] = {
	{ .name = "irq.idle_timer", .twin = "irq.idle_total", .kind = REPORTED, .unit = "irq/s",
	  .max_repeats = SLOW_REPEATS, .setup = describe_timer_irqs, .run = run_idle_irqs },
};

const struct metric_table irq_metrics = METRIC_TABLE(metrics);
