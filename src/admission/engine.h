// Admission: which lease may hold which pools. Pure bookkeeping, no I/O, so
// property tests can drive it through millions of random steps.
//
// Rules (docs/daemon.md, "Pools and budgets"):
//  - a grant is atomic over the request's pools: all of them or it waits;
//  - holders of a pool never exceed its capacity, and the declared
//    memory_max / gpu_memory_max of its holders never sum above its budgets;
//  - a request for a budgeted pool must declare that limit (refused otherwise),
//    and one larger than the budget on its own is refused, not queued forever;
//    so is one larger than what the host or the pool's devices hold in all
//    (measured totals: MemTotal; GTT ceiling + VRAM), which headroom could
//    never free;
//  - queue order is priority (higher first), then arrival; a waiting request
//    reserves its pools, so no later request of the same or lower priority
//    that needs any of them overtakes it (no starvation by small requests);
//  - measured headroom can only delay a grant (doctrine 5), never allow one
//    past a declared budget; a placed request (the site's scheduler placed
//    it: Request::placed) is not delayed by it at all, nor refused by the
//    measured totals, nor held behind a waiter.
//
// Cost: enqueue is a binary search and one insertion; grant, expire and
// cancel are one pass over the queue. Nothing is quadratic in the queue
// length, so 10,000 waiting requests cost the daemon microseconds per request.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "lease/declaration.h"
#include "lease/shortfall.h"
#include "util/result.h"

namespace tally::admission {

struct Request {
  std::string id;                  // the lease id
  std::vector<std::string> pools;  // distinct pool names
  // What the lease declares; its memory_max and gpu_memory_max count against
  // the pools' budgets.
  lease::Declaration declaration;
  int priority = 0;
  std::uint64_t deadlineUs = 0;  // monotonic µs when the wait ends; 0 = no timeout
  // Placed by the site's scheduler (rpc::api::Declared::placed): capacity and
  // declared budgets still hold it, measured headroom and totals never do,
  // and no waiter reserves its pools against it (it never waits itself).
  bool placed = false;
  // An attach: what its workload already holds, measured as it arrives (GPU
  // as a holder's in-use is; host only its anon + shmem pages, never page
  // cache MemAvailable counts as free). Those bytes are out of the measured free,
  // so measured headroom needs only the rest of its declaration; budgets
  // still count all of it. Absent = not measured: all of it is needed.
  std::optional<std::uint64_t> heldHostBytes, heldGpuBytes;
  // Whose lease it is (the peer's uid): a pool's per-user shares count by it.
  std::uint32_t owner = 0;
};

// Fills what `d` leaves undeclared from the requested pools' defaults
// (default_memory_max, default_gpu_memory_max: the smallest when several
// pools give one), so a bare `tally run --pool gpu` declares what the
// operator set. Returns what it filled ("memory_max", "gpu_memory_max").
std::vector<std::string> fillDefaults(lease::Declaration& d, const std::vector<std::string>& pools,
                                      const std::vector<config::Pool>& configured);

// What a request still needs of measured headroom for `declared`: its
// declaration less what it already holds (never below 0).
std::uint64_t stillNeeded(std::optional<std::uint64_t> declared, std::optional<std::uint64_t> held);

// What measurement says is free for one more grant in a pool, net of what
// current holders declared but do not use yet. Absent = not measurable here:
// it then delays nothing (the declared budget still bounds the grant).
struct Headroom {
  std::optional<std::uint64_t> hostBytes;
  std::optional<std::uint64_t> gpuBytes;
};
using HeadroomFn = std::function<Headroom(const config::Pool&)>;

// What the host and a pool's devices hold in all, measured: a budgeted
// request above either waits for headroom that can never come, so it is
// refused. Absent = unknown: refuses nothing.
struct Totals {
  std::optional<std::uint64_t> hostBytes;  // MemTotal
  std::optional<std::uint64_t> gpuBytes;   // Σ devices: the pool's GTT ceiling + VRAM total
};
using TotalsFn = std::function<Totals(const config::Pool&)>;

// Pure: what measured headroom lacks for a placed request (lease/shortfall.h):
// the shortfall of `r` against `pool`'s headroom `h` (the pool's
// budgets say which resources count, as fits() reads them).
std::optional<lease::Shortfall> shortfallIn(const Request& r, const config::Pool& pool,
                                            const Headroom& h);

// Why a queued request is still waiting (the first reason found).
// UserShare: its owner's leases fill the owner's share of a pool; it waits
// for them alone (it holds back no other user's request).
enum class Wait { Capacity, MemoryBudget, GpuBudget, HostHeadroom, GpuHeadroom, Behind, UserShare };
const char* waitName(Wait w);

// A pool's declared bytes, summed exactly: each lease may declare up to
// 2^64 - 1, so a 64-bit sum (and sum + request against a budget) could wrap
// and let a request past its budget. Read saturated at UINT64_MAX.
class DeclaredSum {
 public:
  void add(std::uint64_t v) { sum_ += v; }
  void remove(std::uint64_t v) { sum_ -= v; }
  std::uint64_t value() const {
    return sum_ > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(sum_);
  }
  // Whether adding `extra` (and `also`) would go past `budget`.
  bool over(std::uint64_t extra, std::uint64_t budget, std::uint64_t also = 0) const {
    return sum_ + extra + also > budget;
  }

 private:
  __extension__ using Exact = unsigned __int128;  // GCC and clang; no wrap below 2^128
  Exact sum_ = 0;
};

// What one user's holders take of a pool (its per-user shares count these).
struct UserUsage {
  std::size_t leases = 0;
  DeclaredSum memoryDeclared;
  DeclaredSum gpuMemoryDeclared;
};

struct PoolUsage {
  std::vector<std::string> holders;          // lease ids, in grant order
  std::map<std::uint32_t, UserUsage> users;  // by owner uid; a user with no holder is absent
  DeclaredSum memoryDeclared;
  DeclaredSum gpuMemoryDeclared;
  // GPU bytes that buffers of the pool's ended leases still hold (the
  // kernel charge keeps them counted until freed): they count against the
  // GPU budget as a holder's declaration would.
  std::uint64_t gpuResidue = 0;
};

// The numbers behind a wait, as its client is told them: what the request
// needs and what is free now, in bytes (leases for capacity), and one line
// saying so. Absent figures were not measured. Pure: the caller passes the
// pool that blocked, its usage and its headroom.
struct WaitFigures {
  std::optional<std::uint64_t> needed, free;
  const char* unit = "bytes";  // or "leases"
  std::string detail;
};
WaitFigures waitFigures(const Request& r, Wait w, const config::Pool& pool, const PoolUsage& usage,
                        const Headroom& headroom);

class Engine {
 public:
  explicit Engine(std::vector<config::Pool> pools);

  // Whether a request can ever be granted; the error says what to change.
  Status check(const Request& r, const TotalsFn& totals = {}) const;
  // Queues a checked request (arrival order is the call order).
  void enqueue(Request r);
  // Removes a waiting request; false if it is not waiting.
  bool cancel(const std::string& id);
  // A waiting attach measured again: its held figures only go down (what it
  // freed while it waited is in the measured free now, and must not count
  // twice); one not measured now holds nothing. No-op if it is not waiting.
  void lowerHeld(const std::string& id, std::optional<std::uint64_t> hostBytes,
                 std::optional<std::uint64_t> gpuBytes);
  // Makes a request a holder without waiting (recovery re-adopts what already
  // runs). Over capacity or budget is allowed then, and reported in the error.
  Status hold(Request r);
  // A holder leaves; false if it held nothing.
  bool release(const std::string& id);
  // A reload's pools (daemon/service_reload.cpp). Checked whole before
  // anything changes: a change that would strand a live lease is refused,
  // and the error names each holder and the limit that would leave it out
  // (a pool it holds removed; a capacity, budget or user's share lowered
  // below what its holders hold; a budget set that a holder declared no
  // figure for). A limit a recovery already found over is not made the
  // reload's fault unless the change lowers it further. Applied, it returns
  // the waiting requests the new pools can never grant (check() refuses
  // them, with `totals`), each with why; they are out of the queue.
  struct Dropped {
    std::string id;
    std::string why;
  };
  Result<std::vector<Dropped>> reconfigure(std::vector<config::Pool> pools,
                                           const TotalsFn& totals = {});
  // What buffers of the pool's ended leases hold now (PoolUsage::gpuResidue);
  // true when it changed (a grant pass may then admit more).
  bool setGpuResidue(const std::string& pool, std::uint64_t bytes);
  // Grants every waiting request that fits now, in queue order; returns them.
  std::vector<std::string> grant(const HeadroomFn& headroom);
  // grant() for the moment right after enqueue() of `id`, with the same
  // headroom as the last pass: when the new request joined the end of the
  // queue, it is the only one whose fate can differ, so only it is looked at
  // (a pool count, not a walk of the queue). Otherwise (or where any pool
  // has per-user shares) a full grant().
  std::vector<std::string> grantArrival(const std::string& id, const HeadroomFn& headroom);
  // Removes waiting requests whose deadline passed; returns them.
  std::vector<std::string> expire(std::uint64_t nowUs);

  bool holds(const std::string& id) const { return holders_.count(id) != 0; }
  bool waiting(const std::string& id) const;
  const Request* request(const std::string& id) const;  // holder or waiting
  // 1-based place in the queue, and why it waits (after the last grant()).
  std::optional<std::size_t> position(const std::string& id) const;
  std::optional<Wait> waitReason(const std::string& id) const;
  // The pool whose rule holds a waiter back ("" when it is behind another).
  const std::string& waitPool(std::size_t index) const { return queue_[index].pool; }

  const std::vector<config::Pool>& pools() const { return pools_; }
  const PoolUsage& usage(const std::string& pool) const;
  std::vector<const Request*> queue() const;  // in grant order
  // The queue with each request's wait reason, in one pass (position = index + 1).
  struct Queued {
    const Request* req;
    std::optional<Wait> reason;
  };
  std::vector<Queued> queueView() const;
  Queued at(std::size_t index) const {
    return {&queue_[index].req, queue_[index].reason};
  }  // index < queued()
  std::size_t queued() const { return queue_.size(); }
  // The first queue index whose position changed since positionsSeen(): a
  // request behind a removed or inserted one moved; an appended one is new.
  // The caller tells waiters their new positions from there on, not all of them.
  std::size_t positionsChangedFrom() const { return changedFrom_; }
  void positionsSeen() { changedFrom_ = queue_.size(); }
  // Queue indexes whose wait reason (or blocking pool) changed in the last
  // grant pass; taken once. A waiter is told when it stops waiting for one
  // thing and starts waiting for another, not only when it moves.
  std::vector<std::size_t> takeReasonChanges() { return std::exchange(reasonChanged_, {}); }

 private:
  struct Waiting {
    Request req;
    std::uint64_t seq = 0;
    std::optional<Wait> reason;
    std::string pool;  // the pool whose rule holds it back
  };
  std::optional<Wait> fits(const Request& r, const HeadroomFn& headroom,
                           std::string* pool = nullptr) const;
  void judged(std::size_t index, std::optional<Wait> why, std::string pool);
  void add(const Request& r);
  bool anyShares_ = false;  // some pool has per-user shares
  void changedAt(std::size_t index) { changedFrom_ = std::min(changedFrom_, index); }

  std::vector<config::Pool> pools_;
  std::map<std::string, PoolUsage> usage_;
  std::map<std::string, Request> holders_;
  std::map<std::string, std::size_t> waitingPools_;  // pool -> waiting requests that need it
  void countWaiting(const Request& r, bool add);
  std::vector<Waiting> queue_;  // kept sorted: priority desc, seq asc
  std::uint64_t nextSeq_ = 0;
  std::size_t changedFrom_ = 0;
  std::vector<std::size_t> reasonChanged_;
};

}  // namespace tally::admission
