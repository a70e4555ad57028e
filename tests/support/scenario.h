// One synthetic host used by the scanner, report and CLI tests, with every
// expected figure derived in the comments of scenario.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "support/fake_host.h"

namespace tally::testing {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;

inline constexpr const char* kAmdBdf = "0000:c6:00.0";
inline constexpr const char* kXeBdf = "0000:03:00.0";
inline const std::string kPodId =
    "4f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f";
inline const std::string kPodCgroup = "/machine.slice/libpod-" + kPodId + ".scope/container";

// Device figures of the amdgpu device.
inline constexpr std::uint64_t kGttTotal = 96 * kGiB;
inline constexpr std::uint64_t kGttUsed = 10 * kGiB;
inline constexpr std::uint64_t kVramTotal = 4 * kGiB;
inline constexpr std::uint64_t kVramUsed = 1 * kGiB;
inline constexpr std::uint64_t kMemAvailable = 62500 * kMiB;

void buildScenario(FakeHost& host, const std::string& xeFdinfo);

}  // namespace tally::testing
