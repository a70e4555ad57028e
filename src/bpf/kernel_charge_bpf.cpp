#include "bpf/kernel_charge_bpf.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "bpf/gpu_charge_abi.h"
#include "devices/drm_devices.h"
#include "devices/memory_class.h"
#include "gpu_charge.skel.h"
#include "util/text.h"
#include "util/unique_fd.h"

namespace tally::bpf {

namespace {

constexpr unsigned kCapPerfmon = 38;  // CAP_PERFMON (5.8): linux/capability.h of 6.1 has it
constexpr unsigned kCapBpf = 39;      // CAP_BPF (5.8)
constexpr unsigned kCapSysAdmin = 21;
constexpr long kBpfFsMagic = 0xcafe4a11;  // BPF_FS_MAGIC

// The kernel's dev_t, as inode->i_rdev and device->devt hold it.
std::uint32_t kernelDev(std::uint32_t major, std::uint32_t minor) {
  return (major << 20) | (minor & 0xfffff);
}

// libbpf says why a load failed through its print callback: the last
// warnings are kept for the error message (the verifier's log can be long:
// only its tail is kept).
thread_local std::string libbpfSaid;
int keepLibbpfWarnings(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char line[512];
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(line, sizeof line, format, copy);
  va_end(copy);
  if (n > 0) {
    libbpfSaid += line;
    if (libbpfSaid.size() > 2048) libbpfSaid.erase(0, libbpfSaid.size() - 2048);
  }
  return 0;
}

// libbpf's words on the failure: its first line that names what failed (a
// map, a program, an attach) and its last, joined.
std::string lastSaid() {
  std::vector<std::string> lines;
  std::string_view rest = libbpfSaid;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    std::string line(rest.substr(0, nl));
    if (!line.empty()) lines.push_back(line);
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  if (lines.empty()) return "";
  std::string first;
  for (const auto& l : lines)
    if (first.empty() && l.find("fail") != std::string::npos) first = l;
  if (first.empty() || first == lines.back()) return lines.back();
  return first + "; " + lines.back();
}

Error bpfError(int err, std::string what) {
  std::string said = lastSaid();
  return Error{err, said.empty() ? fmt::format("{}: {}", what, std::strerror(err))
                                 : fmt::format("{}: {} ({})", what, std::strerror(err), said)};
}

class BpfCharge final : public KernelCharge {
 public:
  // The maps by fd: the skeleton's (this process loaded the programs; it
  // owns `skel`), or the pinned ones another process loaded (`skel` null).
  struct Maps {
    int charges = -1, bounds = -1, refusals = -1;
  };
  BpfCharge(tally_gpu_charge* skel, Maps maps, std::vector<UniqueFd> owned, Capabilities can)
      : skel_(skel), maps_(maps), owned_(std::move(owned)), can_(can) {}
  Status openRefusals() {
    rb_ = ring_buffer__new(maps_.refusals, &BpfCharge::onRefusal, this, nullptr);
    if (!rb_) return bpfError(errno, "cannot read the refusals' ring buffer");
    return Ok{};
  }
  ~BpfCharge() override {
    // The pinned links and maps stay: the charges and the bound outlive
    // this process (its links are dropped, their pins keep them attached).
    if (rb_) ring_buffer__free(rb_);
    if (skel_) tally_gpu_charge__destroy(skel_);
  }

  Capabilities capabilities() const override { return can_; }

  Status arm(std::uint64_t cgroupId, std::optional<std::uint64_t> boundBytes) override {
    tally_charge zero{};
    if (bpf_map_update_elem(maps_.charges, &cgroupId, &zero, BPF_NOEXIST) != 0 && errno != EEXIST)
      return errnoError(errno,
                        fmt::format("cannot arm cgroup {} for the in-kernel charge", cgroupId));
    if (boundBytes) {
      tally_bound b{*boundBytes};
      if (bpf_map_update_elem(maps_.bounds, &cgroupId, &b, BPF_ANY) != 0)
        return errnoError(errno,
                          fmt::format("cannot set cgroup {}'s bound in the kernel", cgroupId));
    } else {
      (void)bpf_map_delete_elem(maps_.bounds, &cgroupId);
    }
    return Ok{};
  }

  void disarm(std::uint64_t cgroupId) override {
    (void)bpf_map_delete_elem(maps_.bounds, &cgroupId);
    (void)bpf_map_delete_elem(maps_.charges, &cgroupId);
  }

  std::optional<LeaseCharge> read(std::uint64_t cgroupId) const override {
    tally_charge c{};
    if (bpf_map_lookup_elem(maps_.charges, &cgroupId, &c) != 0) return std::nullopt;
    return LeaseCharge{c.bytes, c.peak_bytes, c.objects, c.refused, c.refused_bytes};
  }

  std::vector<std::uint64_t> armed() const override {
    std::vector<std::uint64_t> ids;
    std::uint64_t key = 0, next = 0;
    const void* prev = nullptr;
    while (bpf_map_get_next_key(maps_.charges, prev, &next) == 0) {
      ids.push_back(next);
      key = next;
      prev = &key;
    }
    return ids;
  }

  std::vector<Refusal> refusals(std::size_t max) override {
    pending_.clear();
    max_ = max;
    if (rb_) (void)ring_buffer__consume(rb_);
    return std::move(pending_);
  }

  static int onRefusal(void* self, void* data, std::size_t size) {
    auto* me = static_cast<BpfCharge*>(self);
    if (size < sizeof(tally_refusal)) return 0;
    if (me->pending_.size() >= me->max_) return 1;  // stop: the rest wait for the next call
    tally_refusal r;
    std::memcpy(&r, data, sizeof r);
    me->pending_.push_back(
        Refusal{r.lease, r.requested_bytes, r.charged_bytes, r.max_bytes, r.pid, r.cmd});
    return 0;
  }

 private:
  tally_gpu_charge* skel_;
  Maps maps_;
  std::vector<UniqueFd> owned_;  // the pinned maps' fds, when opened from pins
  ring_buffer* rb_ = nullptr;
  Capabilities can_;
  std::vector<Refusal> pending_;
  std::size_t max_ = 0;
};

// Pins `link` at `path`, replacing what an earlier daemon pinned there: the
// new program is attached before the old one goes, so no allocation passes
// unseen in between (both charging at once is harmless: an object is
// charged once, by whichever inserts it first).
// Maps an older tally pinned with another value layout (tally_object grew a
// parent for nested leases) cannot be reused: libbpf would refuse the load
// and leave the old programs running. They go, with their pins; the charges
// start from zero (objects made before are seen by fdinfo until freed).
// Returns what it removed, for the journal.
std::vector<std::string> unpinOlderLayout(const std::string& pinDir) {
  std::vector<std::string> removed;
  UniqueFd objects(bpf_obj_get(fmt::format("{}/tally_objects", pinDir).c_str()));
  if (objects.get() < 0) return removed;
  bpf_map_info info{};
  __u32 len = sizeof info;
  if (bpf_obj_get_info_by_fd(objects.get(), &info, &len) != 0 ||
      info.value_size == sizeof(tally_object))
    return removed;
  for (const char* name :
       {"tally_objects", "tally_charges", "tally_bounds", "tally_devices", "tally_refusals"}) {
    if (::unlink(fmt::format("{}/{}", pinDir, name).c_str()) == 0) removed.emplace_back(name);
  }
  return removed;
}

Status pinReplacing(bpf_link* link, const std::string& path) {
  bpf_link* old = bpf_link__open(path.c_str());
  if (old) ::unlink(path.c_str());
  int rc = bpf_link__pin(link, path.c_str());
  int err = errno;
  if (old) bpf_link__destroy(old);
  if (rc != 0) return bpfError(err, fmt::format("cannot pin {}", path));
  return Ok{};
}

bool hasCap(const __user_cap_data_struct (&data)[2], unsigned cap) {
  return (data[cap / 32].effective >> (cap % 32)) & 1u;
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

Result<std::unique_ptr<KernelCharge>> loadKernelCharge(const LoadOptions& o) {
  libbpfSaid.clear();
  libbpf_set_print(keepLibbpfWarnings);
  if (::mkdir(o.pinDir.c_str(), 0700) != 0 && errno != EEXIST)
    return errnoError(errno, fmt::format("cannot make {}", o.pinDir));
  if (auto gone = unpinOlderLayout(o.pinDir); !gone.empty()) {
    fmt::print(stderr,
               "tally: the BPF maps pinned under {} had an older tally's layout and were removed "
               "({}): the in-kernel charges start from zero; buffers made before show in DRM "
               "fdinfo until freed\n",
               o.pinDir, fmt::join(gone, ", "));
  }
  // Spelled out: LIBBPF_OPTS is a GNU statement expression, which -Wpedantic refuses.
  bpf_object_open_opts opts{};
  opts.sz = sizeof opts;
  opts.pin_root_path = o.pinDir.c_str();
  tally_gpu_charge* skel = tally_gpu_charge__open_opts(&opts);
  if (!skel) return bpfError(errno, "cannot open the in-kernel charge's BPF object");
  auto fail = [&](Error e) -> Result<std::unique_ptr<KernelCharge>> {
    tally_gpu_charge__destroy(skel);
    return e;
  };
  if (!o.refuse) bpf_program__set_autoload(skel->progs.tally_refuse_crossing, false);
  // The compat hook, where the kernel has it (else 32-bit ioctls reach file_ioctl).
  if (!o.refuse || libbpf_find_vmlinux_btf_id("file_ioctl_compat", BPF_LSM_MAC) < 0)
    bpf_program__set_autoload(skel->progs.tally_refuse_crossing_compat, false);
  if (tally_gpu_charge__load(skel) != 0)
    return fail(bpfError(errno, "the kernel did not load the in-kernel charge"));
  for (const DeviceRule& d : o.devices) {
    std::uint32_t key = kernelDev(d.major, d.minor);
    tally_device v{d.kind, d.charged ? 1u : 0u};
    if (bpf_map__update_elem(skel->maps.tally_devices, &key, sizeof key, &v, sizeof v, BPF_ANY) !=
        0)
      return fail(errnoError(errno, fmt::format("cannot register device {}:{}", d.major, d.minor)));
  }
  struct Attach {
    bpf_program* prog;
    bpf_link** link;
    const char* pin;
  };
  Attach attach[] = {
      {skel->progs.tally_charge_object, &skel->links.tally_charge_object, "link_charge"},
      {skel->progs.tally_uncharge_object, &skel->links.tally_uncharge_object, "link_uncharge"},
      {skel->progs.tally_refuse_crossing, &skel->links.tally_refuse_crossing, "link_refuse"},
      {skel->progs.tally_refuse_crossing_compat, &skel->links.tally_refuse_crossing_compat,
       "link_refuse_compat"},
  };
  for (Attach& a : attach) {
    std::string pin = fmt::format("{}/{}", o.pinDir, a.pin);
    if (!bpf_program__autoload(a.prog)) {
      if (bpf_link* old = bpf_link__open(pin.c_str())) {
        ::unlink(pin.c_str());  // refusing was on before and is not now
        bpf_link__destroy(old);
      }
      continue;
    }
    *a.link = bpf_program__attach(a.prog);
    if (!*a.link)
      return fail(bpfError(errno, fmt::format("cannot attach {}", bpf_program__name(a.prog))));
    if (auto s = pinReplacing(*a.link, pin); !s) return fail(s.error());
  }
  BpfCharge::Maps maps{bpf_map__fd(skel->maps.tally_charges), bpf_map__fd(skel->maps.tally_bounds),
                       bpf_map__fd(skel->maps.tally_refusals)};
  auto charge = std::make_unique<BpfCharge>(skel, maps, std::vector<UniqueFd>{},
                                            Capabilities{true, o.refuse});
  if (auto s = charge->openRefusals(); !s) return s.error();
  return std::unique_ptr<KernelCharge>(std::move(charge));
}

Result<std::unique_ptr<KernelCharge>> openPinnedKernelCharge(const std::string& pinDir) {
  auto link = fmt::format("{}/link_charge", pinDir);
  if (::access(link.c_str(), F_OK) != 0)
    return Error{ENOENT, fmt::format("no programs are attached ({} is absent)", link)};
  std::vector<UniqueFd> fds;
  auto open = [&](const char* name) -> int {
    int fd = bpf_obj_get(fmt::format("{}/{}", pinDir, name).c_str());
    if (fd >= 0) fds.emplace_back(fd);
    return fd;
  };
  BpfCharge::Maps maps{open("tally_charges"), open("tally_bounds"), open("tally_refusals")};
  if (maps.charges < 0 || maps.bounds < 0 || maps.refusals < 0)
    return errnoError(errno, fmt::format("cannot open the maps pinned under {}", pinDir));
  bool refusing = ::access(fmt::format("{}/link_refuse", pinDir).c_str(), F_OK) == 0;
  auto charge =
      std::make_unique<BpfCharge>(nullptr, maps, std::move(fds), Capabilities{true, refusing});
  if (auto s = charge->openRefusals(); !s) return s.error();
  return std::unique_ptr<KernelCharge>(std::move(charge));
}

Started startKernelCharge(const fs::Root& sys, LoadOptions o, bool loadOnly) {
  Started st;
  HostFacts facts = readHostFacts(sys);
  st.verdict = assess(facts);
  // Programs another process attached for this daemon (the hardened unit's
  // privileged ExecStartPre, `tally daemon load-kernel-charge`): their
  // maps need CAP_BPF alone. Loading here needs CAP_SYS_ADMIN besides
  // (libbpf lists the kernel's module BTF to attach to drm's functions).
  auto usePinned = [&]() -> bool {
    if (loadOnly || !facts.capBpf || !facts.btf || !facts.bpffs) return false;
    auto pinned = openPinnedKernelCharge(o.pinDir);
    if (!pinned) return false;
    st.charge = std::move(*pinned);
    st.verdict.can = st.charge->capabilities();
    st.verdict.why = st.verdict.can.refusing
                         ? ""
                         : "refusing off: the programs attached for this daemon do not refuse (" +
                               (facts.lsmList && !lsmListHasBpf(*facts.lsmList)
                                    ? std::string("the BPF LSM is not active: add lsm=") +
                                          std::string(text::trim(*facts.lsmList)) +
                                          ",bpf to the kernel command line)"
                                    : std::string("see the journal of its ExecStartPre)"));
    return true;
  };
  if (!st.verdict.can.charging) {
    usePinned();
    return st;
  }
  // Nothing to charge: programs attached to every ioctl of the host would
  // watch no device. Loaded when a GPU is there (a restart after hot-plug).
  if (std::none_of(o.devices.begin(), o.devices.end(),
                   [](const DeviceRule& d) { return d.charged || d.kind == TALLY_DEVICE_KFD; })) {
    st.verdict.can = {};
    st.verdict.why =
        "no GPU device here whose buffers the memory cgroup does not charge (amdgpu, xe, ...): "
        "nothing to charge; restart the daemon once one is present";
    return st;
  }
  o.refuse = st.verdict.can.refusing;
  auto loaded = loadKernelCharge(o);
  if (loaded) {
    st.charge = std::move(*loaded);
    return st;
  }
  if (usePinned()) return st;
  facts.loadError = loaded.error().message;
  st.verdict = assess(facts);
  return st;
}

namespace {

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

std::uint32_t kindOf(const std::string& driver) {
  if (driver == "amdgpu") return TALLY_DEVICE_AMDGPU;
  if (driver == "xe") return TALLY_DEVICE_XE;
  if (driver == "tally_testdrm") return TALLY_DEVICE_TESTDRM;
  return TALLY_DEVICE_OTHER_DRM;
}

}  // namespace

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

}  // namespace tally::bpf
