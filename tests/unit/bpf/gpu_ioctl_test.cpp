// The allocation ioctls the in-kernel bound decodes, against the real uapi
// headers (libdrm's amdgpu_drm.h, linux/kfd_ioctl.h, the test driver's):
// the same command numbers, and sizes read from the real structs' fields.
#include "bpf/gpu_ioctl.h"

#include <amdgpu_drm.h>
#include <gtest/gtest.h>
#include <linux/kfd_ioctl.h>

#include <cstring>
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
  EXPECT_EQ(TALLY_KFD_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU);
  EXPECT_EQ(TALLY_KFD_IMPORT_DMABUF, AMDKFD_IOC_IMPORT_DMABUF);
  EXPECT_EQ(TALLY_TESTDRM_CREATE, DRM_IOCTL_TALLY_TESTDRM_CREATE);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_GTT, AMDGPU_GEM_DOMAIN_GTT);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_VRAM, AMDGPU_GEM_DOMAIN_VRAM);
  EXPECT_EQ(TALLY_AMDGPU_DOMAIN_CPU, AMDGPU_GEM_DOMAIN_CPU);
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
  kfd_ioctl_alloc_memory_of_gpu_args k{};
  k.size = 1 << 20;
  for (__u32 flag :
       {TALLY_KFD_ALLOC_USERPTR, TALLY_KFD_ALLOC_DOORBELL, TALLY_KFD_ALLOC_MMIO_REMAP}) {
    k.flags = flag | KFD_IOC_ALLOC_MEM_FLAGS_GTT;
    auto d = decode(TALLY_DEVICE_KFD, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, bytesOf(k));
    EXPECT_EQ(d.op, TALLY_IOCTL_UNCOUNTED) << flag;
    EXPECT_EQ(d.bytes, 0u);
  }
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
  // Too few bytes (the copy from user space failed): passes, the driver judges it.
  arg.resize(31);
  auto d = decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, arg);
  EXPECT_EQ(d.op, TALLY_IOCTL_PASS);
  EXPECT_EQ(d.bytes, 0u);
  // A size that wraps when page-aligned is the driver's to refuse, never a tiny charge.
  c.in.bo_size = ~0ull - 10;
  d = decode(TALLY_DEVICE_AMDGPU, DRM_IOCTL_AMDGPU_GEM_CREATE, bytesOf(c));
  EXPECT_EQ(d.op, TALLY_IOCTL_PASS);
}

}  // namespace
}  // namespace tally
