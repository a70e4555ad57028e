// The charge probe's plan: which of the allocation paths (ChargePath) this
// host has, and for each, the node its child allocates on and where the
// driver's figures for it are read. Internal to the probe (charge_probe.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bpf/gpu_charge_abi.h"
#include "bpf/kernel_charge.h"
#include "coverage/charge_probe.h"
#include "devices/drm_devices.h"
#include "fs/root.h"

namespace tally::coverage::charge_probe {

inline constexpr std::uint64_t kPage = 4096;

// How a path is probed: the node its child allocates on, where its figures
// come from.
struct Plan {
  PathResult result;
  std::uint32_t kind = TALLY_DEVICE_OTHER_DRM;  // the device kind the node is registered as
  std::string fdinfoAbsent;  // set: the path's client shows no fdinfo figure, and why
  std::string sysNode;       // class/drm/<node>: where its device's mem_info_* are
  std::string acquireNode;   // KFD on the real driver: the render node whose VM it acquires
  std::uint32_t gpuId = 0;
  bool testDriver = false;  // the VM's tally_testdrm: its own MAP shows a buffer in fdinfo
  bool realAmdgpu = false;  // amdgpu itself (not the test driver playing it)
};

// One plan per ChargePath, in kChargePaths' order: present ones on the
// device `rules` registers as that path's kind, absent ones saying why.
std::vector<Plan> planPaths(const fs::Root& sys, const devices::DeviceMap& devices,
                            const std::vector<bpf::DeviceRule>& rules, const ChargeProbeOptions& o);

}  // namespace tally::coverage::charge_probe
