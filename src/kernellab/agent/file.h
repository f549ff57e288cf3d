/* file.*: sequential I/O on a file of a file system the host made (file.c). */
#ifndef KL_FILE_H
#define KL_FILE_H

/*
 * Reads KL_FILE_MB, then in PID-1 mode mounts the file system KL_FS names
 * (the disk find_file_system_disk() finds), in local mode takes KL_FILE_DIR.
 * Whatever fails, the file.* metrics say why.
 */
void file_setup(void);
/*
 * Where a workload that needs a disk makes its directory: in PID-1 mode the
 * mounted file system (FS_MOUNT), in local mode KL_FILE_DIR if given, else
 * workdir (the machine's own file systems).  NULL, with why in *why (a
 * record-safe word, as the file.* metrics' reasons), when there is none.
 */
const char *workload_disk_dir(const char *workdir, const char **why);
/* After t=hello: t=meta key=file_system value=TYPE,DEVICE,block_BYTES if one is mounted. */
void report_file_system(void);

#endif
