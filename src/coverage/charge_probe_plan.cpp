#include "coverage/charge_probe_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "coverage/active_probe.h"
#include "devices/driver_catalogue.h"
#include "util/text.h"

namespace tally::coverage::charge_probe {
namespace {

std::optional<bpf::DeviceRule> ruleOf(const std::vector<bpf::DeviceRule>& rules,
                                      const devices::DrmNode& n) {
  for (const auto& r : rules)
    if (r.major == n.major && r.minor == n.minor) return r;
  return std::nullopt;
}

// The device kind a DRM device is registered as (its first DRM node's rule).
std::optional<bpf::DeviceRule> deviceRule(const std::vector<bpf::DeviceRule>& rules,
                                          const devices::DrmDevice& d) {
  for (const auto& n : d.nodes)
    if (n.major == devices::kDrmMajor)
      if (auto r = ruleOf(rules, n)) return r;
  return std::nullopt;
}

const devices::DrmNode* nodeOf(const devices::DrmDevice& d, bool render) {
  for (const auto& n : d.nodes)
    if (n.major == devices::kDrmMajor && n.isRender() == render) return &n;
  return nullptr;
}

// What a device registered as `kind` is called (devices::decodedDriverName).
std::string kindName(std::uint32_t kind) {
  std::string_view driver = devices::decodedDriverName(kind);
  return driver.empty() ? "another driver" : std::string(driver);
}

std::string seenDevices(const devices::DeviceMap& devices,
                        const std::vector<bpf::DeviceRule>& rules) {
  std::vector<std::string> seen;
  for (const auto& d : devices.devices) {
    auto r = deviceRule(rules, d);
    std::string driver = r && r->kind != TALLY_DEVICE_OTHER_DRM ? kindName(r->kind)
                         : d.driver.empty()                     ? "no driver"
                                                                : d.driver;
    seen.push_back(fmt::format("{} ({})", d.key, driver));
  }
  return seen.empty() ? "no DRM device" : fmt::format("devices: {}", fmt::join(seen, ", "));
}

Plan onDevice(ChargePath path, const devices::DrmDevice& d, const devices::DrmNode& n,
              std::uint32_t kind, const ChargeProbeOptions& o) {
  Plan p;
  p.result.path = path;
  p.result.present = true;
  p.result.device = d.key;
  p.result.node = fmt::format("{}/{}", o.devDir, n.name);
  p.kind = kind;
  p.sysNode = fmt::format("class/drm/{}", n.name);
  p.testDriver = probeDriver(d) == "tally_testdrm";
  p.realAmdgpu = kind == TALLY_DEVICE_AMDGPU && !p.testDriver;
  return p;
}

Plan absent(ChargePath path, std::string why) {
  Plan p;
  p.result.path = path;
  p.result.notPresent = std::move(why);
  return p;
}

// The first device registered as `kind` with a render node.
std::optional<Plan> onKind(ChargePath path, std::uint32_t kind, const devices::DeviceMap& devices,
                           const std::vector<bpf::DeviceRule>& rules, const ChargeProbeOptions& o) {
  for (const auto& d : devices.devices) {
    auto r = deviceRule(rules, d);
    const auto* render = nodeOf(d, true);
    if (r && r->kind == kind && render) return onDevice(path, d, *render, kind, o);
  }
  return std::nullopt;
}

// KFD's first GPU node: its gpu_id and render minor (topology/nodes/N/gpu_id,
// properties' drm_render_minor).
struct KfdGpu {
  std::uint32_t gpuId = 0;
  std::uint32_t renderMinor = 0;
};
std::optional<KfdGpu> kfdGpu(const fs::Root& sys, std::string& why) {
  const std::string dir = "class/kfd/kfd/topology/nodes";
  auto nodes = sys.list(dir);
  if (!nodes) {
    why = fmt::format("no KFD topology ({})", sys.describe(dir));
    return std::nullopt;
  }
  std::sort(nodes->begin(), nodes->end());
  for (const auto& n : *nodes) {
    auto id = sys.read(fmt::format("{}/{}/gpu_id", dir, n), 64);
    auto gpu = id ? text::parseU64(text::trim(*id)) : std::nullopt;
    if (!gpu || *gpu == 0 || *gpu > 0xffffffffULL) continue;  // 0: a CPU node
    auto props = sys.read(fmt::format("{}/{}/properties", dir, n), 64 * 1024);
    if (!props) continue;
    std::string_view rest = *props;
    while (!rest.empty()) {
      auto nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      constexpr std::string_view key = "drm_render_minor ";
      if (!text::startsWith(line, key)) continue;
      auto minor = text::parseU64(text::trim(line.substr(key.size())));
      if (minor && *minor < 0x100000)
        return KfdGpu{static_cast<std::uint32_t>(*gpu), static_cast<std::uint32_t>(*minor)};
    }
  }
  why = fmt::format("KFD's topology ({}) lists no GPU with a render node", sys.describe(dir));
  return std::nullopt;
}

}  // namespace

std::vector<Plan> planPaths(const fs::Root& sys, const devices::DeviceMap& devices,
                            const std::vector<bpf::DeviceRule>& rules,
                            const ChargeProbeOptions& o) {
  std::vector<Plan> plans;
  const std::string seen = seenDevices(devices, rules);
  for (ChargePath path : {ChargePath::AmdgpuGtt, ChargePath::AmdgpuVram}) {
    auto p = onKind(path, TALLY_DEVICE_AMDGPU, devices, rules, o);
    plans.push_back(p ? std::move(*p) : absent(path, fmt::format("no amdgpu device ({})", seen)));
  }

  // KFD: /dev/kfd registered, and the GPU it allocates on.
  bool kfdRegistered = std::any_of(rules.begin(), rules.end(), [](const bpf::DeviceRule& r) {
    return r.kind == TALLY_DEVICE_KFD;
  });
  for (ChargePath path : {ChargePath::KfdGtt, ChargePath::KfdVram}) {
    if (!kfdRegistered) {
      plans.push_back(absent(path, fmt::format("no {}", o.kfdNode)));
      continue;
    }
    std::string why;
    Plan p;
    if (auto gpu = kfdGpu(sys, why)) {
      auto at = devices.byNode(devices::kDrmMajor, gpu->renderMinor);
      if (!at) {
        plans.push_back(absent(path, fmt::format("KFD's GPU {} has render minor {}, which no DRM "
                                                 "device here has",
                                                 gpu->gpuId, gpu->renderMinor)));
        continue;
      }
      const auto& d = devices.devices[*at];
      const auto* render = nodeOf(d, true);
      p = onDevice(path, d, *render, TALLY_DEVICE_KFD, o);
      p.gpuId = gpu->gpuId;
      p.acquireNode = p.result.node;
    } else {
      // The VM's test driver makes /dev/kfd itself (personality=amdgpu),
      // with no topology and no VM to acquire: its GPU is id 0.
      auto test = onKind(path, TALLY_DEVICE_AMDGPU, devices, rules, o);
      if (!test || !test->testDriver) {
        plans.push_back(absent(path, fmt::format("{} is there, but {}", o.kfdNode, why)));
        continue;
      }
      p = std::move(*test);
      p.kind = TALLY_DEVICE_KFD;
    }
    p.result.node = o.kfdNode;
    p.fdinfoAbsent =
        "KFD's buffers belong to the KFD process, not to a DRM file the probe holds: no client's "
        "fdinfo counts them here";
    plans.push_back(std::move(p));
  }

  // A dumb buffer, on the card node of a device whose buffers are charged.
  std::optional<Plan> dumb;
  for (const auto& d : devices.devices) {
    auto r = deviceRule(rules, d);
    const auto* card = nodeOf(d, false);
    if (dumb || !r || !r->charged || !card) continue;
    dumb = onDevice(ChargePath::Dumb, d, *card, r->kind, o);
  }
  plans.push_back(dumb ? std::move(*dumb)
                       : absent(ChargePath::Dumb,
                                fmt::format("no card node of a device whose buffers the kernel "
                                            "charge counts ({}; {})",
                                            devices::chargedDriverNames(", ", false), seen)));

  auto xe = onKind(ChargePath::Xe, TALLY_DEVICE_XE, devices, rules, o);
  plans.push_back(xe ? std::move(*xe)
                     : absent(ChargePath::Xe, fmt::format("no xe device ({})", seen)));

  auto test = onKind(ChargePath::TestDrm, TALLY_DEVICE_TESTDRM, devices, rules, o);
  if (test) {
    plans.push_back(std::move(*test));
  } else {
    std::string why = fmt::format("no device of tally's VM test driver playing itself ({})", seen);
    for (const auto& d : devices.devices)
      if (probeDriver(d) == "tally_testdrm")
        if (auto r = deviceRule(rules, d))
          why = fmt::format(
              "tally's VM test driver plays {} here: its own CREATE is decoded only when it plays "
              "itself",
              kindName(r->kind));
    plans.push_back(absent(ChargePath::TestDrm, why));
  }
  return plans;
}

}  // namespace tally::coverage::charge_probe
