#include "admission/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "util/units.h"

namespace tally::admission {

const char* waitName(Wait w) {
  switch (w) {
    case Wait::Capacity:
      return "capacity";
    case Wait::MemoryBudget:
      return "memory-budget";
    case Wait::GpuBudget:
      return "gpu-memory-budget";
    case Wait::HostHeadroom:
      return "host-headroom";
    case Wait::GpuHeadroom:
      return "gpu-headroom";
    case Wait::Behind:
      return "behind-earlier-request";
    case Wait::UserShare:
      return "user-share";
  }
  return "unknown";
}

// Shares bound users: a placed lease is the scheduler's to share (its own
// limits, Slurm's QOS, are the share), and root's leases are the operator's
// (declared leases, Slurm's steps, the operator's runs), never counted.
static bool countsAgainstShares(const Request& r) { return !r.placed && r.owner != 0; }

// Which of its owner's shares of pool `p` the request would pass, read in
// one order (leases, memory, GPU memory): the one rule fits(), hold() and
// waitFigures() all read. None when it fits in every share.
enum class ShareOver { None, Leases, Memory, GpuMemory };
static ShareOver shareOver(const config::Pool& p, const PoolUsage& u, const Request& r) {
  auto mine = u.users.find(r.owner);
  static const UserUsage kNothing;
  const UserUsage& m = mine == u.users.end() ? kNothing : mine->second;
  if (p.perUserCapacity && m.leases >= *p.perUserCapacity) return ShareOver::Leases;
  if (p.perUserMemoryBudget &&
      m.memoryDeclared.over(r.declaration.memoryMax.value_or(0), *p.perUserMemoryBudget))
    return ShareOver::Memory;
  if (p.perUserGpuMemoryBudget &&
      m.gpuMemoryDeclared.over(r.declaration.gpuMemoryMax.value_or(0), *p.perUserGpuMemoryBudget))
    return ShareOver::GpuMemory;
  return ShareOver::None;
}

Engine::Engine(std::vector<config::Pool> pools) : pools_(std::move(pools)) {
  for (const auto& p : pools_) {
    usage_[p.name];
    anyShares_ =
        anyShares_ || p.perUserCapacity || p.perUserMemoryBudget || p.perUserGpuMemoryBudget;
  }
}

const PoolUsage& Engine::usage(const std::string& pool) const {
  static const PoolUsage kNone;
  auto it = usage_.find(pool);
  return it == usage_.end() ? kNone : it->second;
}

Status Engine::check(const Request& r, const TotalsFn& totals) const {
  if (r.pools.empty()) return Error{0, "no pool requested: name one with --pool"};
  std::set<std::string> seen;
  for (const auto& name : r.pools) {
    if (!seen.insert(name).second)
      return Error{0, fmt::format("pool '{}' is requested twice", name)};
    auto it = std::find_if(pools_.begin(), pools_.end(),
                           [&](const config::Pool& p) { return p.name == name; });
    if (it == pools_.end()) {
      std::string known;
      for (const auto& p : pools_) known += fmt::format("{}{}", known.empty() ? "" : ", ", p.name);
      return Error{0, fmt::format("no pool '{}' (configured: {})", name, known)};
    }
    const config::Pool& p = *it;
    if (p.memoryBudget && !r.declaration.memoryMax) {
      return Error{
          0,
          fmt::format("pool '{}' has a memory budget; declare this lease's share with --memory-max",
                      name)};
    }
    if (p.gpuMemoryBudget && !r.declaration.gpuMemoryMax) {
      return Error{
          0,
          fmt::format(
              "pool '{}' has a GPU memory budget; declare this lease's share with --gpu-memory-max",
              name)};
    }
    if (p.memoryBudget && *r.declaration.memoryMax > *p.memoryBudget) {
      return Error{0, fmt::format("--memory-max {} is larger than pool {}'s whole memory budget {}",
                                  units::humanBytes(*r.declaration.memoryMax), name,
                                  units::humanBytes(*p.memoryBudget))};
    }
    if (p.gpuMemoryBudget && *r.declaration.gpuMemoryMax > *p.gpuMemoryBudget) {
      return Error{
          0, fmt::format("--gpu-memory-max {} is larger than pool {}'s whole GPU memory budget {}",
                         units::humanBytes(*r.declaration.gpuMemoryMax), name,
                         units::humanBytes(*p.gpuMemoryBudget))};
    }
    // A share is the most one user may hold at once: a request above it on
    // its own would wait forever (placed ones are the scheduler's to share).
    if (countsAgainstShares(r) && p.perUserMemoryBudget && r.declaration.memoryMax &&
        *r.declaration.memoryMax > *p.perUserMemoryBudget) {
      return Error{0, fmt::format("--memory-max {} is larger than pool {}'s share per user {} "
                                  "(per_user_memory_budget): ask for {} or less",
                                  units::humanBytes(*r.declaration.memoryMax), name,
                                  units::humanBytes(*p.perUserMemoryBudget),
                                  units::humanBytes(*p.perUserMemoryBudget))};
    }
    if (countsAgainstShares(r) && p.perUserGpuMemoryBudget && r.declaration.gpuMemoryMax &&
        *r.declaration.gpuMemoryMax > *p.perUserGpuMemoryBudget) {
      return Error{0, fmt::format("--gpu-memory-max {} is larger than pool {}'s share per user "
                                  "{} (per_user_gpu_memory_budget): ask for {} or less",
                                  units::humanBytes(*r.declaration.gpuMemoryMax), name,
                                  units::humanBytes(*p.perUserGpuMemoryBudget),
                                  units::humanBytes(*p.perUserGpuMemoryBudget))};
    }
    // Placed: what the scheduler counts is the budget; a GRES above what the
    // devices hold is the operator's to fix (tally doctor --slurm says so).
    if (!totals || r.placed || (!p.memoryBudget && !p.gpuMemoryBudget)) continue;
    Totals t = totals(p);
    if (p.memoryBudget && t.hostBytes && *r.declaration.memoryMax > *t.hostBytes) {
      return Error{0, fmt::format("--memory-max {} is more than this host's memory "
                                  "(MemTotal {}): it could never be granted",
                                  units::humanBytes(*r.declaration.memoryMax),
                                  units::humanBytes(*t.hostBytes))};
    }
    if (p.gpuMemoryBudget && t.gpuBytes && *r.declaration.gpuMemoryMax > *t.gpuBytes) {
      return Error{0, fmt::format("--gpu-memory-max {} is more than pool {}'s devices hold "
                                  "(GTT ceiling + VRAM: {}): it could never be granted",
                                  units::humanBytes(*r.declaration.gpuMemoryMax), name,
                                  units::humanBytes(*t.gpuBytes))};
    }
  }
  return Ok{};
}

void Engine::enqueue(Request r) {
  // The queue is sorted by priority (higher first), then arrival: a new
  // request goes after every request of its priority or higher.
  int priority = r.priority;
  auto at = std::upper_bound(queue_.begin(), queue_.end(), priority,
                             [](int p, const Waiting& w) { return p > w.req.priority; });
  changedAt(static_cast<std::size_t>(at - queue_.begin()));
  countWaiting(r, true);
  queue_.insert(at, Waiting{std::move(r), nextSeq_++, std::nullopt, {}});
}

void Engine::countWaiting(const Request& r, bool add) {
  for (const auto& p : r.pools) {
    if (add) {
      ++waitingPools_[p];
    } else if (auto it = waitingPools_.find(p); it != waitingPools_.end() && --it->second == 0) {
      waitingPools_.erase(it);
    }
  }
}

std::vector<std::string> Engine::grantArrival(const std::string& id, const HeadroomFn& headroom) {
  // Per-user shares: whether a waiter holds this one back depends on whose
  // it is and why it waits (on any of its pools), which the full pass reads.
  if (queue_.empty() || queue_.back().req.id != id || anyShares_) return grant(headroom);
  Waiting& w = queue_.back();
  // Behind an earlier waiter on any of its pools: every request ahead of it
  // is earlier (it is last), so a count above its own 1 says so.
  bool behind = !w.req.placed &&
                std::any_of(w.req.pools.begin(), w.req.pools.end(), [&](const std::string& p) {
                  auto it = waitingPools_.find(p);
                  return it != waitingPools_.end() && it->second > 1;
                });
  w.pool.clear();
  w.reason = behind ? std::optional<Wait>(Wait::Behind) : fits(w.req, headroom, &w.pool);
  if (w.reason == Wait::Behind) w.pool.clear();
  if (w.reason) return {};
  add(w.req);
  countWaiting(w.req, false);
  changedAt(queue_.size() - 1);
  std::vector<std::string> granted{w.req.id};
  queue_.pop_back();
  return granted;
}

void Engine::lowerHeld(const std::string& id, std::optional<std::uint64_t> hostBytes,
                       std::optional<std::uint64_t> gpuBytes) {
  auto lower = [](std::optional<std::uint64_t>& held, std::optional<std::uint64_t> now) {
    held = held && now ? std::optional<std::uint64_t>(std::min(*held, *now)) : std::nullopt;
  };
  for (auto& w : queue_) {
    if (w.req.id != id) continue;
    lower(w.req.heldHostBytes, hostBytes);
    lower(w.req.heldGpuBytes, gpuBytes);
  }
}

bool Engine::cancel(const std::string& id) {
  auto it =
      std::find_if(queue_.begin(), queue_.end(), [&](const Waiting& w) { return w.req.id == id; });
  if (it == queue_.end()) return false;
  changedAt(static_cast<std::size_t>(it - queue_.begin()));
  countWaiting(it->req, false);
  queue_.erase(it);
  return true;
}

void Engine::add(const Request& r) {
  for (const auto& name : r.pools) {
    PoolUsage& u = usage_[name];
    u.holders.push_back(r.id);
    u.memoryDeclared.add(r.declaration.memoryMax.value_or(0));
    u.gpuMemoryDeclared.add(r.declaration.gpuMemoryMax.value_or(0));
    if (!countsAgainstShares(r)) continue;
    UserUsage& mine = u.users[r.owner];
    ++mine.leases;
    mine.memoryDeclared.add(r.declaration.memoryMax.value_or(0));
    mine.gpuMemoryDeclared.add(r.declaration.gpuMemoryMax.value_or(0));
  }
  holders_[r.id] = r;
}

Status Engine::hold(Request r) {
  std::string over;
  for (const auto& name : r.pools) {
    const config::Pool* p = nullptr;
    for (const auto& q : pools_) {
      if (q.name == name) p = &q;
    }
    if (!p) {
      over += fmt::format("; pool '{}' is no longer configured", name);
      continue;
    }
    const PoolUsage& u = usage_[name];
    if (u.holders.size() + 1 > p->capacity)
      over += fmt::format("; pool '{}' is over capacity {}", name, p->capacity);
    if (p->memoryBudget &&
        u.memoryDeclared.over(r.declaration.memoryMax.value_or(0), *p->memoryBudget)) {
      over += fmt::format("; pool '{}' is over its memory budget", name);
    }
    if (p->gpuMemoryBudget && u.gpuMemoryDeclared.over(r.declaration.gpuMemoryMax.value_or(0),
                                                       *p->gpuMemoryBudget, u.gpuResidue)) {
      over += fmt::format("; pool '{}' is over its GPU memory budget", name);
    }
    if (countsAgainstShares(r)) {
      ShareOver share = shareOver(*p, u, r);
      if (share == ShareOver::Leases)
        over += fmt::format("; uid {} is over its share of pool '{}' (per_user_capacity {})",
                            r.owner, name, *p->perUserCapacity);
      else if (share != ShareOver::None)
        over += fmt::format("; uid {} is over its share of pool '{}' (per_user_*_budget)", r.owner,
                            name);
    }
  }
  cancel(r.id);
  add(r);
  if (!over.empty()) return Error{0, over.substr(2)};
  return Ok{};
}

bool Engine::release(const std::string& id) {
  auto it = holders_.find(id);
  if (it == holders_.end()) return false;
  for (const auto& name : it->second.pools) {
    PoolUsage& u = usage_[name];
    u.holders.erase(std::remove(u.holders.begin(), u.holders.end(), id), u.holders.end());
    u.memoryDeclared.remove(it->second.declaration.memoryMax.value_or(0));
    u.gpuMemoryDeclared.remove(it->second.declaration.gpuMemoryMax.value_or(0));
    if (auto mine = u.users.find(it->second.owner);
        countsAgainstShares(it->second) && mine != u.users.end()) {
      mine->second.memoryDeclared.remove(it->second.declaration.memoryMax.value_or(0));
      mine->second.gpuMemoryDeclared.remove(it->second.declaration.gpuMemoryMax.value_or(0));
      if (--mine->second.leases == 0) u.users.erase(mine);
    }
  }
  holders_.erase(it);
  return true;
}

bool Engine::setGpuResidue(const std::string& pool, std::uint64_t bytes) {
  auto it = usage_.find(pool);
  if (it == usage_.end()) {
    if (!bytes) return false;
    it = usage_.emplace(pool, PoolUsage{}).first;
  }
  if (it->second.gpuResidue == bytes) return false;
  it->second.gpuResidue = bytes;
  return true;
}

std::optional<Wait> Engine::fits(const Request& r, const HeadroomFn& headroom,
                                 std::string* blocking) const {
  // The owner's shares first, over every pool the request names: a request
  // its owner's own leases hold back must say so (it then holds back no
  // other user), whatever else any of its pools lacks and in whatever order
  // it names them.
  if (countsAgainstShares(r)) {
    for (const auto& name : r.pools) {
      const config::Pool* p = nullptr;
      for (const auto& q : pools_)
        if (q.name == name) p = &q;
      if (!p) continue;
      if (shareOver(*p, usage(name), r) != ShareOver::None) {
        if (blocking) *blocking = name;
        return Wait::UserShare;
      }
    }
  }
  for (const auto& name : r.pools) {
    if (blocking) *blocking = name;
    const config::Pool* p = nullptr;
    for (const auto& q : pools_) {
      if (q.name == name) p = &q;
    }
    if (!p) return Wait::Capacity;  // unreachable for checked requests
    const PoolUsage& u = usage(name);
    if (u.holders.size() >= p->capacity) return Wait::Capacity;
    if (p->memoryBudget &&
        u.memoryDeclared.over(r.declaration.memoryMax.value_or(0), *p->memoryBudget))
      return Wait::MemoryBudget;
    if (p->gpuMemoryBudget && u.gpuMemoryDeclared.over(r.declaration.gpuMemoryMax.value_or(0),
                                                       *p->gpuMemoryBudget, u.gpuResidue))
      return Wait::GpuBudget;
    if (headroom && !r.placed && (p->memoryBudget || p->gpuMemoryBudget)) {
      if (auto lacking = shortfallIn(r, *p, headroom(*p)))
        return lacking->host ? Wait::HostHeadroom : Wait::GpuHeadroom;
    }
  }
  return std::nullopt;
}

std::vector<std::string> Engine::grant(const HeadroomFn& headroom) {
  std::vector<std::string> granted;
  reasonChanged_.clear();          // indexes of this pass only
  std::set<std::string> reserved;  // pools an earlier waiting request still needs
  // A request waiting on its owner's share reserves its pools against that
  // owner's later requests only: one user at their share never holds back
  // another, and their own small request never overtakes their big one.
  std::set<std::pair<std::string, std::uint32_t>> reservedForOwner;
  for (auto it = queue_.begin(); it != queue_.end();) {
    auto anyOf = [&](auto pred) {
      return !it->req.placed && std::any_of(it->req.pools.begin(), it->req.pools.end(), pred);
    };
    const bool behindAll = anyOf([&](const auto& p) { return reserved.count(p) != 0; });
    // Behind only its own owner's earlier request waiting on the owner's
    // share: it waits for the same leases, so it too holds back that owner
    // alone.
    const bool behindOwn = !behindAll && anyOf([&](const auto& p) {
      return reservedForOwner.count({p, it->req.owner}) != 0;
    });
    std::string pool;
    std::optional<Wait> why =
        behindAll || behindOwn ? std::optional<Wait>(Wait::Behind) : fits(it->req, headroom, &pool);
    if (!why) {
      add(it->req);
      granted.push_back(it->req.id);
      changedAt(static_cast<std::size_t>(it - queue_.begin()));
      countWaiting(it->req, false);
      it = queue_.erase(it);
      continue;
    }
    judged(static_cast<std::size_t>(it - queue_.begin()), why, std::move(pool));
    for (const auto& p : it->req.pools) {
      if (why == Wait::UserShare || behindOwn)
        reservedForOwner.insert({p, it->req.owner});
      else
        reserved.insert(p);
    }
    ++it;
  }
  return granted;
}

void Engine::judged(std::size_t index, std::optional<Wait> why, std::string pool) {
  Waiting& w = queue_[index];
  if (why == Wait::Behind) pool.clear();
  if (w.reason == why && w.pool == pool) return;
  // A waiter never judged before is new: its arrival already tells it.
  if (w.reason) reasonChanged_.push_back(index);
  w.reason = why;
  w.pool = std::move(pool);
}

std::vector<std::string> fillDefaults(lease::Declaration& d, const std::vector<std::string>& pools,
                                      const std::vector<config::Pool>& configured) {
  std::optional<std::uint64_t> memory, gpu;
  auto smallest = [](std::optional<std::uint64_t>& acc, std::optional<std::uint64_t> v) {
    if (v) acc = acc ? std::min(*acc, *v) : *v;
  };
  for (const auto& name : pools)
    for (const auto& p : configured)
      if (p.name == name) {
        smallest(memory, p.defaultMemoryMax);
        smallest(gpu, p.defaultGpuMemoryMax);
      }
  std::vector<std::string> filled;
  if (!d.memoryMax && memory) {
    d.memoryMax = memory;
    filled.push_back("memory_max");
  }
  if (!d.gpuMemoryMax && gpu) {
    d.gpuMemoryMax = gpu;
    filled.push_back("gpu_memory_max");
  }
  return filled;
}

std::uint64_t stillNeeded(std::optional<std::uint64_t> declared,
                          std::optional<std::uint64_t> held) {
  if (!declared) return 0;
  return held && *held < *declared ? *declared - *held : (held ? 0 : *declared);
}

std::optional<lease::Shortfall> shortfallIn(const Request& r, const config::Pool& p,
                                            const Headroom& h) {
  lease::Shortfall s;
  s.pool = p.name;
  // The same reading as fits(): a budget makes the resource count, and
  // what an attached workload already holds is out of the free already.
  const std::uint64_t host = stillNeeded(r.declaration.memoryMax, r.heldHostBytes);
  const std::uint64_t gpu = stillNeeded(r.declaration.gpuMemoryMax, r.heldGpuBytes);
  if (p.memoryBudget && h.hostBytes && host > *h.hostBytes)
    s.host = lease::Shortfall::Figure{host, *h.hostBytes};
  if (p.gpuMemoryBudget && h.gpuBytes && gpu > *h.gpuBytes)
    s.gpu = lease::Shortfall::Figure{gpu, *h.gpuBytes};
  if (!s.any()) return std::nullopt;
  return s;
}

namespace {

// "needs 8.0 GiB more: declares 44.0 GiB, holds 36.0 GiB" for an attached
// workload that holds some already, else "needs 44.0 GiB".
std::string needs(std::optional<std::uint64_t> declared, std::optional<std::uint64_t> held) {
  using units::humanBytes;
  if (!held || *held == 0) return fmt::format("needs {}", humanBytes(declared.value_or(0)));
  return fmt::format("needs {} more: declares {}, holds {}",
                     humanBytes(stillNeeded(declared, held)), humanBytes(declared.value_or(0)),
                     humanBytes(*held));
}

}  // namespace

WaitFigures waitFigures(const Request& r, Wait w, const config::Pool& p, const PoolUsage& u,
                        const Headroom& h) {
  using units::humanBytes;
  WaitFigures f;
  // A budget's wait: what the request declares against what the holders left of it.
  auto budget = [&](const char* what, std::optional<std::uint64_t> declared,
                    std::optional<std::uint64_t> total, std::uint64_t held) {
    f.needed = declared.value_or(0);
    f.free = total && *total > held ? *total - held : 0;
    f.detail =
        fmt::format("pool {}'s {} budget: needs {}, {} of {} left", p.name, what,
                    humanBytes(*f.needed), humanBytes(*f.free), humanBytes(total.value_or(0)));
  };
  switch (w) {
    case Wait::Capacity:
      f.unit = "leases";
      f.needed = 1;
      f.free = p.capacity > u.holders.size() ? p.capacity - u.holders.size() : 0;
      f.detail = fmt::format("pool {} is full: {} of {} leases hold it", p.name, u.holders.size(),
                             p.capacity);
      break;
    case Wait::MemoryBudget:
      budget("memory", r.declaration.memoryMax, p.memoryBudget, u.memoryDeclared.value());
      break;
    case Wait::GpuBudget: {
      std::uint64_t declared = u.gpuMemoryDeclared.value();
      std::uint64_t held =
          declared > UINT64_MAX - u.gpuResidue ? UINT64_MAX : declared + u.gpuResidue;
      budget("GPU memory", r.declaration.gpuMemoryMax, p.gpuMemoryBudget, held);
      if (u.gpuResidue)
        f.detail += fmt::format(" ({} of it held by buffers of ended leases until they are freed)",
                                humanBytes(u.gpuResidue));
      break;
    }
    case Wait::HostHeadroom:
      f.needed = stillNeeded(r.declaration.memoryMax, r.heldHostBytes);
      f.free = h.hostBytes;
      f.detail =
          fmt::format("host memory: {}, {} free (MemAvailable less holders' unused declarations)",
                      needs(r.declaration.memoryMax, r.heldHostBytes),
                      f.free ? humanBytes(*f.free) : std::string("unknown"));
      break;
    case Wait::GpuHeadroom:
      f.needed = stillNeeded(r.declaration.gpuMemoryMax, r.heldGpuBytes);
      f.free = h.gpuBytes;
      f.detail = fmt::format("GPU memory on pool {}'s devices: {}, {} free", p.name,
                             needs(r.declaration.gpuMemoryMax, r.heldGpuBytes),
                             f.free ? humanBytes(*f.free) : std::string("unknown"));
      break;
    case Wait::Behind:
      f.unit = "leases";
      f.detail = "behind an earlier request for the same pool (no overtaking)";
      break;
    case Wait::UserShare: {
      auto mine = u.users.find(r.owner);
      static const UserUsage kNothing;
      const UserUsage& m = mine == u.users.end() ? kNothing : mine->second;
      const ShareOver share = shareOver(p, u, r);
      if (share == ShareOver::Leases) {
        f.unit = "leases";
        f.needed = 1;
        f.free = 0;
        f.detail =
            fmt::format("uid {}'s share of pool {}: {} of {} leases held (per_user_capacity)",
                        r.owner, p.name, m.leases, *p.perUserCapacity);
      } else if (share == ShareOver::None) {
        // Read after the owner's lease ended, before the next grant pass.
        f.detail = fmt::format("uid {}'s share of pool {}: room again (granted at the next pass)",
                               r.owner, p.name);
      } else {
        const bool memory = share == ShareOver::Memory;
        const auto& limit = memory ? p.perUserMemoryBudget : p.perUserGpuMemoryBudget;
        const std::uint64_t held = memory ? m.memoryDeclared.value() : m.gpuMemoryDeclared.value();
        f.needed = (memory ? r.declaration.memoryMax : r.declaration.gpuMemoryMax).value_or(0);
        f.free = limit && *limit > held ? *limit - held : 0;
        f.detail =
            fmt::format("uid {}'s share of pool {}'s {}: needs {}, {} of {} left ({})", r.owner,
                        p.name, memory ? "memory" : "GPU memory", humanBytes(*f.needed),
                        humanBytes(*f.free), humanBytes(limit.value_or(0)),
                        memory ? "per_user_memory_budget" : "per_user_gpu_memory_budget");
      }
      break;
    }
  }
  return f;
}

std::vector<std::string> Engine::expire(std::uint64_t nowUs) {
  std::vector<std::string> gone;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->req.deadlineUs && it->req.deadlineUs <= nowUs) {
      gone.push_back(it->req.id);
      changedAt(static_cast<std::size_t>(it - queue_.begin()));
      countWaiting(it->req, false);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

bool Engine::waiting(const std::string& id) const {
  return std::any_of(queue_.begin(), queue_.end(),
                     [&](const Waiting& w) { return w.req.id == id; });
}

const Request* Engine::request(const std::string& id) const {
  if (auto it = holders_.find(id); it != holders_.end()) return &it->second;
  for (const auto& w : queue_) {
    if (w.req.id == id) return &w.req;
  }
  return nullptr;
}

std::optional<std::size_t> Engine::position(const std::string& id) const {
  for (std::size_t i = 0; i < queue_.size(); ++i) {
    if (queue_[i].req.id == id) return i + 1;
  }
  return std::nullopt;
}

std::optional<Wait> Engine::waitReason(const std::string& id) const {
  for (const auto& w : queue_) {
    if (w.req.id == id) return w.reason;
  }
  return std::nullopt;
}

std::vector<Engine::Queued> Engine::queueView() const {
  std::vector<Queued> out;
  out.reserve(queue_.size());
  for (const auto& w : queue_) out.push_back({&w.req, w.reason});
  return out;
}

std::vector<const Request*> Engine::queue() const {
  std::vector<const Request*> out;
  for (const auto& w : queue_) out.push_back(&w.req);
  return out;
}

}  // namespace tally::admission
