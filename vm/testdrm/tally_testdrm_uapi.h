/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * User-space interface of tally's test DRM driver (see docs/vm-harness.md).
 *
 * The driver exists only so that tests inside the VM harness can make the kernel's
 * own DRM core print real `drm-total-<region>` / `drm-resident-<region>` fdinfo
 * lines, for regions named "gtt" and "vram" as amdgpu does, and choose whether the
 * backing pages are charged to the allocating task's memory cgroup.
 */
#ifndef TALLY_TESTDRM_UAPI_H
#define TALLY_TESTDRM_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define TALLY_TESTDRM_REGION_GTT 0u
#define TALLY_TESTDRM_REGION_VRAM 1u

/* Create a buffer object of `size` bytes (rounded up to pages) in `region`.
 * All pages are allocated at once, so the object is resident from birth.
 * Returns a GEM handle; release it with DRM_IOCTL_GEM_CLOSE or by closing the fd. */
struct tally_testdrm_create {
  __u64 size;   /* in: bytes */
  __u32 region; /* in: TALLY_TESTDRM_REGION_* */
  __u32 handle; /* out: GEM handle */
};

#define DRM_TALLY_TESTDRM_CREATE 0x00
/* Spelled out (DRM_IOCTL_BASE 'd', DRM_COMMAND_BASE 0x40) so user space needs no
 * DRM headers. */
#define DRM_IOCTL_TALLY_TESTDRM_CREATE \
  _IOWR('d', 0x40 + DRM_TALLY_TESTDRM_CREATE, struct tally_testdrm_create)

#endif
