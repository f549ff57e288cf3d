/*
 * A stand-in /init for failure tests: it reports one framed sample, as the agent would,
 * then either hangs forever (-DHANG) or exits, which makes the kernel panic
 * ("Attempted to kill init").  RECORDS is the framed lines, passed in by the test.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	mkdir("/dev", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	int fd = open("/dev/console", O_RDWR);
	if (fd >= 0)
		dup2(fd, 1);
	const char records[] = RECORDS;
	if (write(1, records, strlen(records)) < 0)
		return 1;
#ifdef HANG
	for (;;)
		pause();
#endif
	return 0;
}
