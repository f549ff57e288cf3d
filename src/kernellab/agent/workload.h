/*
 * Workloads: real programs (fio, a user's own binary) the host asks for,
 * run after the suite's tables (workload.c).
 */
#ifndef KL_WORKLOAD_H
#define KL_WORKLOAD_H

/* Where the host puts the workloads in the initramfs (PID-1 mode). */
#define WORKLOADS_PID1_FILE "/kernellab/workloads"

/*
 * Runs each workload the file at path describes (NULL: none asked for),
 * in a directory of its own under workdir (one that needs a disk: under
 * file.c's workload_disk_dir(workdir), or not at all, saying why; one
 * whose client is the host's: its server alone, once the host can reach it,
 * or not at all, saying why), and frames its output into
 * t=wl_begin, t=wl_out and t=wl_end records.  A workload that fails (does
 * not start, exits non-zero, outlives its timeout) is reported as such
 * and the next one runs.
 */
void run_workloads(const char *path, const char *workdir);

#endif
