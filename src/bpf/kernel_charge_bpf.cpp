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
#include <ctime>
#include <set>

#include "bpf/gpu_charge_abi.h"
#include "bpf/sizing.h"
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

// Every map by fd, and the tracing programs' ids (for their recursion misses).
struct Maps {
  int leases = -1, charges = -1, totals = -1, state = -1, devices = -1, refusals = -1;
  std::vector<std::uint32_t> tracingProgs;
};

template <typename V>
std::vector<std::pair<std::uint64_t, V>> entries(int fd) {
  std::vector<std::pair<std::uint64_t, V>> out;
  std::uint64_t key = 0, next = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    V v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0) out.emplace_back(next, v);
    key = next;
    prev = &key;
  }
  return out;
}

// An ended lease whose buffers are all freed: no object left, and what it
// still has charged is only the unseen (nothing will uncharge those).
bool holdsNothing(const tally_charge& c) { return c.objects == 0 && c.bytes <= c.unseen_bytes; }

LeaseCharge fromKernel(const tally_charge& c) {
  return LeaseCharge{c.bytes,         c.peak_bytes,       c.objects,     c.refused,
                     c.refused_bytes, c.refused_failsafe, c.untracked,   c.underflows,
                     c.moved_in,      c.extra_bytes,      c.unseen_bytes};
}

class BpfCharge final : public KernelCharge {
 public:
  // The maps by fd: the skeleton's (this process loaded the programs; it
  // owns `skel`), or the pinned ones another process loaded (`skel` null).
  BpfCharge(tally_gpu_charge* skel, Maps maps, std::vector<UniqueFd> owned, Capabilities can,
            Sizing room)
      : skel_(skel), maps_(std::move(maps)), owned_(std::move(owned)), can_(can), room_(room) {}
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

  Status arm(std::uint64_t cgroupId, const ArmSpec& spec) override {
    // An ended lease's buffers are counted in its parent: carried into a
    // lease under another parent, they would be in neither that parent's
    // charge nor its pools'.
    tally_lease before{};
    tally_charge held{};
    if (bpf_map_lookup_elem(maps_.leases, &cgroupId, &before) == 0 &&
        bpf_map_lookup_elem(maps_.charges, &cgroupId, &held) == 0 && !holdsNothing(held) &&
        before.parent != spec.parent)
      return Error{EBUSY,
                   fmt::format("cgroup {} still holds {} bytes in {} GPU buffers charged under {} "
                               "(an earlier lease of it): attach it {} again, or once they are "
                               "freed",
                               cgroupId, held.bytes, held.objects,
                               before.parent ? fmt::format("parent lease cgroup {}", before.parent)
                                             : std::string("no parent lease"),
                               before.parent ? "under that parent" : "without a parent")};
    candidates_.erase(cgroupId);
    // The charge first: the programs take a lease entry to be armed only
    // once its charge exists. One already there is carried.
    tally_charge zero{};
    bool made = bpf_map_update_elem(maps_.charges, &cgroupId, &zero, BPF_NOEXIST) == 0;
    if (!made && errno != EEXIST) return armError(cgroupId, errno);
    tally_lease l{};
    l.max_bytes = spec.boundBytes ? *spec.boundBytes : TALLY_UNBOUNDED;
    l.max_objects = spec.maxObjects ? spec.maxObjects : room_.objectsPerLease;
    l.parent = spec.parent;
    if (bpf_map_update_elem(maps_.leases, &cgroupId, &l, BPF_ANY) != 0) {
      int err = errno;
      if (made) (void)bpf_map_delete_elem(maps_.charges, &cgroupId);
      return armError(cgroupId, err);
    }
    return Ok{};
  }

  void retire(std::uint64_t cgroupId) override {
    tally_lease l{};
    if (bpf_map_lookup_elem(maps_.leases, &cgroupId, &l) != 0) {
      (void)bpf_map_delete_elem(maps_.charges, &cgroupId);
      return;
    }
    l.flags |= TALLY_LEASE_ENDED;
    l.max_bytes = TALLY_UNBOUNDED;
    (void)bpf_map_update_elem(maps_.leases, &cgroupId, &l, BPF_EXIST);
    // Never deleted here: a hook that found the lease an instant before may
    // be reserving on it now. reap() deletes it once seen holding nothing twice.
  }

  // An ended entry holding nothing goes at the second call that sees it so
  // (the daemon calls every few seconds): no program can still be reserving
  // on it by then (the hook reserves within microseconds of its lookup).
  std::vector<std::uint64_t> reap() override {
    std::vector<std::uint64_t> gone;
    std::set<std::uint64_t> seen;
    for (const auto& [id, l] : entries<tally_lease>(maps_.leases)) {
      if (!(l.flags & TALLY_LEASE_ENDED)) continue;
      tally_charge c{};
      if (bpf_map_lookup_elem(maps_.charges, &id, &c) == 0 && !holdsNothing(c)) continue;
      if (!candidates_.count(id)) {
        seen.insert(id);
        continue;
      }
      forget(id);
      gone.push_back(id);
    }
    candidates_ = std::move(seen);
    return gone;
  }

  std::vector<Ended> ended() const override {
    std::vector<Ended> out;
    for (const auto& [id, l] : entries<tally_lease>(maps_.leases)) {
      if (!(l.flags & TALLY_LEASE_ENDED)) continue;
      tally_charge c{};
      if (bpf_map_lookup_elem(maps_.charges, &id, &c) != 0 || holdsNothing(c)) continue;
      out.push_back(Ended{id, l.parent, fromKernel(c)});
    }
    return out;
  }

  std::optional<LeaseCharge> read(std::uint64_t cgroupId) const override {
    tally_charge c{};
    if (bpf_map_lookup_elem(maps_.charges, &cgroupId, &c) != 0) return std::nullopt;
    return fromKernel(c);
  }

  std::vector<std::uint64_t> armed() const override {
    std::vector<std::uint64_t> ids;
    for (const auto& [id, l] : entries<tally_lease>(maps_.leases))
      if (!(l.flags & TALLY_LEASE_ENDED)) ids.push_back(id);
    return ids;
  }

  std::vector<Refusal> refusals(std::size_t max) override {
    pending_.clear();
    max_ = max;
    if (rb_) (void)ring_buffer__consume(rb_);
    return std::move(pending_);
  }

  Totals totals() const override {
    Totals t;
    t.objectsCapacity = room_.objects;
    t.leasesCapacity = room_.leases;
    t.objectsPerLease = room_.objectsPerLease;
    std::uint32_t zero = 0;
    tally_totals k{};
    if (bpf_map_lookup_elem(maps_.totals, &zero, &k) == 0) {
      t.objects = k.objects;
      t.staleObjects = k.stale_objects;
      t.insertFailed = k.insert_failed;
      t.untrackedFull = k.untracked_full;
      t.staleReservations = k.stale_reservations;
      t.orphanUncharges = k.orphan_uncharges;
      t.eventsDropped = k.events_dropped;
      t.contended = k.contended;
      t.unseenObjects = k.unseen_objects;
    }
    std::uint64_t misses = 0;
    bool read = !maps_.tracingProgs.empty();
    for (std::uint32_t id : maps_.tracingProgs) {
      UniqueFd prog(bpf_prog_get_fd_by_id(id));
      bpf_prog_info info{};
      __u32 len = sizeof info;
      if (!prog.valid() || bpf_obj_get_info_by_fd(prog.get(), &info, &len) != 0) {
        read = false;
        break;
      }
      misses += info.recursion_misses;
    }
    if (read) t.recursionMisses = misses;
    return t;
  }

  Result<std::size_t> addDevices(const std::vector<DeviceRule>& rules) override {
    std::size_t added = 0;
    for (const DeviceRule& d : rules) {
      std::uint32_t key = kernelDev(d.major, d.minor);
      tally_device v{d.kind, d.charged ? 1u : 0u};
      // A node number reused by another device (a driver reloaded, an eGPU
      // where another was) takes the new device's kind.
      tally_device was{};
      bool known = bpf_map_lookup_elem(maps_.devices, &key, &was) == 0;
      if (known && was.kind == v.kind && was.charged == v.charged) continue;
      if (bpf_map_update_elem(maps_.devices, &key, &v, BPF_ANY) != 0)
        return errnoError(errno, fmt::format("cannot register device {}:{}", d.major, d.minor));
      ++added;
    }
    return added;
  }

  std::vector<DeviceRule> devices() const override {
    std::vector<DeviceRule> out;
    std::uint32_t key = 0, next = 0;
    const void* prev = nullptr;
    while (bpf_map_get_next_key(maps_.devices, prev, &next) == 0) {
      tally_device v{};
      if (bpf_map_lookup_elem(maps_.devices, &next, &v) == 0)
        out.push_back({next >> 20, next & 0xfffff, v.kind, v.charged != 0});
      key = next;
      prev = &key;
    }
    return out;
  }

  static int onRefusal(void* self, void* data, std::size_t size) {
    auto* me = static_cast<BpfCharge*>(self);
    if (size < sizeof(tally_refusal)) return 0;
    if (me->pending_.size() >= me->max_) return 1;  // stop: the rest wait for the next call
    tally_refusal r;
    std::memcpy(&r, data, sizeof r);
    me->pending_.push_back(
        Refusal{r.lease, r.requested_bytes, r.charged_bytes, r.max_bytes, r.pid, r.cmd, r.reason});
    return 0;
  }

 private:
  Error armError(std::uint64_t cgroupId, int err) const {
    if (err == E2BIG)
      return Error{err, fmt::format("the in-kernel charge has no room for cgroup {}: its {} lease "
                                    "entries are taken (armed leases, and ended ones whose "
                                    "buffers live on); end leases, or restart the daemon with "
                                    "fewer queued requests allowed",
                                    cgroupId, room_.leases)};
    return errnoError(err, fmt::format("cannot arm cgroup {} for the in-kernel charge", cgroupId));
  }
  void forget(std::uint64_t cgroupId) {
    (void)bpf_map_delete_elem(maps_.leases, &cgroupId);
    (void)bpf_map_delete_elem(maps_.charges, &cgroupId);
  }

  tally_gpu_charge* skel_;
  Maps maps_;
  std::vector<UniqueFd> owned_;  // the pinned maps' fds, when opened from pins
  ring_buffer* rb_ = nullptr;
  Capabilities can_;
  Sizing room_;
  std::set<std::uint64_t> candidates_;  // ended, holding nothing at the last reap()
  std::vector<Refusal> pending_;
  std::size_t max_ = 0;
};

// The names every map is pinned under, and the link pins.
constexpr const char* kMapNames[] = {"tally_devices",  "tally_leases",  "tally_charges",
                                     "tally_objects",  "tally_totals",  "tally_state",
                                     "tally_inflight", "tally_refusals"};

// Maps an older tally pinned with another layout cannot be reused: libbpf
// would refuse the load and leave the old programs running. They go, with
// their pins; the charges start from zero (objects made before are seen by
// fdinfo until freed). Returns what it removed, for the journal.
std::vector<std::string> unpinOlderLayout(const std::string& pinDir) {
  struct Want {
    const char* name;
    __u32 valueSize;
  };
  const Want want[] = {{"tally_inflight", 48},
                       {"tally_leases", sizeof(tally_lease)},
                       {"tally_charges", sizeof(tally_charge)},
                       {"tally_objects", sizeof(tally_object)},
                       {"tally_totals", sizeof(tally_totals)},
                       {"tally_state", sizeof(tally_state)}};
  bool any = false, same = true;
  for (const Want& w : want) {
    UniqueFd fd(bpf_obj_get(fmt::format("{}/{}", pinDir, w.name).c_str()));
    if (!fd.valid()) {
      same = false;
      continue;
    }
    any = true;
    bpf_map_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) != 0 || info.value_size != w.valueSize)
      same = false;
  }
  // An older layout's own maps (tally_bounds went in layout 2).
  bool older = ::access(fmt::format("{}/tally_bounds", pinDir).c_str(), F_OK) == 0;
  std::vector<std::string> removed;
  if ((!any || same) && !older) return removed;
  for (const char* name : kMapNames)
    if (::unlink(fmt::format("{}/{}", pinDir, name).c_str()) == 0) removed.emplace_back(name);
  for (const char* name : {"tally_bounds", "tally_uncounted"})
    if (::unlink(fmt::format("{}/{}", pinDir, name).c_str()) == 0) removed.emplace_back(name);
  return removed;
}

// The room a pinned map was made with (0: none pinned).
std::uint32_t pinnedMaxEntries(const std::string& pinDir, const char* name) {
  UniqueFd fd(bpf_obj_get(fmt::format("{}/{}", pinDir, name).c_str()));
  if (!fd.valid()) return 0;
  bpf_map_info info{};
  __u32 len = sizeof info;
  return bpf_obj_get_info_by_fd(fd.get(), &info, &len) == 0 ? info.max_entries : 0;
}

// Pins `link` at `path`, replacing what an earlier daemon pinned there. The
// caller made the new programs the active ones first, so both being
// attached for a moment is harmless (only the active generation acts).
Status pinReplacing(bpf_link* link, const std::string& path) {
  bpf_link* old = bpf_link__open(path.c_str());
  if (old) ::unlink(path.c_str());
  int rc = bpf_link__pin(link, path.c_str());
  int err = errno;
  // Not pinned: the old link goes back where it was (still attached while
  // this process held it open), so the old programs stay.
  if (rc != 0 && old) (void)bpf_link__pin(old, path.c_str());
  if (old) bpf_link__destroy(old);
  if (rc != 0) return bpfError(err, fmt::format("cannot pin {}", path));
  return Ok{};
}

// The id of the program a pinned link runs.
std::optional<std::uint32_t> linkedProgram(const std::string& pin) {
  UniqueFd link(bpf_obj_get(pin.c_str()));
  if (!link.valid()) return std::nullopt;
  bpf_link_info info{};
  __u32 len = sizeof info;
  if (bpf_obj_get_info_by_fd(link.get(), &info, &len) != 0) return std::nullopt;
  return info.prog_id;
}

// The tracing programs' link pins (their runs can be skipped: recursion misses).
constexpr const char* kTracingLinks[] = {"link_charge",         "link_uncharge",
                                         "link_ioctl_done",     "link_ioctl_done_compat",
                                         "link_ioctl_done_x32", "link_moved_in"};

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
  // The room: pinned maps keep theirs (libbpf reuses a pinned map only when
  // it matches), new ones get the host's.
  Sizing room = o.sizing;
  if (auto n = pinnedMaxEntries(o.pinDir, "tally_objects")) room.objects = n;
  if (auto n = pinnedMaxEntries(o.pinDir, "tally_leases")) room.leases = n;
  room.objectsPerLease = std::min(room.objectsPerLease, room.objects);
  bpf_map__set_max_entries(skel->maps.tally_objects, static_cast<__u32>(room.objects));
  bpf_map__set_max_entries(skel->maps.tally_leases, static_cast<__u32>(room.leases));
  bpf_map__set_max_entries(skel->maps.tally_charges, static_cast<__u32>(room.leases));
  skel->rodata->tally_objects_capacity = room.objects;
  // This load's generation: nonzero, and another load's never (the clock moves).
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const std::uint64_t generation = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL +
                                   static_cast<std::uint64_t>(now.tv_nsec) + 1;
  skel->rodata->tally_generation = generation;
  if (!o.refuse) {
    bpf_program__set_autoload(skel->progs.tally_refuse_crossing, false);
    bpf_program__set_autoload(skel->progs.tally_refuse_crossing_compat, false);
  }
  // The compat hook and the compat syscall, where the kernel has them (else
  // 32-bit ioctls reach file_ioctl, and there is no 32-bit syscall to end).
  if (libbpf_find_vmlinux_btf_id("file_ioctl_compat", BPF_LSM_MAC) < 0)
    bpf_program__set_autoload(skel->progs.tally_refuse_crossing_compat, false);
  if (libbpf_find_vmlinux_btf_id("__ia32_compat_sys_ioctl", BPF_TRACE_FEXIT) < 0)
    bpf_program__set_autoload(skel->progs.tally_ioctl_done_compat, false);
  if (libbpf_find_vmlinux_btf_id("__x64_compat_sys_ioctl", BPF_TRACE_FEXIT) < 0)
    bpf_program__set_autoload(skel->progs.tally_ioctl_done_x32, false);
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
      {skel->progs.tally_ioctl_done, &skel->links.tally_ioctl_done, "link_ioctl_done"},
      {skel->progs.tally_ioctl_done_compat, &skel->links.tally_ioctl_done_compat,
       "link_ioctl_done_compat"},
      {skel->progs.tally_ioctl_done_x32, &skel->links.tally_ioctl_done_x32, "link_ioctl_done_x32"},
      {skel->progs.tally_moved_in, &skel->links.tally_moved_in, "link_moved_in"},
      {skel->progs.tally_refuse_crossing, &skel->links.tally_refuse_crossing, "link_refuse"},
      {skel->progs.tally_refuse_crossing_compat, &skel->links.tally_refuse_crossing_compat,
       "link_refuse_compat"},
  };
  // Attached first, inactive: the programs an earlier daemon attached act
  // until the generation below turns, then these do; never both, never none.
  for (Attach& a : attach) {
    if (!bpf_program__autoload(a.prog)) continue;
    *a.link = bpf_program__attach(a.prog);
    if (!*a.link)
      return fail(bpfError(errno, fmt::format("cannot attach {}", bpf_program__name(a.prog))));
  }
  std::uint32_t zero = 0;
  tally_state before{};
  (void)bpf_map__lookup_elem(skel->maps.tally_state, &zero, sizeof zero, &before, sizeof before, 0);
  tally_state state{generation};
  if (bpf_map__update_elem(skel->maps.tally_state, &zero, sizeof zero, &state, sizeof state,
                           BPF_ANY) != 0)
    return fail(errnoError(errno, "cannot make the new programs active"));
  // A pin that fails leaves the old programs pinned and attached: they act
  // again (this load's links go with it).
  auto failActive = [&](Error e) {
    (void)bpf_map__update_elem(skel->maps.tally_state, &zero, sizeof zero, &before, sizeof before,
                               BPF_ANY);
    return fail(std::move(e));
  };
  for (Attach& a : attach) {
    std::string pin = fmt::format("{}/{}", o.pinDir, a.pin);
    if (!bpf_program__autoload(a.prog)) {
      if (bpf_link* old = bpf_link__open(pin.c_str())) {
        ::unlink(pin.c_str());  // refusing (or the compat hook) was on before and is not now
        bpf_link__destroy(old);
      }
      continue;
    }
    if (auto s = pinReplacing(*a.link, pin); !s) return failActive(s.error());
  }
  Maps maps{bpf_map__fd(skel->maps.tally_leases),
            bpf_map__fd(skel->maps.tally_charges),
            bpf_map__fd(skel->maps.tally_totals),
            bpf_map__fd(skel->maps.tally_state),
            bpf_map__fd(skel->maps.tally_devices),
            bpf_map__fd(skel->maps.tally_refusals),
            {}};
  for (const char* link : kTracingLinks)
    if (auto id = linkedProgram(fmt::format("{}/{}", o.pinDir, link)))
      maps.tracingProgs.push_back(*id);
  auto charge = std::make_unique<BpfCharge>(skel, std::move(maps), std::vector<UniqueFd>{},
                                            Capabilities{true, o.refuse}, room);
  if (auto s = charge->openRefusals(); !s) return s.error();
  return std::unique_ptr<KernelCharge>(std::move(charge));
}

Result<std::unique_ptr<KernelCharge>> openPinnedKernelCharge(const std::string& pinDir) {
  auto link = fmt::format("{}/link_charge", pinDir);
  if (::access(link.c_str(), F_OK) != 0)
    return Error{ENOENT, fmt::format("no programs are attached ({} is absent)", link)};
  if (::access(fmt::format("{}/tally_bounds", pinDir).c_str(), F_OK) == 0)
    return Error{ENOENT, fmt::format("the programs under {} are an older tally's: load this "
                                     "one's (tally daemon load-kernel-charge)",
                                     pinDir)};
  std::vector<UniqueFd> fds;
  auto open = [&](const char* name) -> int {
    int fd = bpf_obj_get(fmt::format("{}/{}", pinDir, name).c_str());
    if (fd >= 0) fds.emplace_back(fd);
    return fd;
  };
  Maps maps{open("tally_leases"),
            open("tally_charges"),
            open("tally_totals"),
            open("tally_state"),
            open("tally_devices"),
            open("tally_refusals"),
            {}};
  if (maps.leases < 0 || maps.charges < 0 || maps.totals < 0 || maps.state < 0 ||
      maps.devices < 0 || maps.refusals < 0)
    return errnoError(errno, fmt::format("cannot open the maps pinned under {}", pinDir));
  for (const char* l : kTracingLinks)
    if (auto id = linkedProgram(fmt::format("{}/{}", pinDir, l))) maps.tracingProgs.push_back(*id);
  Sizing room;
  room.objects = pinnedMaxEntries(pinDir, "tally_objects");
  room.leases = pinnedMaxEntries(pinDir, "tally_leases");
  room.objectsPerLease = std::min<std::uint64_t>(kDefaultObjectsPerLease, room.objects);
  bool refusing = ::access(fmt::format("{}/link_refuse", pinDir).c_str(), F_OK) == 0;
  auto charge = std::make_unique<BpfCharge>(nullptr, std::move(maps), std::move(fds),
                                            Capabilities{true, refusing}, room);
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
  // Loaded with no GPU device too: one that appears later (an eGPU, a
  // driver loaded late) is registered by the daemon's rescan, and the
  // programs cost an ioctl of another device one lookup of its number.
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
