// The driver catalogue (devices/driver_catalogue.h) and what its readers
// make of it: the classes of real drivers' fdinfo (tests/fixtures/fdinfo),
// the decoder each driver's nodes are registered with, the names doctor and
// the probes print, and the rows' own consistency (what a new row must keep).
#include "devices/driver_catalogue.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coverage/active_probe.h"
#include "probes/drm_fdinfo.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using devices::MemoryClass;
using M = MemoryClass;
using Classes = std::vector<std::pair<std::string, MemoryClass>>;

// Every region of a fixture's client, classed as gpumem::clientRegions
// classes them: by its drm-driver (else `sysfsDriver`), system-like regions
// by whether the client printed a device region too.
Classes classesOf(const std::string& file, const std::string& sysfsDriver = "") {
  auto f =
      probes::parseDrmFdinfo(testing::readFile(std::string(TALLY_FIXTURE_DIR) + "/fdinfo/" + file));
  std::string driver = f.driver.empty() ? sysfsDriver : f.driver;
  bool withDevice = false;
  for (const auto& [name, stats] : f.regions)
    withDevice = withDevice || devices::classifyRegion(driver, name) == M::Device;
  Classes out;
  for (const auto& [name, stats] : f.regions)
    out.emplace_back(name, devices::classifyRegion(driver, name, withDevice));
  return out;
}

TEST(DriverCatalogue, RealDriversFdinfoKeepsItsClasses) {
  EXPECT_EQ(classesOf("amdgpu-2024-amdgpu_top-issue87.fdinfo"),
            (Classes{{"vram", M::Device}, {"gtt", M::HostUncharged}, {"cpu", M::HostUncharged}}));
  EXPECT_EQ(classesOf("amdgpu-2024-tursulin-patch.fdinfo"),
            (Classes{{"cpu", M::HostUncharged}, {"gtt", M::HostUncharged}, {"vram", M::Device}}));
  EXPECT_EQ(classesOf("amdgpu-2024-tursulin-v1-mib.fdinfo"),
            (Classes{{"cpu", M::HostUncharged}, {"gtt", M::HostUncharged}, {"vram", M::Device}}));
  // A partial sample without drm-driver: classed by the device's sysfs driver.
  EXPECT_EQ(classesOf("amdgpu-6.18-apu-nvtop492.partial.fdinfo", "amdgpu"),
            (Classes{{"cpu", M::HostUncharged}, {"gtt", M::HostUncharged}, {"vram", M::Device}}));
  EXPECT_EQ(classesOf("amdgpu-6.18-apu-nvtop492.partial.fdinfo"),
            (Classes{{"cpu", M::Unknown}, {"gtt", M::Unknown}, {"vram", M::Unknown}}));
  EXPECT_EQ(classesOf("xe-kernel-doc.fdinfo"), (Classes{{"system", M::HostUncharged},
                                                        {"gtt", M::HostUncharged},
                                                        {"vram0", M::Device},
                                                        {"stolen", M::Other}}));
  // An integrated i915 (no local* region): system0 is shmem, charged.
  EXPECT_EQ(classesOf("i915-manpages-patch.fdinfo"),
            (Classes{{"system0", M::HostCharged}, {"stolen-system0", M::Other}}));
  EXPECT_EQ(classesOf("v3d-rpi5-glances3611.partial.fdinfo"),
            (Classes{{"memory", M::HostCharged}}));
  EXPECT_EQ(classesOf("amdxdna-xdna-driver324.fdinfo"), (Classes{{"memory", M::HostCharged}}));
}

TEST(DriverCatalogue, EachDecoderIsOneDriversAndKfdIsNone) {
  ASSERT_NE(devices::rowDecodedAs(TALLY_DEVICE_AMDGPU), nullptr);
  EXPECT_EQ(devices::rowDecodedAs(TALLY_DEVICE_AMDGPU)->driver, "amdgpu");
  ASSERT_NE(devices::rowDecodedAs(TALLY_DEVICE_XE), nullptr);
  EXPECT_EQ(devices::rowDecodedAs(TALLY_DEVICE_XE)->driver, "xe");
  ASSERT_NE(devices::rowDecodedAs(TALLY_DEVICE_TESTDRM), nullptr);
  EXPECT_EQ(devices::rowDecodedAs(TALLY_DEVICE_TESTDRM)->driver, "tally_testdrm");
  EXPECT_EQ(devices::rowDecodedAs(TALLY_DEVICE_KFD), nullptr);
  EXPECT_EQ(devices::rowDecodedAs(TALLY_DEVICE_OTHER_DRM), nullptr);
  EXPECT_EQ(devices::rowDecodedAs(99), nullptr);
  // What doctor and the charge probe call a device registered as each kind.
  EXPECT_EQ(devices::decodedDriverName(TALLY_DEVICE_AMDGPU), "amdgpu");
  EXPECT_EQ(devices::decodedDriverName(TALLY_DEVICE_XE), "xe");
  EXPECT_EQ(devices::decodedDriverName(TALLY_DEVICE_TESTDRM), "tally_testdrm");
  EXPECT_EQ(devices::decodedDriverName(TALLY_DEVICE_KFD), "kfd");
  EXPECT_EQ(devices::decodedDriverName(TALLY_DEVICE_OTHER_DRM), "");
  for (const char* undecoded : {"i915", "radeon", "nouveau", "v3d", "virtio_gpu"})
    EXPECT_EQ(devices::findDriver(undecoded)->decoder, TALLY_DEVICE_OTHER_DRM) << undecoded;
  EXPECT_EQ(devices::findDriver("foodrm"), nullptr);
  EXPECT_EQ(devices::findDriver(""), nullptr);
}

TEST(DriverCatalogue, WhatDoctorAndTheProbesNameComesFromTheRows) {
  EXPECT_EQ(devices::chargedDriverNames(", ", false), "amdgpu, xe, radeon, nouveau");
  EXPECT_EQ(devices::chargedDriverNames("/", true), "radeon/nouveau");
  EXPECT_EQ(devices::findDriver("amdgpu")->allocationIoctls, "GEM_CREATE");
  EXPECT_EQ(devices::findDriver("xe")->allocationIoctls, "GEM_CREATE");
  EXPECT_EQ(devices::findDriver("tally_testdrm")->allocationIoctls, "its CREATE");
  // ROCm's facts (a compute ceiling, where hipMalloc lands) are amdgpu's only.
  EXPECT_TRUE(devices::servedByKfd("amdgpu"));
  for (const char* other : {"tally_testdrm", "xe", "i915", "radeon", "v3d", "", "foodrm"})
    EXPECT_FALSE(devices::servedByKfd(other)) << other;
  // The coverage probe makes GTT on amdgpu and on the VM's test driver.
  EXPECT_TRUE(coverage::hasProbe("amdgpu"));
  EXPECT_TRUE(coverage::hasProbe("tally_testdrm"));
  for (const char* other : {"xe", "i915", "radeon", "nouveau", "v3d", "", "foodrm"})
    EXPECT_FALSE(coverage::hasProbe(other)) << other;
}

// What every row must keep, so a new one cannot contradict itself: one row
// per driver, one driver per decoder; a decoded driver's objects are TTM's
// (the decoder charges them) and doctor can name its ioctls; a driver that
// prints no figures has no regions to class.
TEST(DriverCatalogue, EveryRowIsConsistent) {
  std::set<std::string_view> drivers;
  std::set<std::uint32_t> decoders;
  for (const auto& row : devices::driverCatalogue()) {
    EXPECT_FALSE(row.driver.empty());
    EXPECT_TRUE(drivers.insert(row.driver).second) << "two rows for " << row.driver;
    if (row.decoder != TALLY_DEVICE_OTHER_DRM) {
      EXPECT_NE(row.decoder, TALLY_DEVICE_KFD) << row.driver;
      EXPECT_TRUE(decoders.insert(static_cast<std::uint32_t>(row.decoder)).second) << row.driver;
      EXPECT_EQ(row.objects, devices::ObjectMemory::Ttm) << row.driver;
      EXPECT_FALSE(row.allocationIoctls.empty()) << row.driver;
    } else {
      EXPECT_TRUE(row.allocationIoctls.empty()) << row.driver;
    }
    if (row.figures != devices::DriverFigures::Printed)
      EXPECT_TRUE(row.regions.empty()) << row.driver;
    for (const auto& rule : row.regions) {
      EXPECT_FALSE(rule.name.empty()) << row.driver;
      EXPECT_NE(rule.cls, M::Unknown) << row.driver << " " << rule.name;
      EXPECT_NE(rule.besideDeviceRegions, M::Unknown) << row.driver << " " << rule.name;
    }
    if (row.kfd) EXPECT_FALSE(row.testDriver) << row.driver;
  }
}

}  // namespace
}  // namespace tally
