#include "bpf/host.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "bpf/gpu_charge_abi.h"
#include "devices/driver_catalogue.h"
#include "devices/drm_devices.h"
#include "devices/memory_class.h"
#include "util/unique_fd.h"

namespace tally::bpf {

namespace {

constexpr unsigned kCapPerfmon = 38;  // CAP_PERFMON (5.8): linux/capability.h of 6.1 has it
constexpr unsigned kCapBpf = 39;      // CAP_BPF (5.8)
constexpr unsigned kCapSysAdmin = 21;
constexpr long kBpfFsMagic = 0xcafe4a11;  // BPF_FS_MAGIC

bool hasCap(const __user_cap_data_struct (&data)[2], unsigned cap) {
  return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

// The DRM driver's own name (DRM_IOCTL_VERSION): the driver a device plays,
// which is what its ioctls are (the test driver's personality too).
std::string drmDriverName(const std::string& node) {
  UniqueFd fd(::open(node.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return {};
  struct Version {  // struct drm_version (drm.h), 64-bit layout
    int major, minor, patch;
    std::size_t nameLen;
    char* name;
    std::size_t dateLen;
    char* date;
    std::size_t descLen;
    char* desc;
  };
  constexpr unsigned long kDrmIoctlVersion = 0xc0406400;  // DRM_IOWR(0x00, struct drm_version)
  static_assert(sizeof(Version) == 64);
  char name[64] = {};
  Version v{};
  v.nameLen = sizeof name - 1;
  v.name = name;
  if (::ioctl(fd.get(), kDrmIoctlVersion, &v) != 0) return {};
  return std::string(name, std::min<std::size_t>(v.nameLen, sizeof name - 1));
}

// The decoder its catalogue row names (devices/driver_catalogue.h).
std::uint32_t kindOf(const std::string& driver) {
  const devices::DriverRow* row = devices::findDriver(driver);
  return static_cast<std::uint32_t>(row ? row->decoder : TALLY_DEVICE_OTHER_DRM);
}

}  // namespace

HostFacts readHostFacts(const fs::Root& sys) {
  HostFacts f;
  if (auto lsm = sys.read("kernel/security/lsm", 4096)) f.lsmList = *lsm;
  struct stat st {};
  f.btf = ::fstatat(sys.fd(), "kernel/btf/vmlinux", &st, 0) == 0;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &hdr, data) == 0) {
    bool admin = hasCap(data, kCapSysAdmin);
    f.capBpf = admin || hasCap(data, kCapBpf);
    f.capPerfmon = admin || hasCap(data, kCapPerfmon);
  }
  struct statfs fs {};
  std::string bpffs = sys.describe("fs/bpf");
  f.bpffs = ::statfs(bpffs.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kBpfFsMagic;
  return f;
}

std::vector<DeviceRule> discoverDeviceRules(const fs::Root& sys) {
  std::vector<DeviceRule> rules;
  auto map = devices::discoverDrmDevices(sys);
  if (map) {
    for (const auto& d : map->devices) {
      std::string driver;
      for (const auto& n : d.nodes)
        if (driver.empty() && n.major == devices::kDrmMajor)
          driver = drmDriverName("/dev/dri/" + n.name);
      if (driver.empty()) driver = d.driver;
      for (const auto& n : d.nodes)
        rules.push_back(
            {n.major, n.minor, kindOf(driver), devices::objectsUnchargedByMemcg(driver)});
    }
  }
  struct stat st {};
  if (::stat("/dev/kfd", &st) == 0 && S_ISCHR(st.st_mode))
    rules.push_back({::major(st.st_rdev), ::minor(st.st_rdev), TALLY_DEVICE_KFD, false});
  return rules;
}

std::optional<std::uint64_t> hostGpuMemory(const fs::Root& sys) {
  auto map = devices::discoverDrmDevices(sys);
  if (!map) return std::nullopt;
  std::optional<std::uint64_t> sum;
  for (const auto& d : map->devices)
    for (const auto& m : d.memory)
      if ((m.region == "gtt" || m.region == "vram") && m.totalBytes)
        sum = sum.value_or(0) + *m.totalBytes;
  return sum;
}

}  // namespace tally::bpf
