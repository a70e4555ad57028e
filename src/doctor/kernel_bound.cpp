#include "doctor/kernel_bound.h"

#include <fmt/format.h>

#include <algorithm>

#include "bpf/gpu_charge_abi.h"
#include "devices/driver_catalogue.h"

namespace tally::doctor {

const char* const kKernelBoundDoesNotSee =
    "not seen by the kernel charge: memory a driver allocates without a GEM object (KFD queues and "
    "event pages, some page tables), objects a driver's kernel worker makes (KFD's SVM migration), "
    "dma-buf heap imports, buffers made before a lease was armed; the sampled kill bounds what "
    "fdinfo shows of them";

namespace {

std::string kindWords(std::uint32_t kind, bool charged) {
  if (kind == TALLY_DEVICE_KFD) return "KFD's allocations decoded";
  if (const devices::DriverRow* row = devices::rowDecodedAs(kind))
    return fmt::format("{}'s allocations decoded", row->driver);
  return charged ? "objects charged, no allocation decoded" : "not charged";
}

// What the programs do with a device registered as `rule`.
void byRule(DeviceCoverage& c, const bpf::DeviceRule& rule, bool refusing) {
  const char* refusingOff = "; not refused: refusing is off (no BPF LSM)";
  if (const devices::DriverRow* decoded = devices::rowDecodedAs(rule.kind)) {
    const std::string ioctls = fmt::format("{}, dumb buffers", decoded->allocationIoctls);
    if (!rule.charged) {  // not a rule discoverDeviceRules makes; said as it is
      c.coverage = "not-charged";
      c.says = "allocations decoded, objects not charged";
    } else if (refusing) {
      c.coverage = "charged-and-refused";
      c.says = fmt::format("covered: charged and refused ({})", ioctls);
    } else {
      c.coverage = "charged-not-refused";
      c.says = fmt::format("charged ({} decoded){}", ioctls, refusingOff);
    }
    return;
  }
  if (rule.kind == TALLY_DEVICE_KFD) {
    if (refusing) {
      c.coverage = "charged-and-refused";
      c.says =
          "covered: ALLOC_MEMORY_OF_GPU refused at the bound; its buffers are charged as its "
          "GPU's objects";
    } else {
      c.coverage = "charged-not-refused";
      c.says = fmt::format("its buffers are charged as its GPU's objects{}", refusingOff);
    }
    return;
  }
  const devices::DriverRow* row = devices::findDriver(c.driver);
  const devices::ObjectMemory objects = row ? row->objects : devices::ObjectMemory::Unknown;
  if (rule.charged) {
    c.coverage = "charged-not-decoded";
    c.says = fmt::format("charged, allocations not decoded ({}: the sampled kill bounds them){}",
                         devices::chargedDriverNames("/", true),
                         refusing ? "; dumb buffers refused" : refusingOff);
  } else if (objects == devices::ObjectMemory::Shmem) {
    c.coverage = "memcg";
    c.says = "memcg charges it (shmem driver): a lease's MemoryMax bounds it";
  } else if (objects == devices::ObjectMemory::ShmemOrTtm) {
    c.coverage = "not-charged";
    c.says = fmt::format(
        "not charged: {}'s objects are shmem on an integrated part (memcg charges them); a "
        "discrete part's TTM pages are seen by fdinfo and the sampled kill only",
        c.driver);
  } else {
    c.coverage = "not-charged";
    c.says =
        "not charged: a driver tally has no memory class for (fdinfo and the sampled kill "
        "only)";
  }
}

std::optional<bpf::DeviceRule> find(const std::vector<bpf::DeviceRule>& rules, std::uint32_t major,
                                    std::uint32_t minor) {
  for (const auto& r : rules)
    if (r.major == major && r.minor == minor) return r;
  return std::nullopt;
}

// Compares the nodes' expected rules with the registered ones: sets
// c.registered, and says what is missing or stale.
void compare(DeviceCoverage& c, const std::vector<std::pair<std::string, bpf::DeviceRule>>& nodes,
             const std::optional<std::vector<bpf::DeviceRule>>& registered) {
  if (!registered) return;
  std::vector<std::string> missing, stale;
  for (const auto& [name, want] : nodes) {
    auto got = find(*registered, want.major, want.minor);
    if (!got)
      missing.push_back(name);
    else if (!(*got == want))
      stale.push_back(fmt::format("{} as {} (the host shows {})", name,
                                  kindWords(got->kind, got->charged),
                                  kindWords(want.kind, want.charged)));
  }
  c.registered = missing.empty() && stale.empty();
  if (*c.registered) return;
  c.coverage = "not-registered";
  if (!missing.empty())
    c.says = fmt::format(
        "not registered ({}): the attached programs do not see it; restart the daemon or wait for "
        "its rescan",
        fmt::join(missing, ", "));
  else
    c.says = fmt::format("registered otherwise than the host shows it now ({}): restart the daemon",
                         fmt::join(stale, "; "));
}

}  // namespace

std::vector<DeviceCoverage> judgeDevices(
    const devices::DeviceMap& devices, const std::vector<bpf::DeviceRule>& expected,
    const std::optional<std::vector<bpf::DeviceRule>>& registered, bool refusing,
    const std::string& kfdNode) {
  std::vector<DeviceCoverage> out;
  for (const auto& d : devices.devices) {
    DeviceCoverage c;
    c.device = d.key;
    std::vector<std::pair<std::string, bpf::DeviceRule>> nodes;
    for (const auto& n : d.nodes) {
      c.nodes.push_back(n.name);
      if (auto r = find(expected, n.major, n.minor)) nodes.emplace_back(n.name, *r);
    }
    const bpf::DeviceRule* rule = nodes.empty() ? nullptr : &nodes.front().second;
    const std::string played(rule ? devices::decodedDriverName(rule->kind) : "");
    c.driver = !played.empty() ? played : d.driver.empty() ? "no driver" : d.driver;
    if (!rule) {
      c.coverage = "not-charged";
      c.says = "not charged: the daemon registers none of its nodes";
    } else {
      byRule(c, *rule, refusing);
      compare(c, nodes, registered);
    }
    out.push_back(std::move(c));
  }
  for (const auto& r : expected) {
    if (r.kind != TALLY_DEVICE_KFD) continue;
    DeviceCoverage c;
    c.device = kfdNode;
    c.driver = "kfd";
    byRule(c, r, refusing);
    compare(c, {{kfdNode, r}}, registered);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<CounterLine> counterLines(const bpf::Totals& t) {
  std::vector<CounterLine> out;
  auto add = [&](const char* name, std::uint64_t v, const char* says) {
    if (v) out.push_back({name, v, says});
  };
  if (t.recursionMisses)
    add("recursion_misses", *t.recursionMisses,
        "runs of the tracing programs the kernel skipped (recursion): a charge, an uncharge or an "
        "ioctl's end unseen; an object whose creation went unseen stays charged until its lease "
        "ends (stricter, never looser), a release missed is found later (stale_objects)");
  add("stale_objects", t.staleObjects,
      "releases missed, found later at the address of a new object and uncharged then: the "
      "lease's charge was high until then");
  add("unseen_objects", t.unseenObjects,
      "allocations made whose object the charge did not see: their bytes stay charged to the "
      "lease until it ends (its bound is stricter, never looser)");
  add("stale_reservations", t.staleReservations,
      "reservations returned at the thread's next ioctl (an ioctl's end was missed): the lease's "
      "charge was high until then");
  add("insert_failed", t.insertFailed,
      "objects the kernel could not record (no kernel memory): left uncharged; fdinfo and the "
      "sampled kill see them");
  add("untracked_full", t.untrackedFull,
      "objects left uncharged because the object map was full: fdinfo and the sampled kill bound "
      "them (a bounded lease's allocation is refused instead)");
  add("orphan_uncharges", t.orphanUncharges,
      "uncharges whose lease entry was already gone: nothing left to correct");
  add("events_dropped", t.eventsDropped,
      "refusals the ring buffer had no room for: still counted per lease, but their events and "
      "journal lines are missing");
  add("contended", t.contended,
      "charge updates that lost their race too often: held high and the allocation refused "
      "(fail closed)");
  return out;
}

ChargeProbeHealth judgeChargeProbe(const coverage::ChargeProbeResult& p, bool required) {
  ChargeProbeHealth h;
  h.checkFailed = p.outcome == coverage::ChargeProbeOutcome::Failed || p.anyPathFailed();
  for (const auto& path : p.paths)
    if (coverage::pathFinding(path))
      h.degraded.push_back(fmt::format("kernel charge: {} on {}: {}",
                                       coverage::chargePathWords(path.path), path.device,
                                       coverage::pathLine(path)));
  bool proven = p.outcome == coverage::ChargeProbeOutcome::Ran && p.refusing &&
                std::any_of(p.paths.begin(), p.paths.end(),
                            [](const coverage::PathResult& x) { return x.present; });
  if (required && !proven) h.checkFailed = true;
  return h;
}

std::string roomWords(const bpf::Totals& t) {
  return fmt::format("{} objects of {} ({} per lease at most), {} leases", t.objects,
                     t.objectsCapacity, t.objectsPerLease, t.leasesCapacity);
}

std::optional<std::string> roomWarning(const bpf::Totals& t) {
  if (t.objectsCapacity == 0 || t.objects * 10 < t.objectsCapacity * 9) return std::nullopt;
  return std::string(
      "the object map is nearly full: past it a bounded lease's allocation is refused, an "
      "unbounded lease's object left uncharged (untracked_full)");
}

}  // namespace tally::doctor
