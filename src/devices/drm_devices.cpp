#include "devices/drm_devices.h"

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "probes/sysfs_value.h"
#include "util/text.h"

namespace tally::devices {
namespace {

std::string basename(std::string_view link) { return std::string(fs::baseName(link)); }

bool digitsAfter(std::string_view n, std::string_view prefix) {
  if (n.substr(0, prefix.size()) != prefix || n.size() == prefix.size()) return false;
  return std::all_of(n.begin() + static_cast<std::ptrdiff_t>(prefix.size()), n.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

bool isNodeName(std::string_view n) {
  return digitsAfter(n, "card") || digitsAfter(n, "renderD") || digitsAfter(n, "accel");
}

bool nodeLess(const DrmNode& a, const DrmNode& b) {
  return a.major != b.major ? a.major < b.major : a.minor < b.minor;
}

// Describe the node whose sysfs directory is <sys>/<dir> (class/drm/<node>,
// class/accel/<node> or dev/char/<major>:<minor>, one directory through two links).
std::optional<DrmDevice> describeNode(const fs::Root& sys, const std::string& dir,
                                      std::uint32_t major, std::uint32_t minor,
                                      std::string nodeName) {
  auto deviceLink = sys.readLink(dir + "/device");
  if (!deviceLink) return std::nullopt;  // a node with no parent device: nothing to attribute
  DrmDevice d;
  d.key = basename(*deviceLink);
  if (auto subsystem = sys.readLink(dir + "/device/subsystem");
      subsystem && basename(*subsystem) == "pci")
    d.pdev = d.key;
  if (auto driver = sys.readLink(dir + "/device/driver")) d.driver = basename(*driver);
  d.nodes.push_back({major, minor, std::move(nodeName)});
  for (const char* region : {"gtt", "vram", "vis_vram"}) {
    DeviceMemory m{region, std::nullopt, std::nullopt};
    std::string base = dir + "/device/mem_info_" + region;
    if (auto t = sys.read(base + "_total", 64)) m.totalBytes = probes::parseSysfsU64(*t);
    if (auto u = sys.read(base + "_used", 64)) m.usedBytes = probes::parseSysfsU64(*u);
    if (m.totalBytes || m.usedBytes) d.memory.push_back(std::move(m));
  }
  return d;
}

void merge(DeviceMap& map, DrmDevice d) {
  for (auto& existing : map.devices) {
    if (existing.key != d.key) continue;
    for (auto& n : d.nodes) {
      bool known = std::any_of(existing.nodes.begin(), existing.nodes.end(), [&](const DrmNode& e) {
        return e.major == n.major && e.minor == n.minor;
      });
      if (!known) existing.nodes.push_back(n);
    }
    std::sort(existing.nodes.begin(), existing.nodes.end(), nodeLess);
    return;
  }
  map.devices.push_back(std::move(d));
  std::sort(map.devices.begin(), map.devices.end(),
            [](const DrmDevice& a, const DrmDevice& b) { return a.key < b.key; });
}

}  // namespace

const DeviceMemory* DrmDevice::region(std::string_view name) const {
  for (const auto& m : memory)
    if (m.region == name) return &m;
  return nullptr;
}

std::optional<std::uint64_t> DrmDevice::regionFree(std::string_view name) const {
  const DeviceMemory* m = region(name);
  if (!m || !m->totalBytes || !m->usedBytes) return std::nullopt;
  return *m->totalBytes > *m->usedBytes ? *m->totalBytes - *m->usedBytes : 0;
}

std::optional<std::size_t> DeviceMap::byNode(std::uint32_t major, std::uint32_t minor) const {
  for (std::size_t i = 0; i < devices.size(); ++i)
    for (const auto& n : devices[i].nodes)
      if (n.major == major && n.minor == minor) return i;
  return std::nullopt;
}

const DrmDevice* DeviceMap::byKey(std::string_view key) const {
  for (const auto& d : devices)
    if (d.key == key) return &d;
  return nullptr;
}

Result<DeviceMap> discoverDrmDevices(const fs::Root& sys) {
  DeviceMap map;
  for (auto [cls, major] : {std::pair{"class/drm", kDrmMajor}, {"class/accel", kAccelMajor}}) {
    auto names = sys.list(cls);
    if (!names) {
      if (names.error().code == ENOENT) continue;
      return names.error();
    }
    std::sort(names->begin(), names->end());
    for (const auto& name : *names) {
      if (!isNodeName(name)) continue;  // connectors (card0-HDMI-A-1), "version"
      std::string dir = std::string(cls) + "/" + name;
      auto dev = sys.read(dir + "/dev", 64);
      if (!dev) continue;
      auto number = probes::parseDevNumber(*dev);
      if (!number || number->major != major) continue;
      if (auto d = describeNode(sys, dir, number->major, number->minor, name))
        merge(map, std::move(*d));
    }
  }
  return map;
}

std::optional<std::size_t> resolveNode(const fs::Root& sys, DeviceMap& map, std::uint32_t major,
                                       std::uint32_t minor) {
  if (auto i = map.byNode(major, minor)) return i;
  std::string dir = "dev/char/" + std::to_string(major) + ":" + std::to_string(minor);
  auto target = sys.readLink(dir);
  if (!target) return std::nullopt;
  auto d = describeNode(sys, dir, major, minor, basename(*target));
  if (!d) return std::nullopt;
  merge(map, std::move(*d));
  return map.byNode(major, minor);
}

}  // namespace tally::devices
