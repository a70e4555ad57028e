#include "bpf/bpf_charge.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "bpf/gpu_charge_abi.h"
#include "bpf/libbpf_log.h"
#include "gpu_charge.skel.h"

namespace tally::bpf {

namespace {

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
  BpfCharge(tally_gpu_charge* skel, ChargeMaps maps, std::vector<UniqueFd> owned, Capabilities can,
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
      return Error{err, fmt::format("the kernel charge has no room for cgroup {}: its {} lease "
                                    "entries are taken (armed leases, and ended ones whose "
                                    "buffers live on); end leases, or restart the daemon with "
                                    "fewer queued requests allowed",
                                    cgroupId, room_.leases)};
    return errnoError(err, fmt::format("cannot arm cgroup {} for the kernel charge", cgroupId));
  }
  void forget(std::uint64_t cgroupId) {
    (void)bpf_map_delete_elem(maps_.leases, &cgroupId);
    (void)bpf_map_delete_elem(maps_.charges, &cgroupId);
  }

  tally_gpu_charge* skel_;
  ChargeMaps maps_;
  std::vector<UniqueFd> owned_;  // the pinned maps' fds, when opened from pins
  ring_buffer* rb_ = nullptr;
  Capabilities can_;
  Sizing room_;
  std::set<std::uint64_t> candidates_;  // ended, holding nothing at the last reap()
  std::vector<Refusal> pending_;
  std::size_t max_ = 0;
};

}  // namespace

Result<std::unique_ptr<KernelCharge>> chargeOverMaps(tally_gpu_charge* skel, ChargeMaps maps,
                                                     std::vector<UniqueFd> owned, Capabilities can,
                                                     Sizing room) {
  auto charge = std::make_unique<BpfCharge>(skel, std::move(maps), std::move(owned), can, room);
  if (auto s = charge->openRefusals(); !s) return s.error();
  return std::unique_ptr<KernelCharge>(std::move(charge));
}

}  // namespace tally::bpf
