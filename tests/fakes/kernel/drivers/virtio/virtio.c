// SPDX-License-Identifier: GPL-2.0
#include <linux/compiler.h>
#include <linux/list.h>
#include <linux/spinlock.h>

FAKE_RODATA_KB(virtio_ring, 4);
#ifdef CONFIG_VIRTIO_BLK
FAKE_RODATA_KB(virtio_blk, 2);
#endif
