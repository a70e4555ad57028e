// The memory-class table (devices/memory_class.h), row by row.
#include "devices/memory_class.h"

#include <gtest/gtest.h>

namespace tally::devices {
namespace {

TEST(MemoryClass, TheDocumentedTable) {
  struct Row {
    const char* driver;
    const char* region;
    MemoryClass cls;
  };
  for (const Row& r : std::initializer_list<Row>{
           {"amdgpu", "vram", MemoryClass::Device},
           {"amdgpu", "gtt", MemoryClass::HostUncharged},
           {"amdgpu", "cpu", MemoryClass::HostUncharged},
           {"amdgpu", "gds", MemoryClass::Other},
           {"amdgpu", "gws", MemoryClass::Other},
           {"amdgpu", "oa", MemoryClass::Other},
           {"amdgpu", "doorbell", MemoryClass::Other},
           {"amdgpu", "mmioremap", MemoryClass::Other},
           {"amdgpu", "vram0", MemoryClass::Unknown},  // amdgpu's VRAM has no index
           {"xe", "vram0", MemoryClass::Device},
           {"xe", "vram1", MemoryClass::Device},
           {"xe", "vram", MemoryClass::Unknown},
           {"xe", "vramx", MemoryClass::Unknown},
           {"xe", "gtt", MemoryClass::HostUncharged},
           {"xe", "system", MemoryClass::HostUncharged},
           {"xe", "stolen", MemoryClass::Other},
           {"i915", "local0", MemoryClass::Device},
           {"i915", "local1", MemoryClass::Device},
           {"i915", "system0", MemoryClass::HostCharged},
           {"i915", "stolen-system0", MemoryClass::Other},
           {"i915", "stolen-local0", MemoryClass::Other},
           {"i915", "gtt", MemoryClass::Unknown},
           {"v3d", "memory", MemoryClass::HostCharged},
           {"msm", "memory", MemoryClass::HostCharged},
           {"panfrost", "memory", MemoryClass::HostCharged},
           {"lima", "memory", MemoryClass::HostCharged},
           {"amdxdna_accel_driver", "memory", MemoryClass::HostCharged},
           {"panthor", "memory", MemoryClass::HostCharged},
           {"etnaviv", "memory", MemoryClass::HostCharged},
           {"intel_vpu", "memory", MemoryClass::HostCharged},
           {"v3d", "gtt", MemoryClass::Unknown},
           {"tally_testdrm", "gtt", MemoryClass::HostUncharged},
           {"tally_testdrm", "vram", MemoryClass::Device},
           {"nouveau", "vram", MemoryClass::Unknown},
           {"", "gtt", MemoryClass::Unknown},
       }) {
    EXPECT_EQ(classifyRegion(r.driver, r.region), r.cls) << r.driver << " " << r.region;
  }
}

// i915's system region is shmem on an integrated part and partly TTM pages on
// a discrete one (a client that also prints local* regions): host-mixed.
TEST(MemoryClass, I915SystemOnADiscretePartIsItsOwnClass) {
  EXPECT_EQ(classifyRegion("i915", "system0", true), MemoryClass::HostMixed);
  EXPECT_EQ(classifyRegion("i915", "system0", false), MemoryClass::HostCharged);
  EXPECT_EQ(classifyRegion("i915", "local0", true), MemoryClass::Device);
  EXPECT_EQ(classifyRegion("amdgpu", "gtt", true), MemoryClass::HostUncharged);
  EXPECT_STREQ(memoryClassName(MemoryClass::HostMixed), "host-mixed");
}

TEST(MemoryClass, DriversThatPrintNoMemoryFigures) {
  for (const char* d : {"nouveau", "virtio_gpu", "vmwgfx"})
    EXPECT_EQ(driverFigures(d), DriverFigures::None) << d;
  for (const char* d : {"amdgpu", "xe", "i915", "v3d", "panthor", "intel_vpu", "tally_testdrm"})
    EXPECT_EQ(driverFigures(d), DriverFigures::Printed) << d;
  EXPECT_EQ(driverFigures("foodrm"), DriverFigures::Unknown);
  EXPECT_EQ(driverFigures(""), DriverFigures::Unknown);
}

TEST(MemoryClass, DeviceHostUnchargedAndHostMixedCount) {
  EXPECT_TRUE(countedAsGpuMemory(MemoryClass::Device));
  EXPECT_TRUE(countedAsGpuMemory(MemoryClass::HostUncharged));
  EXPECT_TRUE(countedAsGpuMemory(MemoryClass::HostMixed));
  EXPECT_FALSE(countedAsGpuMemory(MemoryClass::HostCharged));
  EXPECT_FALSE(countedAsGpuMemory(MemoryClass::Other));
  EXPECT_FALSE(countedAsGpuMemory(MemoryClass::Unknown));
  EXPECT_STREQ(memoryClassName(MemoryClass::HostUncharged), "host-uncharged");
  EXPECT_STREQ(memoryClassName(MemoryClass::HostCharged), "host-charged");
}

}  // namespace
}  // namespace tally::devices
