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

/* The real encodings of the drivers it stands in for, so tally's in-kernel
 * charge (src/bpf/gpu_ioctl.h) decodes them as it would on the real driver.
 * amdgpu's DRM_IOCTL_AMDGPU_GEM_CREATE: union drm_amdgpu_gem_create
 * (libdrm's amdgpu_drm.h), answered under every personality. */
union tally_testdrm_amdgpu_gem_create {
  struct {
    __u64 bo_size;
    __u64 alignment;
    __u64 domains; /* AMDGPU_GEM_DOMAIN_GTT 0x2 (region gtt), _VRAM 0x4 (region vram) */
    __u64 domain_flags;
  } in;
  struct {
    __u32 handle;
    __u32 _pad;
  } out;
};
#define TALLY_TESTDRM_AMDGPU_DOMAIN_GTT 0x2
#define TALLY_TESTDRM_AMDGPU_DOMAIN_VRAM 0x4

/* With personality=amdgpu the module also makes /dev/kfd, answering KFD's
 * AMDKFD_IOC_ALLOC_MEMORY_OF_GPU and _FREE_MEMORY_OF_GPU with their real
 * structs (linux/kfd_ioctl.h). Its buffers are GEM objects of the DRM device
 * (as amdgpu_bo_create's are) but on no DRM file: fdinfo never shows them,
 * as it never shows KFD userptr memory on the real driver. */
struct tally_testkfd_alloc_memory_of_gpu {
  __u64 va_addr;
  __u64 size;
  __u64 handle; /* out */
  __u64 mmap_offset;
  __u32 gpu_id;
  __u32 flags; /* KFD_IOC_ALLOC_MEM_FLAGS_VRAM 1 << 0, _GTT 1 << 1 */
};
struct tally_testkfd_free_memory_of_gpu {
  __u64 handle;
};
#define TALLY_TESTKFD_ALLOC_VRAM (1u << 0)
#define TALLY_TESTKFD_ALLOC_GTT (1u << 1)
#define AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU \
  _IOWR('K', 0x16, struct tally_testkfd_alloc_memory_of_gpu)
#define AMDKFD_IOC_TALLY_FREE_MEMORY_OF_GPU \
  _IOW('K', 0x17, struct tally_testkfd_free_memory_of_gpu)

#define DRM_TALLY_TESTDRM_AMDGPU_GEM_CREATE 0x00
#define DRM_TALLY_TESTDRM_MAP 0x01
/* Its own create moved off 0x00, which is amdgpu's GEM_CREATE. */
#define DRM_TALLY_TESTDRM_CREATE 0x02
/* Spelled out (DRM_IOCTL_BASE 'd', DRM_COMMAND_BASE 0x40) so user space needs no
 * DRM headers. */
#define DRM_IOCTL_TALLY_TESTDRM_CREATE \
  _IOWR('d', 0x40 + DRM_TALLY_TESTDRM_CREATE, struct tally_testdrm_create)
#define DRM_IOCTL_TALLY_TESTDRM_AMDGPU_GEM_CREATE \
  _IOWR('d', 0x40 + DRM_TALLY_TESTDRM_AMDGPU_GEM_CREATE, union tally_testdrm_amdgpu_gem_create)
#define DRM_IOCTL_TALLY_TESTDRM_MAP \
  _IOW('d', 0x40 + DRM_TALLY_TESTDRM_MAP, struct tally_testdrm_map)

#endif
