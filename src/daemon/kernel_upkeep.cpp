#include "daemon/kernel_upkeep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <syslog.h>

#include <algorithm>
#include <set>

#include "bpf/kernel_charge_bpf.h"
#include "ledger/kinds.h"
#include "util/clock.h"
#include "util/units.h"

namespace tally::daemon {

namespace {

using json = nlohmann::json;

// Nothing left but unseen bytes (no object will ever uncharge those).
bool holdsNothing(const bpf::LeaseCharge& c) { return c.objects == 0 && c.bytes <= c.unseenBytes; }

std::string who(const KernelUpkeep::Ended& e) {
  if (e.lease.empty()) return fmt::format("an ended lease (cgroup id {})", e.cgroupId);
  return fmt::format("lease {} ({})", e.lease, e.name);
}

// Where an ended lease's buffers count while they live.
std::string countsAgainst(const KernelUpkeep::Ended& e) {
  if (!e.parent.empty()) return fmt::format("its parent lease {}", e.parent);
  if (e.parentCgroup) return fmt::format("its parent lease (cgroup id {})", e.parentCgroup);
  if (!e.pools.empty()) return fmt::format("pool {}'s GPU budget", fmt::join(e.pools, ", "));
  return "the host's GPU memory";
}

// The programs' counters that say something was not done exactly, with
// what each means for the bound.
struct Anomaly {
  const char* name;
  std::uint64_t bpf::Totals::*field;
  const char* meaning;
};
constexpr Anomaly kAnomalies[] = {
    {"stale-objects", &bpf::Totals::staleObjects,
     "releases the programs missed, found when the address was reused (charged too long)"},
    {"unseen-objects", &bpf::Totals::unseenObjects,
     "allocations made while the charge program could not run: their bytes stay charged to the "
     "lease until it ends (it may be refused early, never over its bound)"},
    {"stale-reservations", &bpf::Totals::staleReservations,
     "ioctl ends the programs missed, settled at the thread's next ioctl"},
    {"insert-failed", &bpf::Totals::insertFailed,
     "objects the object map could not take (kernel memory): uncharged, fdinfo's floor sees them"},
    {"untracked-map-full", &bpf::Totals::untrackedFull,
     "objects of unbounded leases left uncharged because the object map was full"},
    {"orphan-uncharges", &bpf::Totals::orphanUncharges,
     "objects freed after their lease's entry went"},
    {"events-dropped", &bpf::Totals::eventsDropped,
     "refusals the ring buffer had no room for (still counted per lease)"},
    {"contended", &bpf::Totals::contended,
     "charge updates that lost their race too often (left high, never low)"},
};

}  // namespace

void KernelUpkeep::retire(const Lease& l, std::uint64_t parentCgroup) {
  if (!charge_ || !l.metering().kernelArmed) return;
  const std::uint64_t id = l.metering().kernelArmed;
  auto c = charge_->read(id);
  charge_->retire(id);
  if (!c || holdsNothing(*c)) return;
  Ended e{id,           l.id,     l.name(),   l.req.pools,        l.parent,
          parentCgroup, c->bytes, c->objects, clock::realtimeNs()};
  ended_[id] = e;
  say(e, "ended-holding", e.endedAtNs);
}

void KernelUpkeep::recover(const std::vector<std::uint64_t>& claimed) {
  if (!charge_) return;
  std::set<std::uint64_t> mine(claimed.begin(), claimed.end());
  for (std::uint64_t id : charge_->armed())
    if (!mine.count(id)) charge_->retire(id);
  // Who each ended entry was, from the ledger's rows: the last word per cgroup.
  std::map<std::uint64_t, json> named;
  if (auto rows = ledger_.events(std::string())) {
    for (const auto& r : *rows) {
      if (r.kind != ledger::kGpuResidue) continue;
      json b = json::parse(r.body, nullptr, false);
      if (!b.is_object() || !b["cgroup_id"].is_number_unsigned()) continue;
      std::uint64_t cg = b["cgroup_id"].get<std::uint64_t>();
      if (b.value("event", "") == "freed")
        named.erase(cg);
      else
        named[cg] = std::move(b);
    }
  }
  for (const auto& k : charge_->ended()) {
    Ended e;
    e.cgroupId = k.cgroupId;
    e.parentCgroup = k.parent;
    e.bytes = k.charge.bytes;
    e.objects = k.charge.objects;
    if (auto it = named.find(k.cgroupId); it != named.end()) {
      const json& b = it->second;
      e.lease = b.value("lease", "");
      e.name = b.value("name", "");
      e.parent = b.value("parent", "");
      if (b["pools"].is_array())
        for (const auto& p : b["pools"])
          if (p.is_string()) e.pools.push_back(p.get<std::string>());
      if (b["at_ns"].is_number_unsigned()) e.endedAtNs = b["at_ns"].get<std::uint64_t>();
    }
    ended_[k.cgroupId] = std::move(e);
  }
}

bool KernelUpkeep::tick(std::uint64_t nowMonoUs, std::uint64_t nowNs) {
  if (!charge_ || nowMonoUs < nextUs_) return false;
  nextUs_ = nowMonoUs + kRefreshUs;
  // Freed: said for the leases known to have ended holding buffers (a lease
  // that ended holding none is reaped silently).
  for (std::uint64_t id : charge_->reap()) {
    auto it = ended_.find(id);
    if (it == ended_.end()) continue;
    Ended e = it->second;
    e.bytes = e.objects = 0;
    say(e, "freed", nowNs);
    ended_.erase(it);
  }
  // The rest refreshed. One holding nothing now waits for its reap (above,
  // at a later tick); one armed again meanwhile (a lease attached to the
  // same cgroup carries its charge) is no longer an ended one.
  std::set<std::uint64_t> still;
  for (const auto& k : charge_->ended()) {
    still.insert(k.cgroupId);
    Ended& e = ended_[k.cgroupId];
    e.cgroupId = k.cgroupId;
    if (!e.parentCgroup) e.parentCgroup = k.parent;
    e.bytes = k.charge.bytes;
    e.objects = k.charge.objects;
  }
  std::set<std::uint64_t> armedAgain;
  for (std::uint64_t id : charge_->armed()) armedAgain.insert(id);
  for (auto it = ended_.begin(); it != ended_.end();) {
    if (still.count(it->first)) {
      ++it;
    } else if (armedAgain.count(it->first) || !charge_->read(it->first)) {
      it = ended_.erase(it);
    } else {
      it->second.bytes = it->second.objects = 0;  // freed: said when reaped
      ++it;
    }
  }
  readAnomalies(nowMonoUs);
  rescanDevices();
  return true;
}

std::uint64_t KernelUpkeep::poolResidue(const std::string& pool) const {
  std::uint64_t sum = 0;
  for (const auto& [id, e] : ended_) {
    // A child's bytes are in its parent's charge (and in the parent's entry
    // once the parent ended too): only top-level leases count for a pool.
    if (!e.parent.empty() || e.parentCgroup) continue;
    if (std::find(e.pools.begin(), e.pools.end(), pool) == e.pools.end()) continue;
    sum = e.bytes > UINT64_MAX - sum ? UINT64_MAX : sum + e.bytes;
  }
  return sum;
}

void KernelUpkeep::say(const Ended& e, const char* event, std::uint64_t nowNs) {
  json body = {{"event", event},   {"lease", e.lease},     {"name", e.name},
               {"pools", e.pools}, {"parent", e.parent},   {"cgroup_id", e.cgroupId},
               {"bytes", e.bytes}, {"objects", e.objects}, {"at_ns", nowNs}};
  if (auto r = ledger_.appendEvent("", ledger::kGpuResidue,
                                   body.dump(-1, ' ', false, json::error_handler_t::replace));
      !r) {
    events_.note(LOG_ERR, fmt::format("the ledger refused a gpu-residue row ({}): {}",
                                      r.error().message, body.dump()));
  }
  std::string message =
      std::string(event) == "freed"
          ? fmt::format("the GPU buffers {} created are freed", who(e))
          : fmt::format(
                "{} ended holding {} in {} GPU buffer{} it created; they stay counted "
                "against {} until freed (tally leases shows them)",
                who(e), units::humanBytes(e.bytes), e.objects, e.objects == 1 ? "" : "s",
                countsAgainst(e));
  events_.note(5, message,
               {{"TALLY_EVENT", std::string("gpu-residue-") + event},
                {"TALLY_LEASE", e.lease},
                {"TALLY_GPU_BYTES", std::to_string(e.bytes)}});
}

void KernelUpkeep::readAnomalies(std::uint64_t nowMonoUs) {
  totals_ = charge_->totals();
  if (!totalsSaid_) {
    // Counts since the maps were made (they outlive daemons): what grows
    // from now on is said.
    totalsSaid_ = totals_;
    lastSaidUs_ = nowMonoUs;
    return;
  }
  if (nowMonoUs < lastSaidUs_ + kAnomalySayUs) return;
  std::vector<std::string> grew;
  for (const Anomaly& a : kAnomalies) {
    std::uint64_t now = (*totals_).*a.field, then = (*totalsSaid_).*a.field;
    if (now > then) grew.push_back(fmt::format("{} {} ({})", now - then, a.name, a.meaning));
  }
  std::uint64_t misses = totals_->recursionMisses.value_or(0);
  std::uint64_t missesThen = totalsSaid_->recursionMisses.value_or(0);
  if (misses > missesThen)
    grew.push_back(
        fmt::format("{} recursion-misses (runs of the charge programs the kernel "
                    "skipped on a CPU where the program was already running)",
                    misses - missesThen));
  if (grew.empty()) return;
  totalsSaid_ = totals_;
  lastSaidUs_ = nowMonoUs;
  events_.note(
      4, fmt::format("kernel charge counters, since the last report: {}", fmt::join(grew, "; ")),
      {{"TALLY_EVENT", "kernel-charge-anomaly"}});
}

void KernelUpkeep::rescanDevices() {
  std::string listing;
  if (auto names = sys_.list("class/drm")) {
    std::sort(names->begin(), names->end());
    for (const auto& n : *names) listing += n + " ";
  }
  if (sys_.read("class/kfd/kfd/topology/generation_id", 64)) listing += "kfd";
  bool first = drmListing_.empty() && devices_.empty();
  if (first || listing != drmListing_) {
    if (!first) {
      auto added = charge_->addDevices(bpf::discoverDeviceRules(sys_));
      if (!added)
        events_.note(3,
                     fmt::format("a GPU device appeared but could not be registered for the "
                                 "kernel charge: {}; its buffers are metered from fdinfo",
                                 added.error().message),
                     {{"TALLY_EVENT", "kernel-charge-device"}});
      else if (*added)
        events_.note(5,
                     fmt::format("registered {} new GPU device node{} for the kernel charge",
                                 *added, *added == 1 ? "" : "s"),
                     {{"TALLY_EVENT", "kernel-charge-device"}});
    }
    drmListing_ = listing;
  }
  devices_ = charge_->devices();
}

std::vector<std::pair<std::string, std::uint64_t>> KernelUpkeep::anomalies(const bpf::Totals& t) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (const Anomaly& a : kAnomalies) out.emplace_back(a.name, t.*a.field);
  if (t.recursionMisses) out.emplace_back("recursion-misses", *t.recursionMisses);
  return out;
}

}  // namespace tally::daemon
