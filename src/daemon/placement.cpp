#include "daemon/placement.h"

#include <errno.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attribution/container.h"
#include "cgroup/path.h"
#include "contain/sd_bus_handles.h"
#include "contain/verify.h"
#include "lease/meter.h"
#include "probes/proc_cgroup.h"
#include "rpc/protocol.h"
#include "util/clean_text.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::daemon {

namespace code = rpc::code;

using contain::bus::unitInterface;

namespace {

// The lease a child lease asks to nest in (attach "parent"), if it may:
// running, not itself a child (one level), the caller's (or root's), and
// holding the child's cgroup strictly inside its own.
std::optional<Denial> parentFor(const LeaseBook& book, const Peer& peer, const std::string& id,
                                const std::string& cgPath, const Lease*& parent) {
  parent = book.find(id);
  if (!parent)
    return Denial{code::kNotFound,
                  fmt::format("no lease {}: a child lease nests in a running lease (tally leases "
                              "lists them)",
                              id)};
  if (parent->state() != Lease::State::Running || parent->place.cgroup.empty())
    return Denial{code::kRefused,
                  fmt::format("lease {} ({}) is {}, not running: a child lease nests in a running "
                              "lease",
                              id, parent->name(), stateName(parent->state()))};
  if (!parent->parent.empty())
    return Denial{code::kRefused,
                  fmt::format("lease {} ({}) is itself a child of lease {}: tally nests one level; "
                              "attach under {}",
                              id, parent->name(), parent->parent, parent->parent)};
  if (peer.uid != 0 && parent->owner != peer.uid)
    return Denial{code::kForbidden,
                  fmt::format("lease {} belongs to uid {}; only root or its owner may nest a lease "
                              "in it",
                              id, parent->owner)};
  if (cgPath == parent->place.cgroup || !cgroup::isWithin(cgPath, parent->place.cgroup))
    return Denial{code::kRefused,
                  fmt::format("cgroup {} is not inside lease {}'s cgroup {}: a child lease's "
                              "cgroup lies below its parent's",
                              cgPath, id, parent->place.cgroup)};
  return std::nullopt;
}

}  // namespace

std::optional<Denial> placeAttach(const PlacementEnv& env, const LeaseBook& book, const Peer& peer,
                                  const rpc::api::Attach& a, Lease& l) {
  if (!env.cgroupRoot)
    return Denial{code::kRefused,
                  "the daemon has no cgroup v2 root to meter an attached workload in"};
  std::string path;
  l.target = std::make_unique<lease::AttachTarget>(a.target);
  if (!a.target.unit.empty()) {
    const std::string& unit = a.target.unit;
    if (!unitInterface(unit)) {
      return Denial{code::kInvalidParams,
                    fmt::format("\"unit\": '{}' is not a .service, .scope or .slice unit", unit)};
    }
    if (!env.units)
      return Denial{
          code::kRefused,
          "no systemd manager is reachable from the daemon; attach with --cgroup or --pid"};
    auto cg = env.units->controlGroup(unit);
    if (!cg) return Denial{code::kRefused, cg.error().message};
    if (cg->empty())
      return Denial{code::kRefused,
                    fmt::format("unit {} has no control group; is it running?", unit)};
    path = *cg;
    l.place.unit = unit;
  } else if (!a.target.cgroup.empty()) {
    path = a.target.cgroup;
  } else {
    pid_t pid = *a.target.pid;
    auto text = env.proc.read(fmt::format("{}/cgroup", pid), 64 * 1024);
    if (!text)
      return Denial{code::kNotFound,
                    text.error().code == ENOENT || text.error().code == ESRCH
                        ? fmt::format("no such process: pid {} (has it exited? check with ps)", pid)
                        : fmt::format("process {}: {}", pid, text.error().message)};
    auto parsed = probes::parseProcCgroup(*text);
    if (!parsed || parsed->deleted || parsed->outsideNamespace) {
      return Denial{code::kRefused,
                    fmt::format("process {} has no live cgroup v2 path the daemon can see", pid)};
    }
    path = parsed->path;
    if (const auto& c = a.target.container) {
      // The container's whole cgroup (its processes may sit in a nested
      // .../container cgroup below it), and only if it is that container's:
      // the engine's answer is checked against what the kernel says.
      auto whole = attribution::containerCgroup(path, c->id);
      if (!whole) {
        return Denial{code::kRefused,
                      fmt::format("process {} is in cgroup {}, which is not {} container {} ({}); "
                                  "did it restart? Run tally attach --container {} again",
                                  pid, text::truncateUtf8(path, 256), c->engine, c->name,
                                  c->id.substr(0, 12), c->name)};
      }
      path = *whole;
    }
  }
  // One spelling per cgroup: every rule below sees the canonical path, and
  // the directory opened is that path's, reached through no symlink.
  auto canonical = cgroup::canonicalPath(path);
  if (!canonical)
    return Denial{code::kRefused, fmt::format("cgroup '{}' {}", text::truncateUtf8(path, 256),
                                              canonical.error().message)};
  const std::string& cgPath = *canonical;
  if (cgPath == "/")
    return Denial{code::kRefused, "the root cgroup is the whole host, not a workload"};
  // Its path reaches terminals, the journal and metric labels: clean text only.
  if (auto why = text::cleanTextProblem(cgPath)) {
    return Denial{code::kRefused,
                  fmt::format("cgroup {} has a path that {}; tally leases only cgroups whose "
                              "paths print as they are (rename it, or attach a parent)",
                              text::printable(text::truncateUtf8(cgPath, 256)), *why)};
  }
  auto cg = cgroup::Cgroup::open(*env.cgroupRoot, cgPath);
  if (!cg) return Denial{code::kNotFound, fmt::format("cgroup {}: {}", cgPath, cg.error().message)};
  if (peer.uid != 0 && cg->owner() != peer.uid) {
    return Denial{
        code::kForbidden,
        fmt::format("cgroup {} belongs to uid {}; only root or its owner may attach to it", cgPath,
                    cg->owner())};
  }
  if (peer.uid != 0 && l.plan().memoryMax) {
    // The daemon writes for a user only what the user could write: never a
    // systemd unit's limit, and memory.max only where that file is theirs (a
    // delegated cgroup's own limits belong to whoever delegated it).
    if (!a.target.unit.empty() || unitInterface(std::string(fs::baseName(cgPath)))) {
      return Denial{code::kForbidden,
                    "only root may set MemoryMax on a systemd unit through the daemon"};
    }
    auto knob = cg->statFile(cgroup::file::kMemoryMax);
    if (!knob && knob.error().code == ENOENT) {
      // No memory.max at all: the memory controller is off here, which no
      // ownership would change.
      return Denial{
          code::kRefused,
          fmt::format("{} does not exist: the memory controller is not enabled for cgroup {} "
                      "(its parent's cgroup.subtree_control has no +memory), so --memory-max "
                      "cannot be set on it. Enable +memory down to it (tally doctor shows the "
                      "chain), or attach without --memory-max",
                      cg->describe(cgroup::file::kMemoryMax), cgPath)};
    }
    if (!knob || knob->st_uid != peer.uid || !S_ISREG(knob->st_mode)) {
      return Denial{
          code::kForbidden,
          fmt::format("{} is not yours to write (it belongs to uid {}); only root may set "
                      "--memory-max on this cgroup",
                      cg->describe(cgroup::file::kMemoryMax),
                      knob ? std::to_string(knob->st_uid) : std::string("?"))};
    }
  }
  if (const Lease* other = book.ofCgroup(cgPath, cg->inode())) {
    return Denial{code::kConflict, fmt::format("cgroup {} is already leased by {} ({})", cgPath,
                                               other->id, other->name())};
  }
  const Lease* parent = nullptr;
  if (!a.parent.empty()) {
    if (auto denied = parentFor(book, peer, a.parent, cgPath, parent)) return denied;
  }
  // One workload, one lease: a cgroup inside or above another lease's (a
  // container's scope and its nested cgroup) would count its memory twice.
  // A child lease is the one exception, inside its parent: it is counted in
  // the parent's pools once, and only bounded on its own.
  if (const Lease* other = book.overlapping(cgPath, parent ? parent->id : std::string())) {
    bool inside = cgPath.size() > other->place.cgroup.size();
    return Denial{
        code::kConflict,
        fmt::format("cgroup {} is {} {}, which lease {} ({}) already holds: one workload, "
                    "one lease (its memory would be counted twice). Release {} first, or "
                    "attach the workload it holds",
                    cgPath, inside ? "inside" : "above", other->place.cgroup, other->id,
                    other->name(), other->id)};
  }
  // An empty cgroup is no workload (its lease would end at once), unless
  // the child is asked to be kept empty: then its cgroup must still be read.
  auto populated = cg->populated();
  if (!populated || (!*populated && !a.keepWhenEmpty)) {
    return Denial{code::kRefused,
                  populated ? fmt::format("cgroup {} has no processes ({} populated 0)", cgPath,
                                          cgroup::file::kEvents)
                            : fmt::format("cgroup {}: {}", cgPath, populated.error().message)};
  }
  // A tree too deep or too wide to walk is refused now, with the limit named,
  // not found at the first sample (where the meter could not count it).
  cgroup::SubtreeLimits limits;
  const bool budgeted = peer.uid != 0 && env.walkBudget < limits.maxCgroups;
  if (budgeted) limits.maxCgroups = env.walkBudget;
  if (auto walk = cg->subtreeProcs(limits); !walk && walk.error().code == E2BIG) {
    return Denial{code::kRefused,
                  fmt::format("{}. Attach the cgroup that holds the workload itself, or keep "
                              "its tree within {} levels and {} cgroups{}",
                              walk.error().message, limits.maxDepth, limits.maxCgroups,
                              budgeted ? " (max_cgroups_walked_per_uid)" : "")};
  }
  if (parent) l.nestIn(*parent);
  l.place.cgroup = l.place.countersCgroup = cgPath;
  l.place.inode = cg->inode();
  // An attached workload's counters are its own cgroup's (a second handle on it).
  if (auto counters = cgroup::Cgroup::open(*env.cgroupRoot, cgPath))
    l.place.countersCg = std::make_unique<cgroup::Cgroup>(std::move(*counters));
  l.place.cg = std::make_unique<cgroup::Cgroup>(std::move(*cg));
  return std::nullopt;
}

std::optional<Denial> refuseOverOnArrival(const PlacementEnv& env, const Lease& l, bool force) {
  if (force || !l.place.cg) return std::nullopt;
  const enforce::Plan& plan = l.plan();
  std::vector<std::string> over;
  if (plan.memoryMax) {
    if (auto now = l.place.cg->memoryCurrent(); now && *now > *plan.memoryMax)
      over.push_back(fmt::format(
          "memory {} now ({}), over {} {}", units::humanBytes(*now), cgroup::file::kMemoryCurrent,
          plan.memoryMaxWithGpu ? "--memory-max + --gpu-memory-max" : "--memory-max",
          units::humanBytes(*plan.memoryMax)));
  }
  // Only a bound that kills can kill on arrival; a report-only one just reports.
  if (plan.killsOverMax() && env.sys && env.cgroupRoot) {
    lease::LeaseMeter meter(env.proc, *env.sys, *l.place.cg, plan.bound.max);
    meter.sample();
    if (auto now = meter.gpu().lastBytes; now && *now > *plan.bound.max)
      over.push_back(fmt::format("GPU memory {} now (DRM fdinfo), over --gpu-memory-max {}",
                                 units::humanBytes(*now), units::humanBytes(*plan.bound.max)));
  }
  // Buffers an earlier lease of this cgroup made and the kernel still holds
  // are carried into this lease's figure: over the bound, they kill it too.
  if (plan.killsOverMax() && env.charge && l.place.inode) {
    if (auto c = env.charge->read(l.place.inode); c && c->bytes > *plan.bound.max)
      over.push_back(
          fmt::format("GPU memory {} charged in the kernel to buffers an earlier lease "
                      "of it made, over --gpu-memory-max {}",
                      units::humanBytes(c->bytes), units::humanBytes(*plan.bound.max)));
  }
  if (over.empty()) return std::nullopt;
  std::string what = l.place.unit.empty() ? "cgroup " + l.place.cgroup : "unit " + l.place.unit;
  return Denial{
      code::kInvalidParams,
      fmt::format("{} uses {}: attaching would kill it on arrival. Declare limits above what it "
                  "uses, or pass --force to attach anyway (it is then killed if it stays over)",
                  what, fmt::join(over, "; "))};
}

Status adopt(const PlacementEnv& env, Lease& l) {
  const cgroup::Cgroup& cg = *l.place.cg;
  // What its plan says MemoryMax holds (the hand-over's sum once the kernel
  // charges GTT to memcg, as for a run lease).
  const std::optional<std::uint64_t> memoryMax = l.plan().memoryMax;
  if (memoryMax) {
    // A cgroup that is a systemd unit's (a podman scope, a service found by
    // --pid) gets its limit through systemd, which would otherwise undo a
    // direct write; it counts as the unit's only when systemd says so.
    std::string unit = l.place.unit;
    if (unit.empty() && env.units && unitInterface(std::string(fs::baseName(l.place.cgroup)))) {
      std::string candidate(fs::baseName(l.place.cgroup));
      if (auto owner = env.units->controlGroup(candidate); owner && *owner == l.place.cgroup)
        unit = candidate;
    }
    if (!unit.empty()) {
      if (!env.units)
        return Error{0, "no systemd manager is reachable to set MemoryMax on " + unit};
      if (auto s = env.units->setMemoryMax(unit, *memoryMax); !s) {
        return Error{0, fmt::format("SetUnitProperties({}, MemoryMax={}): {}", unit, *memoryMax,
                                    s.error().message)};
      }
      l.place.unit = unit;
    } else if (auto s = cg.setMemoryMax(*memoryMax); !s) {
      return Error{s.error().code, s.error().message + " (to set --memory-max)"};
    }
  }
  // Read back: the declared MemoryMax, and nothing else is touched or judged.
  cgroup::ExpectedLimits expected;
  expected.memoryMax = memoryMax;
  expected.onlyDeclared = true;
  auto applied = contain::verifyLimits(cg, expected, env.pageSize, "");
  if (applied) {
    l.place.applied = *applied;
  } else if (memoryMax || applied.error().code != ENOENT) {
    return Error{applied.error().code, applied.error().message + "; refusing the lease"};
  }
  if (auto ev = cg.memoryEvents()) l.place.oomKillsAtAdoption = ev->get("oom_kill");
  return Ok{};
}

std::optional<Denial> placeRun(const PlacementEnv& env, const LeaseBook& book, const Peer& peer,
                               const rpc::api::Started& p, Lease& l) {
  if (!env.cgroupRoot)
    return Denial{code::kRefused, "the daemon has no cgroup v2 root to meter the lease in"};
  // The cgroup must be this lease's own (its name carries the lease id) and
  // belong to the caller, so a client cannot point the daemon at someone
  // else's workload (release would stop it).
  if (fs::baseName(p.cgroup).find(l.id) == std::string_view::npos) {
    return Denial{code::kForbidden,
                  fmt::format("cgroup {} is not lease {}'s (its name must contain the lease id)",
                              p.cgroup, l.id)};
  }
  // The unit, when named, is the one whose cgroup this is (systemd names a
  // unit's cgroup after it): a client cannot have its lease journalled and
  // shown as another unit (TALLY_UNIT=llama-server.service).
  if (!p.unit.empty() && p.unit != fs::baseName(p.cgroup)) {
    return Denial{code::kForbidden,
                  fmt::format("unit {} is not the unit of cgroup {} (systemd names a unit's "
                              "cgroup after it)",
                              p.unit, p.cgroup)};
  }
  auto cg = cgroup::Cgroup::open(*env.cgroupRoot, p.cgroup);
  if (!cg)
    return Denial{code::kNotFound, fmt::format("cgroup {}: {}", p.cgroup, cg.error().message)};
  if (peer.uid != 0 && cg->owner() != peer.uid) {
    return Denial{code::kForbidden, fmt::format("cgroup {} belongs to uid {}, not to the caller",
                                                p.cgroup, cg->owner())};
  }
  // Where the final counters are read: the lease's cgroup, below it, or the
  // lease's own slice (systemd removes a stopped scope's cgroup at once, so
  // a scope's counters live in its parent <parent>-<id>.slice). Never anyone
  // else's cgroup: its memory.peak would become this lease's.
  std::string counters = p.countersCgroup.empty() ? p.cgroup : p.countersCgroup;
  bool ownSlice = counters == fs::parentPath(p.cgroup) &&
                  fs::baseName(counters).find(l.id) != std::string_view::npos;
  if (!cgroup::isWithin(counters, p.cgroup) && !ownSlice) {
    return Denial{
        code::kForbidden,
        fmt::format(
            "\"counters_cgroup\" {} is neither cgroup {}, below it, nor the lease's own slice",
            counters, p.cgroup)};
  }
  auto countersCg = cgroup::Cgroup::open(*env.cgroupRoot, counters);
  if (!countersCg)
    return Denial{code::kNotFound,
                  fmt::format("counters cgroup {}: {}", counters, countersCg.error().message)};
  if (peer.uid != 0 && countersCg->owner() != peer.uid) {
    return Denial{code::kForbidden,
                  fmt::format("counters cgroup {} belongs to uid {}, not to the caller", counters,
                              countersCg->owner())};
  }
  if (const Lease* other = book.ofCgroup(p.cgroup, cg->inode()); other && other != &l) {
    return Denial{code::kConflict,
                  fmt::format("cgroup {} is already leased by {}", p.cgroup, other->id)};
  }
  // The daemon's own word, not the client's: the declared memory.max is read
  // back from the cgroup the client made before the lease counts as started.
  if (l.plan().memoryMax) {
    // Its plan's: where the kernel charges GTT, MemoryMax holds both declarations.
    cgroup::ExpectedLimits expected;
    expected.memoryMax = l.plan().memoryMax;
    expected.onlyDeclared = true;
    auto applied = contain::verifyLimits(*cg, expected, env.pageSize, "");
    if (!applied) {
      return Denial{code::kRefused,
                    fmt::format("lease {} declared memory_max {} but its cgroup {} does not hold "
                                "it: {}",
                                l.id, *expected.memoryMax, p.cgroup, applied.error().message)};
    }
    l.place.applied = *applied;
  }
  l.place.unit = p.unit;
  l.place.cgroup = p.cgroup;
  l.place.countersCgroup = counters;
  l.place.inode = cg->inode();
  l.place.cg = std::make_unique<cgroup::Cgroup>(std::move(*cg));
  l.place.countersCg = std::make_unique<cgroup::Cgroup>(std::move(*countersCg));
  return std::nullopt;
}

void noteInvocation(Units* units, Lease& l) {
  if (l.place.unit.empty() || !units) return;
  if (auto run = units->run(l.place.unit)) l.place.invocation = run->invocation;
}

std::optional<std::string> reopenPlacement(const fs::Root* cgroupRoot, Units* units, Lease& l,
                                           const ledger::PlacedRow& placed) {
  l.place.unit = placed.unit;
  l.place.cgroup = placed.cgroup;
  l.place.countersCgroup = placed.countersCgroup;
  l.place.inode = placed.inode;
  if (placed.oomKillsAtAdoption) l.place.oomKillsAtAdoption = placed.oomKillsAtAdoption;
  if (!cgroupRoot) return "the daemon has no cgroup v2 root";
  // Same identity: the unit still has this cgroup, and the directory is the
  // very one (inode), not a new cgroup of the same name.
  auto cg = cgroup::Cgroup::open(*cgroupRoot, l.place.cgroup);
  if (!cg) return fmt::format("its cgroup {} is gone", l.place.cgroup);
  if (cg->inode() != l.place.inode)
    return fmt::format("cgroup {} was re-created (inode {} is not the recorded {})", l.place.cgroup,
                       cg->inode(), l.place.inode);
  if (l.isAttach() && !l.place.unit.empty() && units) {
    auto unitCg = units->controlGroup(l.place.unit);
    if (unitCg && *unitCg != l.place.cgroup)
      return fmt::format("unit {} now has cgroup '{}'", l.place.unit, *unitCg);
    // The same cgroup directory is the same run: its invocation is today's.
    noteInvocation(units, l);
  }
  l.place.cg = std::make_unique<cgroup::Cgroup>(std::move(*cg));
  if (auto counters = cgroup::Cgroup::open(*cgroupRoot, l.place.countersCgroup))
    l.place.countersCg = std::make_unique<cgroup::Cgroup>(std::move(*counters));
  return std::nullopt;
}

}  // namespace tally::daemon
