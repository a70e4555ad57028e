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
    __u64 domains; /* TALLY_TESTDRM_AMDGPU_DOMAIN_* */
    __u64 domain_flags; /* TALLY_TESTDRM_AMDGPU_CREATE_* (AMDGPU_GEM_CREATE_*) */
  } in;
  struct {
    __u32 handle;
    __u32 _pad;
  } out;
};
/* What the driver makes of in.domains, as amdgpu_gem_create_ioctl() and
 * amdgpu_bo_create() do on 7.x:
 *  - a bit outside 0x7f, or an on-chip domain (GDS, GWS, OA, DOORBELL) mixed with
 *    any other domain (amdgpu_gem_are_domains_valid(), 6.1 to 7.x): EINVAL;
 *  - VRAM in the domains: region vram (amdgpu_bo_placement_from_domain() tries
 *    VRAM first); else GTT, CPU or no domain at all: region gtt;
 *  - GDS, GWS, OA or DOORBELL alone: an object of no pages, counted in no region
 *    (on-chip resources, not memory), of size bo_size << PAGE_SHIFT for GWS/OA,
 *    ALIGN(bo_size, 4) << PAGE_SHIFT for GDS, PAGE_ALIGN(bo_size) for DOORBELL;
 *  - GDS/GWS/OA with _CREATE_VM_ALWAYS_VALID: EINVAL; _CREATE_ENCRYPTED: EINVAL
 *    (the APU played has TMZ off); a flag amdgpu may not be given: EINVAL;
 *  - more than 4 GiB: ENOMEM (amdgpu_bo_validate_size()); 0 bytes: EINVAL. */
#define TALLY_TESTDRM_AMDGPU_DOMAIN_CPU 0x1
#define TALLY_TESTDRM_AMDGPU_DOMAIN_GTT 0x2
#define TALLY_TESTDRM_AMDGPU_DOMAIN_VRAM 0x4
#define TALLY_TESTDRM_AMDGPU_DOMAIN_GDS 0x8
#define TALLY_TESTDRM_AMDGPU_DOMAIN_GWS 0x10
#define TALLY_TESTDRM_AMDGPU_DOMAIN_OA 0x20
#define TALLY_TESTDRM_AMDGPU_DOMAIN_DOORBELL 0x40
#define TALLY_TESTDRM_AMDGPU_CREATE_VM_ALWAYS_VALID (1u << 6)
#define TALLY_TESTDRM_AMDGPU_CREATE_ENCRYPTED (1u << 10)

/* With personality=amdgpu the module also makes /dev/kfd, answering KFD's
 * AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, _FREE_MEMORY_OF_GPU, _MAP_MEMORY_TO_GPU and
 * _UNMAP_MEMORY_FROM_GPU with their real structs (linux/kfd_ioctl.h), as a SOC15
 * APU's KFD decides them. Its buffers are GEM objects of the DRM device (as
 * amdgpu_bo_create's are) but on no DRM file: fdinfo never shows them, as it
 * never shows KFD memory on the real driver.
 *
 * ALLOC (kfd_ioctl_alloc_memory_of_gpu(), amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu()):
 *  - size 0: EINVAL. With _DOORBELL, size must be the process's doorbell slice
 *    (TALLY_TESTKFD_DOORBELL_SLICE); else with _MMIO_REMAP, one page: else EINVAL;
 *  - _VRAM: a buffer of pages in region vram; else _GTT: in region gtt (whatever
 *    other flag is set: VRAM|USERPTR, GTT|MMIO_REMAP... are plain buffers);
 *  - else _USERPTR: an object over the caller's own pages at mmap_offset (0:
 *    EINVAL), faulted in for writing (EFAULT where there are none): anonymous
 *    memory, charged by memcg to the caller; the driver allocates no page;
 *  - else _DOORBELL or _MMIO_REMAP: an object of no pages (an SG BO over MMIO);
 *  - else: EINVAL;
 *  - _AQL_QUEUE_MEM halves the size (the same pages are mapped twice); the size
 *    is then rounded up to pages (0: EINVAL); over 4 GiB: ENOMEM.
 * handle (out) is what FREE, MAP and UNMAP take. */
struct tally_testkfd_alloc_memory_of_gpu {
  __u64 va_addr; /* in: the GPU virtual address; MAP refuses a buffer with none */
  __u64 size;
  __u64 handle; /* out */
  __u64 mmap_offset; /* in: the user address, for _USERPTR */
  __u32 gpu_id;
  __u32 flags; /* TALLY_TESTKFD_ALLOC_* (KFD_IOC_ALLOC_MEM_FLAGS_*) */
};
/* FREE (amdgpu_amdkfd_gpuvm_free_memory_of_gpu()): EBUSY while the buffer is
 * still mapped on a device (unmap it first); EINVAL for an unknown handle. Frees
 * the buffer and its attachments. */
struct tally_testkfd_free_memory_of_gpu {
  __u64 handle;
};
/* MAP and UNMAP (kfd_ioctl_map_memory_to_gpu(), kfd_mem_attach()), on a
 * pretend box of up to 64 GPUs (MAX_GPU_INSTANCE) where devices[i] is GPU i:
 * index 0 is the buffer's own GPU, any other a peer behind its own IOMMU
 * group. The array is read (EFAULT) but its ids are not looked at. Devices
 * n_success .. n_devices-1 are mapped (n_devices 0 or n_success > n_devices:
 * EINVAL; an index from 64: EINVAL); n_success (out) counts those done. The
 * first map on a peer attaches the buffer there: a new GEM object of the
 * buffer's size over the buffer's memory (a dma-buf import, or an SG BO for a
 * userptr, doorbell or MMIO buffer), holding no page of its own; on the own GPU
 * the buffer itself serves, except an MMIO_REMAP-only buffer, which gets an SG
 * BO there too. Attachments last until FREE or the file's close. A buffer
 * allocated with va_addr 0 cannot be mapped: EINVAL. Unknown handle: ENOMEM.
 * UNMAP takes the same struct: EINVAL for a device the buffer is not mapped on. */
struct tally_testkfd_map_memory_to_gpu {
  __u64 handle;
  __u64 device_ids_array_ptr; /* in: __u32 gpu ids, n_devices of them */
  __u32 n_devices;
  __u32 n_success; /* in/out */
};
#define TALLY_TESTKFD_ALLOC_VRAM (1u << 0)
#define TALLY_TESTKFD_ALLOC_GTT (1u << 1)
#define TALLY_TESTKFD_ALLOC_USERPTR (1u << 2)
#define TALLY_TESTKFD_ALLOC_DOORBELL (1u << 3)
#define TALLY_TESTKFD_ALLOC_MMIO_REMAP (1u << 4)
#define TALLY_TESTKFD_ALLOC_AQL_QUEUE_MEM (1u << 27)
/* kfd_doorbell_process_slice(): 8-byte doorbells (SOC15) times 1024 queues. */
#define TALLY_TESTKFD_DOORBELL_SLICE 8192u
#define AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU \
  _IOWR('K', 0x16, struct tally_testkfd_alloc_memory_of_gpu)
#define AMDKFD_IOC_TALLY_FREE_MEMORY_OF_GPU \
  _IOW('K', 0x17, struct tally_testkfd_free_memory_of_gpu)
#define AMDKFD_IOC_TALLY_MAP_MEMORY_TO_GPU \
  _IOWR('K', 0x18, struct tally_testkfd_map_memory_to_gpu)
#define AMDKFD_IOC_TALLY_UNMAP_MEMORY_FROM_GPU \
  _IOWR('K', 0x19, struct tally_testkfd_map_memory_to_gpu)

/* xe's DRM_IOCTL_XE_GEM_CREATE (struct drm_xe_gem_create, uapi/drm/xe_drm.h),
 * answered only with personality=xe, on the number that is this driver's MAP
 * under every other personality (DRM ioctl numbers are per driver). Checked as
 * xe_gem_create_ioctl() does (7.x): nonzero pad, reserved, handle (in) or
 * extensions, a placement of 0 or outside system|vram0, an unknown flag, a size
 * of 0 or not a multiple of the page, cpu_caching not WB/WC, VRAM without WC,
 * SCANOUT with WB, NEEDS_VISIBLE_VRAM without VRAM: EINVAL; vm_id: ENOENT (no
 * VM here); over 4 GiB: ENOMEM. One buffer of `size`: region vram0 when the
 * placement holds vram0 (xe tries VRAM first), else gtt. */
struct tally_testdrm_xe_gem_create {
  __u64 extensions;
  __u64 size;
  __u32 placement; /* TALLY_TESTDRM_XE_PLACEMENT_* */
  __u32 flags;
  __u32 vm_id;
  __u32 handle; /* out */
  __u16 cpu_caching; /* TALLY_TESTDRM_XE_CPU_CACHING_* */
  __u16 pad[3];
  __u64 reserved[2];
};
#define TALLY_TESTDRM_XE_PLACEMENT_SYSTEM (1u << 0)
#define TALLY_TESTDRM_XE_PLACEMENT_VRAM0 (1u << 1)
#define TALLY_TESTDRM_XE_CPU_CACHING_WB 1
#define TALLY_TESTDRM_XE_CPU_CACHING_WC 2

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
/* Under every personality but xe, whose GEM_CREATE has this number. */
#define DRM_IOCTL_TALLY_TESTDRM_MAP \
  _IOW('d', 0x40 + DRM_TALLY_TESTDRM_MAP, struct tally_testdrm_map)
/* xe's DRM_XE_GEM_CREATE is 0x01 too: personality=xe answers it there. */
#define DRM_TALLY_TESTDRM_XE_GEM_CREATE 0x01
#define DRM_IOCTL_TALLY_TESTDRM_XE_GEM_CREATE \
  _IOWR('d', 0x40 + DRM_TALLY_TESTDRM_XE_GEM_CREATE, struct tally_testdrm_xe_gem_create)

#endif
