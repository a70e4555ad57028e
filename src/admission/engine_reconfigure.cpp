// Engine, the reload half (Engine::reconfigure): a reload's pools checked
// whole against what the live leases hold, then applied. The rest of the
// engine is engine.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>

#include "admission/engine.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::admission {

namespace {

// Whether `next` leaves `used` out where `before` did not: set, below what is
// used, and lower than before (absent before = no limit).
bool lowersBelow(std::optional<std::uint64_t> next, std::optional<std::uint64_t> before,
                 std::uint64_t used) {
  return next && used > *next && (!before || *next < *before);
}

const config::Pool* named(const std::vector<config::Pool>& pools, const std::string& name) {
  for (const auto& p : pools)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace

Result<std::vector<Engine::Dropped>> Engine::reconfigure(std::vector<config::Pool> pools,
                                                         const TotalsFn& totals) {
  std::vector<std::string> stranded;
  for (const auto& entry : usage_) {
    const std::string& name = entry.first;  // named, not bound: the lambdas below capture it
    const PoolUsage& u = entry.second;
    const config::Pool* before = named(pools_, name);
    const config::Pool* next = named(pools, name);
    if (u.holders.empty()) continue;
    if (!next) {
      // A pool recovery found unconfigured stays its holders' until they end.
      if (before)
        stranded.push_back(
            fmt::format("pool {} is removed but {} in it ({})", name,
                        text::counted(u.holders.size(), "lease is live", "leases are live"),
                        fmt::join(u.holders, ", ")));
      continue;
    }
    std::optional<std::uint64_t> capBefore;
    if (before) capBefore = before->capacity;
    if (lowersBelow(next->capacity, capBefore, u.holders.size()))
      stranded.push_back(fmt::format("pool {}'s capacity {} is below its {} live leases", name,
                                     next->capacity, u.holders.size()));
    auto budget = [&](const char* key, std::optional<std::uint64_t> lease::Declaration::*figure,
                      std::optional<std::uint64_t> config::Pool::*limit, const DeclaredSum& sum) {
      std::optional<std::uint64_t> was;
      if (before) was = before->*limit;
      if (!(next->*limit)) return;
      if (!was) {
        // A budget counts declarations: a holder that declared none cannot be counted.
        for (const auto& id : u.holders)
          if (auto h = holders_.find(id); h != holders_.end() && !(h->second.declaration.*figure))
            stranded.push_back(fmt::format(
                "pool {}'s new {} counts each lease's {}, and lease {} declares none", name, key,
                std::string_view(key).starts_with("gpu") ? "gpu_memory_max" : "memory_max", id));
      }
      if (lowersBelow(next->*limit, was, sum.value()))
        stranded.push_back(fmt::format("pool {}'s {} {} is below what its live leases declare, {}",
                                       name, key, units::humanBytes(*(next->*limit)),
                                       units::humanBytes(sum.value())));
    };
    budget("memory_budget", &lease::Declaration::memoryMax, &config::Pool::memoryBudget,
           u.memoryDeclared);
    budget("gpu_memory_budget", &lease::Declaration::gpuMemoryMax, &config::Pool::gpuMemoryBudget,
           u.gpuMemoryDeclared);
    for (const auto& user : u.users) {
      const std::uint32_t uid = user.first;
      const UserUsage& mine = user.second;
      auto share = [&](const char* key, std::optional<std::uint64_t> config::Pool::*limit,
                       std::uint64_t used, bool bytes) {
        std::optional<std::uint64_t> was;
        if (before) was = before->*limit;
        if (lowersBelow(next->*limit, was, used))
          stranded.push_back(fmt::format(
              "pool {}'s {} {} is below what uid {}'s live leases hold, {}", name, key,
              bytes ? units::humanBytes(*(next->*limit)) : std::to_string(*(next->*limit)), uid,
              bytes ? units::humanBytes(used) : std::to_string(used)));
      };
      share("per_user_capacity", &config::Pool::perUserCapacity, mine.leases, false);
      share("per_user_memory_budget", &config::Pool::perUserMemoryBudget,
            mine.memoryDeclared.value(), true);
      share("per_user_gpu_memory_budget", &config::Pool::perUserGpuMemoryBudget,
            mine.gpuMemoryDeclared.value(), true);
    }
  }
  if (!stranded.empty())
    return Error{0, fmt::format("it would strand live leases: {}", fmt::join(stranded, "; "))};

  pools_ = std::move(pools);
  anyShares_ = false;
  for (const auto& p : pools_) {
    usage_[p.name];
    anyShares_ =
        anyShares_ || p.perUserCapacity || p.perUserMemoryBudget || p.perUserGpuMemoryBudget;
  }
  // What nobody holds and no pool is any more goes (a residue with it: its
  // buffers no longer count against a pool that is gone).
  for (auto it = usage_.begin(); it != usage_.end();)
    it = !named(pools_, it->first) && it->second.holders.empty() ? usage_.erase(it) : std::next(it);
  std::vector<Dropped> dropped;
  for (const auto& w : queue_)
    if (auto s = check(w.req, totals); !s) dropped.push_back({w.req.id, s.error().message});
  for (const auto& d : dropped) cancel(d.id);
  return dropped;
}

}  // namespace tally::admission
