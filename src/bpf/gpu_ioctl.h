/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The GPU allocation ioctls tally decodes, from their real encodings (the
 * uapi headers: libdrm's amdgpu_drm.h, linux/kfd_ioctl.h, the kernel's
 * xe_drm.h, vm/testdrm's own). Pure C over the ioctl's argument bytes: the
 * BPF program runs it in the kernel, the unit tests and the fuzzer run it
 * here. Anything not recognised is TALLY_IOCTL_PASS: never refused. Each rule
 * names the kernel function it mirrors and follows that function's order and
 * arithmetic (tests/unit/bpf/gpu_ioctl_test.cpp checks them against the
 * uapi headers and the kernel's own cases).
 */
#ifndef TALLY_BPF_GPU_IOCTL_H
#define TALLY_BPF_GPU_IOCTL_H

#include <linux/types.h>

#include "bpf/gpu_charge_abi.h"

/* _IOC as asm-generic/ioctl.h encodes it: dir:2 size:14 type:8 nr:8. */
#define TALLY_IOC(dir, type, nr, size) (((dir) << 30) | ((size) << 16) | ((type) << 8) | (nr))
#define TALLY_IOC_WRITE 1u
#define TALLY_IOC_READ 2u
#define TALLY_IOWR(type, nr, size) TALLY_IOC(TALLY_IOC_READ | TALLY_IOC_WRITE, type, nr, size)
#define TALLY_IOC_NR(cmd) ((cmd)&0xffu)
#define TALLY_IOC_SIZE(cmd) (((cmd) >> 16) & 0x3fffu)
#define TALLY_IOC_IN (TALLY_IOC_WRITE << 30) /* the caller passes the struct in */

/* DRM: DRM_IOCTL_BASE 'd', DRM_COMMAND_BASE 0x40. */
#define TALLY_DRM_IOWR(nr, size) TALLY_IOWR(0x64u, nr, size)
/* union drm_amdgpu_gem_create: in { u64 bo_size, alignment, domains, domain_flags } */
#define TALLY_AMDGPU_GEM_CREATE TALLY_DRM_IOWR(0x40u + 0x00u, 32u)
/* struct drm_amdgpu_gem_userptr { u64 addr, size; u32 flags, handle } */
#define TALLY_AMDGPU_GEM_USERPTR TALLY_DRM_IOWR(0x40u + 0x11u, 24u)
#define TALLY_AMDGPU_DOMAIN_CPU 0x1u
#define TALLY_AMDGPU_DOMAIN_GTT 0x2u
#define TALLY_AMDGPU_DOMAIN_VRAM 0x4u
#define TALLY_AMDGPU_DOMAIN_GDS 0x8u
#define TALLY_AMDGPU_DOMAIN_GWS 0x10u
#define TALLY_AMDGPU_DOMAIN_OA 0x20u
#define TALLY_AMDGPU_DOMAIN_DOORBELL \
  0x40u /* 6.6: in AMDGPU_GEM_DOMAIN_MASK, refused by GEM_CREATE */
#define TALLY_AMDGPU_DOMAINS_MEMORY \
  (TALLY_AMDGPU_DOMAIN_CPU | TALLY_AMDGPU_DOMAIN_GTT | TALLY_AMDGPU_DOMAIN_VRAM)
/* AMDGPU_GEM_DOMAIN_MASK of 6.6 and later (6.1's lacks DOORBELL, which the
 * later kernels refuse in GEM_CREATE anyway: the same buffers are made). */
#define TALLY_AMDGPU_DOMAIN_MASK 0x7full
/* in.domain_flags: AMDGPU_GEM_CREATE_VM_ALWAYS_VALID */
#define TALLY_AMDGPU_CREATE_VM_ALWAYS_VALID (1u << 6)
/* struct drm_xe_gem_create { u64 extensions, size; u32 placement, flags, vm_id,
 * handle; u16 cpu_caching, pad[3]; u64 reserved[2] } */
#define TALLY_XE_GEM_CREATE TALLY_DRM_IOWR(0x40u + 0x01u, 56u)
/* struct drm_prime_handle { u32 handle, flags; s32 fd }: an import makes a
 * second object for memory another object already holds. */
#define TALLY_DRM_PRIME_FD_TO_HANDLE TALLY_DRM_IOWR(0x2eu, 12u)
/* struct drm_mode_create_dumb { u32 height, width, bpp, flags, handle, pitch;
 * u64 size }: a dumb (scan-out) buffer, on a card node to any client. */
#define TALLY_DRM_MODE_CREATE_DUMB TALLY_DRM_IOWR(0xb2u, 32u)
/* vm/testdrm: struct tally_testdrm_create { u64 size; u32 region, handle } */
#define TALLY_TESTDRM_CREATE TALLY_DRM_IOWR(0x40u + 0x02u, 16u)
/* KFD: AMDKFD_IOCTL_BASE 'K'. struct kfd_ioctl_alloc_memory_of_gpu_args
 * { u64 va_addr, size, handle, mmap_offset; u32 gpu_id, flags } */
#define TALLY_KFD_ALLOC_MEMORY_OF_GPU TALLY_IOWR(0x4bu, 0x16u, 40u)
/* struct kfd_ioctl_import_dmabuf_args { u64 va_addr, handle; u32 gpu_id, dmabuf_fd } */
#define TALLY_KFD_IMPORT_DMABUF TALLY_IOWR(0x4bu, 0x1du, 24u)
/* struct kfd_ioctl_map_memory_to_gpu_args { u64 handle, device_ids_array_ptr; u32 n_devices,
 * n_success }: kfd_mem_attach() gives each further GPU its own BO over the
 * same memory (a dma-buf import or an SG BO): objects, not more memory. */
#define TALLY_KFD_MAP_MEMORY_TO_GPU TALLY_IOWR(0x4bu, 0x18u, 24u)
#define TALLY_KFD_ALLOC_VRAM (1u << 0)
#define TALLY_KFD_ALLOC_GTT (1u << 1)
#define TALLY_KFD_ALLOC_USERPTR (1u << 2)
#define TALLY_KFD_ALLOC_DOORBELL (1u << 3)
#define TALLY_KFD_ALLOC_MMIO_REMAP (1u << 4)
#define TALLY_KFD_ALLOC_AQL_QUEUE_MEM (1u << 27) /* one BO of half the size, mapped twice */

/* The largest argument decoded: what the program copies from user space. */
#define TALLY_IOCTL_MAX_ARG 56u

enum tally_ioctl_op {
  TALLY_IOCTL_PASS = 0,        /* not an allocation tally knows, or one the driver refuses
                                  before it makes anything: passes, charges as it comes */
  TALLY_IOCTL_ALLOC = 1,       /* creates `bytes` of memory the lease is charged for */
  TALLY_IOCTL_UNCOUNTED = 2,   /* creates objects over memory already counted elsewhere
                                  (an import, a userptr: anonymous pages memcg charges, a
                                  KFD attachment on a further GPU) or that are not memory
                                  (GDS, GWS, OA, doorbells): not charged */
  TALLY_IOCTL_UNREADABLE = 3,  /* an allocation whose argument could not be read here
                                  (the driver's own copy may still succeed) */
  TALLY_IOCTL_UNDECODABLE = 4, /* an allocation whose size wraps in the driver's own
                                  arithmetic: what it would make cannot be predicted */
};

/* How the drivers read a command (drm_ioctl() in drm_ioctl.c, kfd_ioctl() in
 * kfd_chardev.c, 6.1 to 7.x): by its number. Neither checks the direction or
 * the size against its own definition: the argument is the caller's first
 * _IOC_SIZE(cmd) bytes (DRM: only when the command says IOC_IN; KFD: always),
 * zero-filled to the driver's struct. DRM refuses a type byte other than
 * 'd' (-ENOTTY); KFD takes any. So GEM_CREATE with a struct of its size
 * field alone creates the same buffer as the full one: the decoder keys on
 * the number (and DRM's type) and reads the argument as the driver will. */
#define TALLY_IOC_TYPE(cmd) (((cmd) >> 8) & 0xffu)

/* Whether any device kind may decode a command with `cmd`'s number: the
 * hook's first test, on every ioctl on the box, before it reads the file. */
static inline int tally_ioctl_decodable(__u32 cmd) {
  switch (TALLY_IOC_NR(cmd)) {
    case TALLY_IOC_NR(TALLY_DRM_PRIME_FD_TO_HANDLE):
    case TALLY_IOC_NR(TALLY_DRM_MODE_CREATE_DUMB):
    case TALLY_IOC_NR(TALLY_AMDGPU_GEM_CREATE):
    case TALLY_IOC_NR(TALLY_AMDGPU_GEM_USERPTR):
    case TALLY_IOC_NR(TALLY_XE_GEM_CREATE):
    case TALLY_IOC_NR(TALLY_TESTDRM_CREATE):
    case TALLY_IOC_NR(TALLY_KFD_ALLOC_MEMORY_OF_GPU):
    case TALLY_IOC_NR(TALLY_KFD_IMPORT_DMABUF):
    case TALLY_IOC_NR(TALLY_KFD_MAP_MEMORY_TO_GPU):
      return 1;
    default:
      return 0;
  }
}

/* Whether `cmd` is, to a device of `kind`, the command `real`. */
static inline int tally_ioctl_is(__u32 kind, __u32 cmd, __u32 real) {
  if (TALLY_IOC_NR(cmd) != TALLY_IOC_NR(real)) return 0;
  return kind == TALLY_DEVICE_KFD || TALLY_IOC_TYPE(cmd) == TALLY_IOC_TYPE(real);
}

/* The driver's struct for an allocation `cmd` on a device of `kind` (0:
 * not an allocation it decodes). */
static inline __u32 tally_ioctl_arg_size(__u32 kind, __u32 cmd) {
  if (kind != TALLY_DEVICE_KFD && tally_ioctl_is(kind, cmd, TALLY_DRM_MODE_CREATE_DUMB)) return 32u;
  switch (kind) {
    case TALLY_DEVICE_AMDGPU:
      return tally_ioctl_is(kind, cmd, TALLY_AMDGPU_GEM_CREATE) ? 32u : 0u;
    case TALLY_DEVICE_XE:
      return tally_ioctl_is(kind, cmd, TALLY_XE_GEM_CREATE) ? 56u : 0u;
    case TALLY_DEVICE_TESTDRM:
      return tally_ioctl_is(kind, cmd, TALLY_TESTDRM_CREATE) ? 16u : 0u;
    case TALLY_DEVICE_KFD:
      return tally_ioctl_is(kind, cmd, TALLY_KFD_ALLOC_MEMORY_OF_GPU) ? 40u : 0u;
    default:
      return 0u;
  }
}

/* How many of that struct's bytes the driver copies from the caller; the
 * rest it zero-fills. */
static inline __u32 tally_ioctl_user_bytes(__u32 kind, __u32 cmd) {
  __u32 need = tally_ioctl_arg_size(kind, cmd);
  __u32 given = TALLY_IOC_SIZE(cmd);
  if (kind != TALLY_DEVICE_KFD && !(cmd & TALLY_IOC_IN)) given = 0u;
  return given < need ? given : need;
}

static inline __u64 tally_le64(const __u8* p) {
  __u64 v = 0;
  for (int i = 7; i >= 0; i--) {
    __u64 b = p[i];
    v = (v << 8) | b;
  }
  return v;
}

static inline __u32 tally_le32(const __u8* p) {
  __u32 v = 0;
  for (int i = 3; i >= 0; i--) {
    __u32 b = p[i];
    v = (v << 8) | b;
  }
  return v;
}

#define TALLY_PAGE_SHIFT 12
#define TALLY_PAGE_ALIGN(n) (((n) + 4095ull) & ~4095ull)
/* Whether aligning `n` up to a page wraps (the drivers' ALIGN() would make 0). */
#define TALLY_PAGE_ALIGN_WRAPS(n) ((n) > ~0ull - 4095ull)

/* amdgpu's DRM_IOCTL_AMDGPU_GEM_CREATE as the kernel decides it.
 * amdgpu_gem_create_ioctl() refuses domains outside AMDGPU_GEM_DOMAIN_MASK
 * and GDS/GWS/OA with VM_ALWAYS_VALID (-EINVAL, nothing made). Then
 * amdgpu_bo_create() sizes the object it initialises: with GWS or OA among
 * the domains `size << PAGE_SHIFT` (they count in units, not bytes), else
 * with GDS `ALIGN(size, 4) << PAGE_SHIFT`, else `ALIGN(size, PAGE_SIZE)`.
 * An on-chip domain (GDS, GWS, OA, doorbell) alone is not memory. Mixed
 * with a memory domain (CPU, GTT, VRAM), amdgpu_gem_are_domains_valid()
 * refuses it on kernels that have it (Debian's 6.1.192, 6.12.117 and 7.3
 * do; 6.12 also refuses any doorbell domain), but a kernel without it makes
 * a buffer of the shifted size in memory: the decoder predicts that size, so
 * the bound holds on both (a refused mix is reserved and given back). No
 * domain at all is system memory (amdgpu_bo_placement_from_domain()). */
static inline enum tally_ioctl_op tally_amdgpu_gem_create(const __u8* arg, __u64* bytes) {
  __u64 size = tally_le64(arg);
  __u64 domains = tally_le64(arg + 16);
  __u64 flags = tally_le64(arg + 24);
  const __u64 onChip = TALLY_AMDGPU_DOMAIN_GDS | TALLY_AMDGPU_DOMAIN_GWS | TALLY_AMDGPU_DOMAIN_OA;
  if (domains & ~TALLY_AMDGPU_DOMAIN_MASK) return TALLY_IOCTL_PASS;
  if ((domains & onChip) && (flags & TALLY_AMDGPU_CREATE_VM_ALWAYS_VALID)) return TALLY_IOCTL_PASS;
  if ((domains & (onChip | TALLY_AMDGPU_DOMAIN_DOORBELL)) &&
      !(domains & TALLY_AMDGPU_DOMAINS_MEMORY))
    return TALLY_IOCTL_UNCOUNTED;
  if (domains & (TALLY_AMDGPU_DOMAIN_GWS | TALLY_AMDGPU_DOMAIN_OA)) {
    if (size >> (64 - TALLY_PAGE_SHIFT)) return TALLY_IOCTL_UNDECODABLE;
    *bytes = size << TALLY_PAGE_SHIFT;
  } else if (domains & TALLY_AMDGPU_DOMAIN_GDS) {
    if (size > ~0ull - 3ull) return TALLY_IOCTL_UNDECODABLE;
    __u64 units = (size + 3ull) & ~3ull;
    if (units >> (64 - TALLY_PAGE_SHIFT)) return TALLY_IOCTL_UNDECODABLE;
    *bytes = units << TALLY_PAGE_SHIFT;
  } else {
    if (TALLY_PAGE_ALIGN_WRAPS(size)) return TALLY_IOCTL_UNDECODABLE;
    *bytes = TALLY_PAGE_ALIGN(size);
  }
  return TALLY_IOCTL_ALLOC;
}

/* KFD's AMDKFD_IOC_ALLOC_MEMORY_OF_GPU as the kernel decides it.
 * kfd_ioctl_alloc_memory_of_gpu() refuses a size of 0. Then
 * amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu() tests the VRAM flag, then GTT,
 * and only in its else branch USERPTR, DOORBELL and MMIO_REMAP; so
 * GTT|USERPTR (or VRAM|DOORBELL, ...) is a plain buffer (on an APU a VRAM one
 * lands in GTT: memory either way). Its size: halved for AQL queue memory
 * (one BO mapped twice), then PAGE_ALIGN. A userptr is anonymous memory memcg
 * charges; a doorbell slice or an MMIO remap page is not memory. No flag of
 * these: the kernel refuses it. */
static inline enum tally_ioctl_op tally_kfd_alloc_memory_of_gpu(const __u8* arg, __u64* bytes) {
  __u64 size = tally_le64(arg + 8);
  __u32 flags = tally_le32(arg + 36);
  if (size == 0) return TALLY_IOCTL_PASS;
  if (flags & (TALLY_KFD_ALLOC_VRAM | TALLY_KFD_ALLOC_GTT)) {
    if (flags & TALLY_KFD_ALLOC_AQL_QUEUE_MEM) size >>= 1;
    if (TALLY_PAGE_ALIGN_WRAPS(size)) return TALLY_IOCTL_UNDECODABLE;
    *bytes = TALLY_PAGE_ALIGN(size);
    return *bytes ? TALLY_IOCTL_ALLOC : TALLY_IOCTL_PASS; /* 6.12: a 0 aligned size is refused */
  }
  if (flags & (TALLY_KFD_ALLOC_USERPTR | TALLY_KFD_ALLOC_DOORBELL | TALLY_KFD_ALLOC_MMIO_REMAP))
    return TALLY_IOCTL_UNCOUNTED;
  return TALLY_IOCTL_PASS;
}

/* DRM_IOCTL_MODE_CREATE_DUMB: drm_mode_create_dumb()'s own checks first
 * (what it refuses passes: the driver says why); then the most any driver
 * makes of it. Drivers pad the pitch: amdgpu_gem_align_pitch() (and radeon's)
 * aligns the width to 256, 128 or 64 pixels by bytes per pixel, nouveau the
 * pitch to 256 bytes, xe (drm_mode_size_dumb()) to 64 bytes and the size to
 * 64 KiB pages. So width 1 at 8 bpp by 16 Mi rows is 16 MiB of pixels and a
 * 4 GiB amdgpu buffer. The reservation is the width aligned to 256 pixels or
 * the pitch to 256 bytes, whichever is larger, by the height, to 64 KiB: the
 * largest of them. What the driver did not make goes back at the ioctl's
 * end; a lease near its bound may be refused a dumb buffer that would just
 * have fit (failing closed, never open). */
static inline enum tally_ioctl_op tally_drm_mode_create_dumb(const __u8* arg, __u64* bytes) {
  __u32 height = tally_le32(arg), width = tally_le32(arg + 4), bpp = tally_le32(arg + 8);
  if (!height || !width || !bpp || bpp > 0xffffffffu - 8u) return TALLY_IOCTL_PASS;
  __u32 cpp = (bpp + 7u) / 8u;
  if (cpp > 0xffffffffu / width) return TALLY_IOCTL_PASS;
  __u32 stride = cpp * width;
  if (height > 0xffffffffu / stride) return TALLY_IOCTL_PASS;
  /* Bounded: cpp * height <= stride * height < 2^32, so the product < 2^41. */
  __u64 wide = width, row = stride;
  __u64 byPixels = ((wide + 255u) & ~255ull) * cpp;
  __u64 byBytes = (row + 255u) & ~255ull;
  __u64 pitch = byPixels > byBytes ? byPixels : byBytes;
  __u64 size = pitch * height;
  *bytes = (size + 65535ull) & ~65535ull;
  return TALLY_IOCTL_ALLOC;
}

/* What `cmd` on a device of `kind` does, given the argument as the driver
 * will see it (`len` bytes: the caller's first tally_ioctl_user_bytes(),
 * zero after); `*bytes` is the size an ALLOC creates. Fewer bytes than the
 * struct: UNREADABLE (the hook could not read the argument; the driver's own
 * copy may still succeed, so it is no proof that nothing is made). */
static inline enum tally_ioctl_op tally_ioctl_decode(__u32 kind, __u32 cmd, const __u8* arg,
                                                     __u32 len, __u64* bytes) {
  *bytes = 0;
  if (kind != TALLY_DEVICE_KFD && tally_ioctl_is(kind, cmd, TALLY_DRM_PRIME_FD_TO_HANDLE))
    return TALLY_IOCTL_UNCOUNTED;
  if (kind == TALLY_DEVICE_AMDGPU && tally_ioctl_is(kind, cmd, TALLY_AMDGPU_GEM_USERPTR))
    return TALLY_IOCTL_UNCOUNTED;
  if (kind == TALLY_DEVICE_KFD && (tally_ioctl_is(kind, cmd, TALLY_KFD_IMPORT_DMABUF) ||
                                   tally_ioctl_is(kind, cmd, TALLY_KFD_MAP_MEMORY_TO_GPU)))
    return TALLY_IOCTL_UNCOUNTED;
  __u32 need = tally_ioctl_arg_size(kind, cmd);
  if (need == 0u) return TALLY_IOCTL_PASS;
  if (len < need) return TALLY_IOCTL_UNREADABLE;
  if (kind != TALLY_DEVICE_KFD && tally_ioctl_is(kind, cmd, TALLY_DRM_MODE_CREATE_DUMB))
    return tally_drm_mode_create_dumb(arg, bytes);
  __u64 size = 0;
  switch (kind) {
    case TALLY_DEVICE_AMDGPU:
      return tally_amdgpu_gem_create(arg, bytes);
    case TALLY_DEVICE_KFD:
      return tally_kfd_alloc_memory_of_gpu(arg, bytes);
    case TALLY_DEVICE_XE:
      /* xe_gem_create_ioctl(): a size of 0 or not page-aligned is refused;
       * else one BO of exactly `size` (xe_bo_init_locked()). */
      size = tally_le64(arg + 8);
      if (size == 0 || (size & 4095ull)) return TALLY_IOCTL_PASS;
      break;
    case TALLY_DEVICE_TESTDRM:
      size = tally_le64(arg);
      break;
    default:
      return TALLY_IOCTL_PASS;
  }
  if (TALLY_PAGE_ALIGN_WRAPS(size)) return TALLY_IOCTL_UNDECODABLE;
  *bytes = TALLY_PAGE_ALIGN(size);
  return TALLY_IOCTL_ALLOC;
}

#endif
