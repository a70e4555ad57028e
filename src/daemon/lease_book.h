// The daemon's leases and the admission engine that queues and grants them:
// the one owner of both. Every lease the daemon knows is here, queued,
// granted or running; the book keeps the engine's view (who waits, who holds
// which pool) and its own (the Lease records) in step, and counts what each
// connection keeps waiting.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "admission/engine.h"
#include "config/config.h"
#include "daemon/lease.h"
#include "daemon/limits.h"

namespace tally::daemon {

class LeaseBook {
 public:
  explicit LeaseBook(std::vector<config::Pool> pools) : engine_(std::move(pools)) {}

  Lease* find(const std::string& id);
  const Lease* find(const std::string& id) const;
  // Every lease, by id (queued ones included).
  const std::map<std::string, std::unique_ptr<Lease>>& all() const { return leases_; }

  // Whether a request can ever be granted; the error says what to change.
  Status check(const admission::Request& r, const admission::TotalsFn& totals = {}) const {
    return engine_.check(r, totals);
  }
  // Takes a new lease into the queue and judges its arrival (only it can
  // have changed: admission::Engine::grantArrival). Returns the ids granted.
  std::vector<std::string> enqueue(std::unique_ptr<Lease> l, const admission::HeadroomFn& headroom);
  // A full pass over the queue (after a release, an expiry, or when headroom moved).
  std::vector<std::string> grant(const admission::HeadroomFn& headroom) {
    return engine_.grant(headroom);
  }
  // A granted lease leaves the queue (its connection's count too).
  void markGranted(Lease& l);
  // A waiting request leaves the queue without a grant.
  void cancel(Lease& l);
  // Requests whose queue deadline passed (still in the book; forget() them).
  std::vector<std::string> expire(std::uint64_t nowUs) { return engine_.expire(nowUs); }
  // What buffers of a pool's ended leases still hold (admission counts it
  // against the pool's GPU budget); true when it changed.
  bool setGpuResidue(const std::string& pool, std::uint64_t bytes) {
    return engine_.setGpuResidue(pool, bytes);
  }
  // A reload's pools, refused whole when they would strand a live lease
  // (admission::Engine::reconfigure); applied, the waiters they can never
  // grant, out of the queue (still in the book: the caller ends them).
  Result<std::vector<admission::Engine::Dropped>> reconfigure(std::vector<config::Pool> pools,
                                                              const admission::TotalsFn& totals) {
    return engine_.reconfigure(std::move(pools), totals);
  }
  // Recovery: a lease that already runs holds its pools without waiting. The
  // error says when that puts a pool over its limits.
  Status hold(std::unique_ptr<Lease> l);
  // The lease ends: its pools are free and it is gone from the book.
  void forget(const std::string& id);
  // Called with each lease forget() ends, before it goes (the in-kernel
  // charge is disarmed there): once per lease, whichever way it ended.
  void onForget(std::function<void(const Lease&)> f) { onForget_ = std::move(f); }

  // Waiting requests of one connection; the connection went away.
  std::size_t queuedOn(std::uint64_t conn) const;
  // Whether one more request of `conn` may wait: what one connection, and
  // everyone together, may keep queued (Limits). The error says which limit.
  Status roomToWait(std::uint64_t conn, uid_t uid, const Limits& limits) const;
  // Room for one more lease of `uid` (root: always), under `parent` ("" = a
  // top-level lease): max_leases_per_uid, max_children_per_lease.
  Status roomForLease(uid_t uid, const std::string& parent, const Limits& limits) const;
  // Whether a waiter waits on measured headroom, which moves by itself (the
  // other reasons change only when a lease ends).
  bool waitsOnMeasuredHeadroom() const;
  void connectionGone(std::uint64_t conn) { queuedPerConn_.erase(conn); }
  // Whether a lease is bound to the connection (its client, or a request waiting on it).
  bool holdsConnection(std::uint64_t conn) const;

  // The live lease (queued attach included) holding this cgroup, by path or inode.
  const Lease* ofCgroup(const std::string& cgroup, std::uint64_t inode) const;
  // A live lease whose cgroup holds `cgroup` or lies inside it: one workload,
  // one lease (a container's scope and its nested cgroup are one workload).
  // `parent`: the lease a child lease nests in, the one overlap allowed.
  const Lease* overlapping(const std::string& cgroup, const std::string& parent = {}) const;

  // Waiters whose place or reason changed since the last call, with their
  // new place and what they wait for, in numbers (admission::waitFigures).
  struct Move {
    Lease* lease;
    std::size_t position;  // 1-based
    std::size_t queued;    // the queue's length
    std::optional<admission::Wait> reason;
    std::string pool;  // the pool that holds it back ("" behind another request)
    admission::WaitFigures figures;
  };
  std::vector<Move> moves(const admission::HeadroomFn& headroom);
  // Waiters not told anything for `everyUs`: told again (one pass over the
  // queue, once per daemon tick), so a client always knows its wait is alive.
  std::vector<Move> due(std::uint64_t nowUs, std::uint64_t everyUs,
                        const admission::HeadroomFn& headroom);
  // One waiter's place and reason now (a request that must not wait is
  // refused with it); nullopt when `id` is not queued.
  std::optional<Move> waitOf(const std::string& id, const admission::HeadroomFn& headroom);
  // What waiter `index` (< queued()) waits for, in numbers and one line
  // (admission::waitFigures), without telling it: the seat rows show it.
  admission::WaitFigures waitAt(std::size_t index, const admission::HeadroomFn& headroom) const;

  const admission::Engine& engine() const { return engine_; }
  // A waiting attach's held figures measured again (admission::Engine::lowerHeld).
  void lowerHeld(const std::string& id, std::optional<std::uint64_t> hostBytes,
                 std::optional<std::uint64_t> gpuBytes) {
    engine_.lowerHeld(id, hostBytes, gpuBytes);
  }

 private:
  Move moveAt(std::size_t index, const admission::HeadroomFn& headroom, std::uint64_t nowUs);

 public:
  std::size_t live() const;  // granted or running
  std::size_t queued() const { return engine_.queued(); }

 private:
  void leftQueue(const Lease& l);
  std::map<std::string, std::unique_ptr<Lease>> leases_;
  std::function<void(const Lease&)> onForget_;
  admission::Engine engine_;
  std::map<std::uint64_t, std::size_t> queuedPerConn_;
  std::map<uid_t, std::size_t> queuedPerUid_;
  // Every lease in leases_, waiting or held, by owner and by parent.
  std::map<uid_t, std::size_t> leasesPerUid_;
  std::map<std::string, std::size_t> childrenOf_;
  void counted(const Lease& l);
  void uncounted(const Lease& l);
};

}  // namespace tally::daemon
