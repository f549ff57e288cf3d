/*
 * A stand-in /init for the host's failure paths: it prints RECORDS (framed lines passed
 * in by the test, as the agent would print them), then hangs forever (-DHANG), reboots
 * like the agent does (-DREBOOT), or exits, which makes the kernel panic ("Attempted to
 * kill init").
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
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
#ifdef REBOOT
	reboot(RB_AUTOBOOT);
#endif
	return 0;
}
