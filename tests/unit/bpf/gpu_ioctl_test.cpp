// The allocation ioctls the kernel charge decodes, against the real uapi
// headers (libdrm's amdgpu_drm.h, linux/kfd_ioctl.h, the test driver's):
// the same command numbers, and sizes read from the real structs' fields.
#include "bpf/gpu_ioctl.h"

#include <amdgpu_drm.h>
#include <gtest/gtest.h>
#include <linux/kfd_ioctl.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "tally_testdrm_uapi.h"

namespace tally {
namespace {

template <typename T>
std::vector<__u8> bytesOf(const T& v) {
  std::vector<__u8> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

struct Decoded {
  tally_ioctl_op op;
  __u64 bytes;
};

Decoded decode(__u32 kind, __u32 cmd, const std::vector<__u8>& arg) {
  __u64 bytes = 99;
  auto op = tally_ioctl_decode(kind, cmd, arg.data(), static_cast<__u32>(arg.size()), &bytes);
  return {op, bytes};
}

TEST(GpuIoctl, CommandNumbersAreTheRealOnes) {
  EXPECT_EQ(TALLY_AMDGPU_GEM_CREATE, DRM_IOCTL_AMDGPU_GEM_CREATE);
  EXPECT_EQ(TALLY_AMDGPU_GEM_USERPTR, DRM_IOCTL_AMDGPU_GEM_USERPTR);
  EXPECT_EQ(TALLY_DRM_PRIME_FD_TO_HANDLE, DRM_IOCTL_PRIME_FD_TO_HANDLE);
  EXPECT_EQ(TALLY_DRM_MODE_CREATE_DUMB, DRM_IOCTL_MODE_CREATE_DUMB);
  EXPECT_EQ(TALLY_KFD_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU);
  EXPECT_EQ(TALLY_KFD_IMPORT_DMABUF, AMDKFD_IOC_IMPORT_DMABUF);
  EXPECT_EQ(TALLY_TESTDRM_CREATE, DRM_IOCTL_TALLY_TESTDRM_CREATE);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_GTT, AMDGPU_GEM_DOMAIN_GTT);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_VRAM, AMDGPU_GEM_DOMAIN_VRAM);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_CPU, AMDGPU_GEM_DOMAIN_CPU);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_GDS, AMDGPU_GEM_DOMAIN_GDS);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_GWS, AMDGPU_GEM_DOMAIN_GWS);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_OA, AMDGPU_GEM_DOMAIN_OA);
  EXPECT_EQ(TALLY_AMDGPU_CREATE_VM_ALWAYS_VALID, AMDGPU_GEM_CREATE_VM_ALWAYS_VALID);
  EXPECT_EQ(TALLY_KFD_ALLOC_VRAM, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
  EXPECT_EQ(TALLY_KFD_ALLOC_GTT, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
  EXPECT_EQ(TALLY_KFD_ALLOC_USERPTR, KFD_IOC_ALLOC_MEM_FLAGS_USERPTR);
  EXPECT_EQ(TALLY_KFD_ALLOC_DOORBELL, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL);
  EXPECT_EQ(TALLY_KFD_ALLOC_MMIO_REMAP, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP);
  // The test driver's stand-ins carry the real encodings too.
  EXPECT_EQ(DRM_IOCTL_TALLY_TESTDRM_AMDGPU_GEM_CREATE, DRM_IOCTL_AMDGPU_GEM_CREATE);
  EXPECT_EQ(AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU);
  EXPECT_EQ(AMDKFD_IOC_TALLY_FREE_MEMORY_OF_GPU, AMDKFD_IOC_FREE_MEMORY_OF_GPU);
  EXPECT_LE(sizeof(union drm_amdgpu_gem_create), TALLY_IOCTL_MAX_ARG);
  EXPECT_LE(sizeof(kfd_ioctl_alloc_memory_of_gpu_args), TALLY_IOCTL_MAX_ARG);
}

TEST(GpuIoctl, AmdgpuGemCreateIsItsPageAlignedSizeInAnyMemoryDomain) {
  union drm_amdgpu_gem_create c {};
  c.in.bo_size = (1ull << 30) + 1;  // 1 GiB and a byte: two pages more than 1 GiB's count - 1
  c.in.domains = AMDGPU_GEM_DOMAIN_GTT;
  auto d = decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, (1ull << 30) + 4096);
  c.in.bo_size = 8192;
  c.in.domains = AMDGPU_GEM_DOMAIN_VRAM | AMDGPU_GEM_DOMAIN_GTT;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).bytes, 8192u);
  c.in.domains = AMDGPU_GEM_DOMAIN_CPU;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).op,
            TALLY_IOCTL_ALLOC);
  // No domain: amdgpu_bo_placement_from_domain() falls back to system memory.
  c.in.domains = 0;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).op,
            TALLY_IOCTL_ALLOC);
  // A memory domain beside an on-chip one is memory (sized as below).
  c.in.domains = AMDGPU_GEM_DOMAIN_GDS | AMDGPU_GEM_DOMAIN_GTT;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).op,
            TALLY_IOCTL_ALLOC);
}

TEST(GpuIoctl, WhatIsNotMemoryOrIsCountedElsewhereIsUncounted) {
  union drm_amdgpu_gem_create c {};
  c.in.bo_size = 4096;
  c.in.domains = AMDGPU_GEM_DOMAIN_GDS;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).op,
            TALLY_IOCTL_UNCOUNTED);
  drm_amdgpu_gem_userptr u{};
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_USERPTR, bytesOf(u)).op,
            TALLY_IOCTL_UNCOUNTED);
  drm_prime_handle p{};
  for (__u32 kind :
       {TALLY_DEVICE_AMDGPU, TALLY_DEVICE_XE, TALLY_DEVICE_TESTDRM, TALLY_DEVICE_OTHER_DRM})
    EXPECT_EQ(decode(kind, DRM_IOCTL_PRIME_FD_TO_HANDLE, bytesOf(p)).op, TALLY_IOCTL_UNCOUNTED);
  // Alone, KFD's userptr (anonymous pages memcg charges), doorbell slice and
  // MMIO remap page are not memory the GPU bound counts.
  kfd_ioctl_alloc_memory_of_gpu_args k{};
  k.size = 1 << 20;
  for (__u32 flag :
       {TALLY_KFD_ALLOC_USERPTR, TALLY_KFD_ALLOC_DOORBELL, TALLY_KFD_ALLOC_MMIO_REMAP}) {
    k.flags = flag;
    auto d = decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k));
    EXPECT_EQ(d.op, TALLY_IOCTL_UNCOUNTED) << flag;
    EXPECT_EQ(d.bytes, 0u);
  }
  // Mapping a buffer on further GPUs attaches it there (kfd_mem_attach(): a
  // dma-buf import or an SG BO per peer): objects over memory already counted.
  kfd_ioctl_map_memory_to_gpu_args m{};
  EXPECT_EQ(decode(TALLY_DEVICE_KFD, AMDKFD_IOC_MAP_MEMORY_TO_GPU, bytesOf(m)).op,
            TALLY_IOCTL_UNCOUNTED);
  EXPECT_EQ(TALLY_KFD_MAP_MEMORY_TO_GPU, AMDKFD_IOC_MAP_MEMORY_TO_GPU);
  kfd_ioctl_import_dmabuf_args i{};
  EXPECT_EQ(decode(TALLY_DEVICE_KFD, AMDKFD_IOC_IMPORT_DMABUF, bytesOf(i)).op,
            TALLY_IOCTL_UNCOUNTED);
}

TEST(GpuIoctl, KfdAllocationsAreVramOrGttFlaggedSizes) {
  kfd_ioctl_alloc_memory_of_gpu_args k{};
  k.size = 3 << 20;
  k.flags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | (1u << 31);  // and _WRITABLE
  auto d = decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 3u << 20);
  k.flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
  EXPECT_EQ(decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k)).op,
            TALLY_IOCTL_ALLOC);
  k.flags = 0;  // no memory domain: KFD refuses it; tally lets the driver say so
  EXPECT_EQ(decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k)).op,
            TALLY_IOCTL_PASS);
  // kfd_ioctl_alloc_memory_of_gpu(): a size of 0 is refused before anything is made.
  k.size = 0;
  k.flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
  EXPECT_EQ(decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k)).op,
            TALLY_IOCTL_PASS);
}

// amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu() tests VRAM, then GTT, and looks
// at USERPTR, DOORBELL and MMIO_REMAP only in its else branch: any of those
// beside VRAM or GTT is a plain buffer of the size asked (before: "not
// memory", 256 MiB held under a 64 MiB bound in the VM).
TEST(GpuIoctl, KfdFlagsAreDecidedInTheKernelsOrderVramThenGttThenTheRest) {
  kfd_ioctl_alloc_memory_of_gpu_args k{};
  k.size = 256u << 20;
  for (__u32 memory : {TALLY_KFD_ALLOC_VRAM, TALLY_KFD_ALLOC_GTT})
    for (__u32 other :
         {TALLY_KFD_ALLOC_USERPTR, TALLY_KFD_ALLOC_DOORBELL, TALLY_KFD_ALLOC_MMIO_REMAP,
          TALLY_KFD_ALLOC_USERPTR | TALLY_KFD_ALLOC_DOORBELL}) {
      k.flags = memory | other;
      auto d = decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k));
      EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC) << std::hex << k.flags;
      EXPECT_EQ(d.bytes, 256u << 20) << std::hex << k.flags;
    }
  // AQL queue memory: one BO of half the size, mapped twice (size >>= 1, then PAGE_ALIGN).
  k.size = (6u << 20) + 2;
  k.flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM;
  EXPECT_EQ(TALLY_KFD_ALLOC_AQL_QUEUE_MEM, KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM);
  auto d = decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, (3u << 20) + 4096);
  k.size = 1;  // halved to 0: 6.12 refuses a 0 aligned size
  EXPECT_EQ(decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k)).op,
            TALLY_IOCTL_PASS);
  // A size that wraps in PAGE_ALIGN: what the kernel would make cannot be predicted.
  k.size = ~0ull - 1;
  k.flags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
  EXPECT_EQ(decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k)).op,
            TALLY_IOCTL_UNDECODABLE);
}

// amdgpu_bo_create() sizes the object it initialises in units for GWS and OA
// (size << PAGE_SHIFT) and GDS (ALIGN(size, 4) << PAGE_SHIFT): beside a memory
// domain (a kernel without amdgpu_gem_are_domains_valid()) that is the buffer
// made, so it is what is checked (before: 16 MiB checked, 64 GiB made).
TEST(GpuIoctl, AmdgpuOnChipDomainsBesideMemoryAreSizedAsAmdgpuBoCreateSizesThem) {
  union drm_amdgpu_gem_create c {};
  c.in.bo_size = 16u << 20;
  c.in.domains = AMDGPU_GEM_DOMAIN_GWS | AMDGPU_GEM_DOMAIN_GTT;
  auto d = decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 64ull << 30);
  c.in.domains = AMDGPU_GEM_DOMAIN_OA | AMDGPU_GEM_DOMAIN_VRAM;
  c.in.bo_size = 3;  // no alignment for GWS/OA: 3 pages
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).bytes, 3u * 4096);
  c.in.domains = AMDGPU_GEM_DOMAIN_GDS | AMDGPU_GEM_DOMAIN_CPU;
  c.in.bo_size = 4097;  // ALIGN(4097, 4) = 4100 pages
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).bytes,
            4100ull * 4096);
  // GWS wins over GDS, as the kernel tests it first.
  c.in.domains = AMDGPU_GEM_DOMAIN_GDS | AMDGPU_GEM_DOMAIN_GWS | AMDGPU_GEM_DOMAIN_GTT;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).bytes,
            4097ull * 4096);
  // The shift would wrap: refused for a bounded lease rather than predicted small.
  c.in.bo_size = 1ull << 52;
  c.in.domains = AMDGPU_GEM_DOMAIN_GWS | AMDGPU_GEM_DOMAIN_GTT;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).op,
            TALLY_IOCTL_UNDECODABLE);
  // Refused by amdgpu_gem_create_ioctl() before anything is made: passes (the driver says why).
  c.in.bo_size = 4096;
  c.in.domains = 0x80;  // outside AMDGPU_GEM_DOMAIN_MASK
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).op,
            TALLY_IOCTL_PASS);
  c.in.domains = AMDGPU_GEM_DOMAIN_GWS;
  c.in.domain_flags = AMDGPU_GEM_CREATE_VM_ALWAYS_VALID;  // "GDS bo cannot be per-vm-bo"
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).op,
            TALLY_IOCTL_PASS);
  // A doorbell BO alone (7.x makes one; 6.12 refuses it) is not memory.
  c.in.domain_flags = 0;
  c.in.domains = 0x40;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c)).op,
            TALLY_IOCTL_UNCOUNTED);
}

TEST(GpuIoctl, XeGemCreateSizeIsReadAtItsOffset) {
  // struct drm_xe_gem_create (the kernel's xe_drm.h; Debian 12's libdrm has no xe header).
  struct XeGemCreate {
    __u64 extensions, size;
    __u32 placement, flags, vm_id, handle;
    __u16 cpu_caching, pad[3];
    __u64 reserved[2];
  } x{};
  static_assert(sizeof(XeGemCreate) == 56);
  x.size = 64 << 10;
  x.extensions = ~0ull;
  auto d = decode(TALLY_DEVICE_XE, TALLY_XE_GEM_CREATE, bytesOf(x));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 64u << 10);
}

TEST(GpuIoctl, TheTestDriversCreate) {
  tally_testdrm_create c{5000, TALLY_TESTDRM_REGION_VRAM, 0};
  auto d = decode(TALLY_DEVICE_TESTDRM, DRM_IOCTL_TALLY_TESTDRM_CREATE, bytesOf(c));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 8192u);
}

// What the hook hands the decoder: the argument as the driver copies it (the
// caller's first tally_ioctl_user_bytes(), zero after, to the struct's size).
Decoded decodeAsTheDriverReads(__u32 kind, __u32 cmd, const std::vector<__u8>& caller) {
  std::vector<__u8> view(tally_ioctl_arg_size(kind, cmd), 0);
  std::size_t given = std::min<std::size_t>(tally_ioctl_user_bytes(kind, cmd), caller.size());
  std::copy_n(caller.begin(), given, view.begin());  // none when the driver reads none
  return decode(kind, cmd, view);
}

__u32 withType(__u32 cmd, __u32 type) { return (cmd & ~0xff00u) | (type << 8); }
__u32 withSize(__u32 cmd, __u32 size) { return (cmd & ~(0x3fffu << 16)) | (size << 16); }

TEST(GpuIoctl, CommandsAreKeyedByTheirNumberAsTheDriversDispatchThem) {
  tally_testdrm_create t{5000, TALLY_TESTDRM_REGION_VRAM, 0};
  // Another type byte: drm_ioctl() answers -ENOTTY and makes nothing.
  auto d = decodeAsTheDriverReads(TALLY_DEVICE_TESTDRM,
                                  withType(DRM_IOCTL_TALLY_TESTDRM_CREATE, 'e'), bytesOf(t));
  EXPECT_EQ(d.op, TALLY_IOCTL_PASS);
  // The struct cut to its size field: the driver zero-fills the rest.
  __u32 sizeOnly = withSize(DRM_IOCTL_TALLY_TESTDRM_CREATE, 8);
  EXPECT_EQ(tally_ioctl_user_bytes(TALLY_DEVICE_TESTDRM, sizeOnly), 8u);
  d = decodeAsTheDriverReads(TALLY_DEVICE_TESTDRM, sizeOnly, bytesOf(t));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 8192u);
  // A longer struct than the driver's: it reads its own size.
  EXPECT_EQ(
      tally_ioctl_user_bytes(TALLY_DEVICE_TESTDRM, withSize(DRM_IOCTL_TALLY_TESTDRM_CREATE, 200)),
      16u);
  // Without IOC_IN, DRM copies nothing in: a zero-size buffer.
  __u32 readOnly = DRM_IOCTL_TALLY_TESTDRM_CREATE & ~(TALLY_IOC_WRITE << 30);
  EXPECT_EQ(tally_ioctl_user_bytes(TALLY_DEVICE_TESTDRM, readOnly), 0u);
  d = decodeAsTheDriverReads(TALLY_DEVICE_TESTDRM, readOnly, bytesOf(t));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 0u);

  union drm_amdgpu_gem_create c {};
  c.in.bo_size = 3 << 20;
  c.in.domains = AMDGPU_GEM_DOMAIN_GTT;
  d = decodeAsTheDriverReads(TALLY_DEVICE_AMDGPU, withSize(DRM_IOCTL_AMDGPU_GEM_CREATE, 24),
                             bytesOf(c));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 3u << 20);
  // Cut before the domains: no domain, which amdgpu places in system memory.
  d = decodeAsTheDriverReads(TALLY_DEVICE_AMDGPU, withSize(DRM_IOCTL_AMDGPU_GEM_CREATE, 8),
                             bytesOf(c));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 3u << 20);

  // KFD takes any type byte and copies the caller's bytes whatever the direction bits say.
  kfd_ioctl_alloc_memory_of_gpu_args k{};
  k.size = 1 << 20;
  k.flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
  __u32 kfdOdd = withType(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, 'L') & ~(3u << 30);
  EXPECT_EQ(tally_ioctl_user_bytes(TALLY_DEVICE_KFD, kfdOdd), 40u);
  d = decodeAsTheDriverReads(TALLY_DEVICE_KFD, kfdOdd, bytesOf(k));
  EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC);
  EXPECT_EQ(d.bytes, 1u << 20);

  drm_prime_handle p{};
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, withSize(DRM_IOCTL_PRIME_FD_TO_HANDLE, 4), bytesOf(p)).op,
            TALLY_IOCTL_UNCOUNTED);
}

TEST(GpuIoctl, EveryCommandADecoderKnowsPassesTheHooksFirstTest) {
  for (__u32 cmd :
       {TALLY_AMDGPU_GEM_CREATE, TALLY_AMDGPU_GEM_USERPTR, TALLY_XE_GEM_CREATE,
        TALLY_TESTDRM_CREATE, TALLY_DRM_PRIME_FD_TO_HANDLE, TALLY_DRM_MODE_CREATE_DUMB,
        TALLY_KFD_ALLOC_MEMORY_OF_GPU, TALLY_KFD_IMPORT_DMABUF, TALLY_KFD_MAP_MEMORY_TO_GPU}) {
    EXPECT_TRUE(tally_ioctl_decodable(cmd)) << std::hex << cmd;
    EXPECT_TRUE(tally_ioctl_decodable(withType(withSize(cmd, 3), 0x11))) << std::hex << cmd;
  }
  // What the hook lets go at once: the commands every program makes by the thousand.
  EXPECT_FALSE(tally_ioctl_decodable(DRM_IOCTL_GEM_CLOSE));
  EXPECT_FALSE(tally_ioctl_decodable(DRM_IOCTL_AMDGPU_CS));
  EXPECT_FALSE(tally_ioctl_decodable(0x5401));  // TCGETS
}

// A dumb buffer is reserved at the most any driver makes of it: amdgpu
// aligns the width to 256/128/64 pixels (amdgpu_gem_align_pitch()), nouveau
// the pitch to 256 bytes, xe the size to 64 KiB. What was not made goes back
// at the ioctl's end.
TEST(GpuIoctl, ADumbBufferIsReservedAtTheMostAnyDriverMakesOfIt) {
  drm_mode_create_dumb c{};
  c.width = 1920;
  c.height = 1080;
  c.bpp = 32;
  for (__u32 kind :
       {TALLY_DEVICE_AMDGPU, TALLY_DEVICE_XE, TALLY_DEVICE_TESTDRM, TALLY_DEVICE_OTHER_DRM}) {
    auto d = decode(kind, DRM_IOCTL_MODE_CREATE_DUMB, bytesOf(c));
    EXPECT_EQ(d.op, TALLY_IOCTL_ALLOC) << kind;
    // amdgpu: 1920 aligned to 64 px (4 bytes a pixel) is 1920; 256 px: 2048.
    EXPECT_EQ(d.bytes, (2048ull * 4 * 1080 + 65535) / 65536 * 65536) << kind;
    EXPECT_GE(d.bytes, 1920ull * 4 * 1080) << "never less than the pixels";
  }
  // The padding attack: 1 pixel of 8 bits, 16 Mi rows. 16 MiB of pixels;
  // amdgpu makes a 256-byte pitch: 4 GiB. Reserved at that.
  c.width = 1;
  c.bpp = 8;
  c.height = 16u << 20;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_MODE_CREATE_DUMB, bytesOf(c)).bytes, 4ull << 30);
  // 3 bytes a pixel: the larger of 256 px x 3 and the pitch aligned to 256 bytes.
  c.width = 1920;
  c.height = 1080;
  c.bpp = 24;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_MODE_CREATE_DUMB, bytesOf(c)).bytes,
            (2048ull * 3 * 1080 + 65535) / 65536 * 65536);
  // What drm_mode_create_dumb() refuses passes: the driver says why.
  for (auto [w, h, bpp] : {std::tuple{0u, 1080u, 32u}, std::tuple{1920u, 0u, 32u},
                           std::tuple{1920u, 1080u, 0u}, std::tuple{65536u, 65536u, 32u},
                           std::tuple{1u, 1u, 0xfffffff9u}, std::tuple{0x40000000u, 1u, 32u}}) {
    c.width = w;
    c.height = h;
    c.bpp = bpp;
    auto d = decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_MODE_CREATE_DUMB, bytesOf(c));
    EXPECT_EQ(d.op, TALLY_IOCTL_PASS) << w << "x" << h << "x" << bpp;
    EXPECT_EQ(d.bytes, 0u);
  }
  // The largest it makes: just under 4 GiB of pixels, padded.
  c.width = 32767;
  c.height = 32767;
  c.bpp = 32;
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_MODE_CREATE_DUMB, bytesOf(c)).bytes,
            (32768ull * 4 * 32767 + 65535) / 65536 * 65536);
  // KFD has no such command.
  EXPECT_EQ(decode(TALLY_DEVICE_KFD, DRM_IOCTL_MODE_CREATE_DUMB, bytesOf(c)).op, TALLY_IOCTL_PASS);
}

TEST(GpuIoctl, AnythingNotDecodedPasses) {
  union drm_amdgpu_gem_create c {};
  c.in.bo_size = 1 << 20;
  c.in.domains = AMDGPU_GEM_DOMAIN_GTT;
  auto arg = bytesOf(c);
  // Another driver's number on this device, or the device unknown: never decoded.
  EXPECT_EQ(decode(TALLY_DEVICE_XE, DRM_IOCTL_AMDGPU_GEM_CREATE, arg).op, TALLY_IOCTL_PASS);
  EXPECT_EQ(decode(TALLY_DEVICE_TESTDRM, DRM_IOCTL_AMDGPU_GEM_CREATE, arg).op, TALLY_IOCTL_PASS);
  EXPECT_EQ(decode(TALLY_DEVICE_OTHER_DRM, DRM_IOCTL_AMDGPU_GEM_CREATE, arg).op, TALLY_IOCTL_PASS);
  EXPECT_EQ(decode(77, DRM_IOCTL_AMDGPU_GEM_CREATE, arg).op, TALLY_IOCTL_PASS);
  EXPECT_EQ(decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_CS, arg).op, TALLY_IOCTL_PASS);
  // Too few bytes (the hook's copy from user space failed): unreadable, which
  // the hook refuses for a bounded lease (the driver's own copy may succeed).
  arg.resize(31);
  auto d = decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, arg);
  EXPECT_EQ(d.op, TALLY_IOCTL_UNREADABLE);
  EXPECT_EQ(d.bytes, 0u);
  // A size that wraps when page-aligned: never a tiny charge.
  c.in.bo_size = ~0ull - 10;
  d = decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c));
  EXPECT_EQ(d.op, TALLY_IOCTL_UNDECODABLE);
}

// xe_gem_create_ioctl() refuses a size of 0 or one not page-aligned before
// it makes anything.
TEST(GpuIoctl, XeRefusesWhatIsNotPageAligned) {
  struct XeGemCreate {
    __u64 extensions, size;
    __u32 placement, flags, vm_id, handle;
    __u16 cpu_caching, pad[3];
    __u64 reserved[2];
  } x{};
  for (__u64 size : {0ull, 4097ull}) {
    x.size = size;
    EXPECT_EQ(decode(TALLY_DEVICE_XE, TALLY_XE_GEM_CREATE, bytesOf(x)).op, TALLY_IOCTL_PASS);
  }
}

}  // namespace
}  // namespace tally
