/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * User-space interface of tally's test DRM driver (see docs/vm-harness.md).
 *
 * The driver exists only so that tests inside the VM harness can make the kernel's
 * own DRM core print real `drm-total-<region>` / `drm-resident-<region>` fdinfo
 * lines, with the region names (and drm-driver name) of the driver it plays, and
 * choose whether the backing pages are charged to the allocating task's memory
 * cgroup.
 */
#ifndef TALLY_TESTDRM_UAPI_H
#define TALLY_TESTDRM_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* Region 0 is where GTT-like memory lives (gtt; xe gtt; i915 system0; v3d memory),
 * region 1 the device-memory one (vram; xe vram0; i915 local0; v3d has none). */
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

/* Map a buffer into the client's (pretend) GPU address space. With the module
 * parameter count_unmapped=0 a buffer shows in fdinfo only once mapped, as amdgpu's
 * did before its runtime-stats rework (a BO on no VM list is not counted). */
struct tally_testdrm_map {
  __u32 handle; /* in: GEM handle */
  __u32 pad;
};

#define DRM_TALLY_TESTDRM_CREATE 0x00
#define DRM_TALLY_TESTDRM_MAP 0x01
/* Spelled out (DRM_IOCTL_BASE 'd', DRM_COMMAND_BASE 0x40) so user space needs no
 * DRM headers. */
#define DRM_IOCTL_TALLY_TESTDRM_CREATE \
  _IOWR('d', 0x40 + DRM_TALLY_TESTDRM_CREATE, struct tally_testdrm_create)
#define DRM_IOCTL_TALLY_TESTDRM_MAP \
  _IOW('d', 0x40 + DRM_TALLY_TESTDRM_MAP, struct tally_testdrm_map)

#endif
