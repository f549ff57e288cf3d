/* PID-1 mode: the agent as /init of an initramfs (pid1.c). */
#ifndef KL_PID1_H
#define KL_PID1_H

/* Whether the agent is init; otherwise it runs in local mode. */
extern int pid1;

/*
 * Ends the run.  Init must never exit (the kernel would panic), so in PID-1
 * mode this powers the VM down instead.
 */
void finish(int status) __attribute__((noreturn));
/* Mounts, console and loopback for the suite; returns the work directory. */
const char *init_system(void);
/* Loads the kernel modules of the initramfs (a prebuilt kernel's), in order. */
void load_modules(void);
/* One t=meta key=module.NAME record per module: loaded, or why not. */
void report_modules(void);
/*
 * The network device of the workloads whose client is the host's: the first
 * interface that is not loopback, given QEMU user networking's guest address
 * (10.0.2.15/24) and brought up, once.  NULL when it is up, else why not
 * (no_network_device, or the request that failed and its errno).
 */
const char *bring_up_link(void);
/* PID-1 mode's scratch disk, or NULL. */
const char *find_scratch_disk(void);
/* PID-1 mode's disk holding a file system the host made (the fs: axis), or NULL. */
const char *find_file_system_disk(void);
/*
 * Whether the disk (a device node or a file) holds an ext4 file system: 0 and
 * its block size in *block, else -1.  How find_file_system_disk() knows it.
 */
int ext4_block_size(const char *dev, unsigned long *block);
/*
 * Writes text to an existing file, such as a /proc setting.  Returns 0, or
 * -1 after warning, so callers that carry on regardless may ignore it.
 */
int write_file(const char *path, const char *text);

#endif
