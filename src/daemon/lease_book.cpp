#include "daemon/lease_book.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "cgroup/path.h"
#include "util/clock.h"

namespace tally::daemon {

Status LeaseBook::roomToWait(std::uint64_t conn, uid_t uid, const Limits& limits) const {
  // One user's queue never fills everyone's: root (the operator) is not counted.
  if (uid != 0) {
    auto it = queuedPerUid_.find(uid);
    if (it != queuedPerUid_.end() && it->second >= limits.maxQueuedPerUid) {
      return Error{EBUSY,
                   fmt::format("uid {} already has {} requests waiting (max_queued_per_uid); "
                               "wait for a grant or cancel one",
                               uid, limits.maxQueuedPerUid)};
    }
  }
  if (conn && queuedOn(conn) >= limits.maxQueuedPerConnection) {
    return Error{EBUSY, fmt::format("this connection already has {} requests waiting (the limit); "
                                    "wait for a grant or cancel one",
                                    limits.maxQueuedPerConnection)};
  }
  if (queued() >= limits.maxQueued) {
    return Error{EBUSY, fmt::format("the daemon's queue is full ({} requests waiting); try again "
                                    "later",
                                    limits.maxQueued)};
  }
  return Ok{};
}

Status LeaseBook::roomForLease(uid_t uid, const std::string& parent, const Limits& limits) const {
  if (uid != 0) {
    auto it = leasesPerUid_.find(uid);
    if (it != leasesPerUid_.end() && it->second >= limits.maxLeasesPerUid) {
      return Error{
          EBUSY, fmt::format("uid {} already has {} leases, waiting or held (max_leases_per_uid); "
                             "release one, or ask the operator to raise the budget",
                             uid, limits.maxLeasesPerUid)};
    }
  }
  if (!parent.empty()) {
    auto it = childrenOf_.find(parent);
    if (it != childrenOf_.end() && it->second >= limits.maxChildrenPerLease) {
      return Error{EBUSY, fmt::format("lease {} already has {} child leases "
                                      "(max_children_per_lease); release one first",
                                      parent, limits.maxChildrenPerLease)};
    }
  }
  return Ok{};
}

void LeaseBook::counted(const Lease& l) {
  ++leasesPerUid_[l.owner];
  if (!l.parent.empty()) ++childrenOf_[l.parent];
}

void LeaseBook::uncounted(const Lease& l) {
  if (auto u = leasesPerUid_.find(l.owner); u != leasesPerUid_.end() && --u->second == 0)
    leasesPerUid_.erase(u);
  if (l.parent.empty()) return;
  if (auto c = childrenOf_.find(l.parent); c != childrenOf_.end() && --c->second == 0)
    childrenOf_.erase(c);
}

bool LeaseBook::waitsOnMeasuredHeadroom() const {
  for (std::size_t i = 0, n = queued(); i < n; ++i) {
    auto reason = engine_.at(i).reason;
    if (reason == admission::Wait::HostHeadroom || reason == admission::Wait::GpuHeadroom)
      return true;
  }
  return false;
}

void Lease::planFor(const enforce::KernelState& kernel, std::uint64_t sampleIntervalUs) {
  planKernel_ = kernel;
  planIntervalUs_ = sampleIntervalUs;
  plan_ = enforce::plan(lease::boundsOf(req.declaration, sampleIntervalUs), nullptr, kernel);
}

void Lease::nestIn(const Lease& p) {
  parent = p.id;
  plan_ = enforce::plan(lease::boundsOf(req.declaration, planIntervalUs_), &p.plan_, planKernel_);
}

const char* stateName(Lease::State s) {
  switch (s) {
    case Lease::State::Queued:
      return "queued";
    case Lease::State::Granted:
      return "granted";
    case Lease::State::Running:
      return "running";
  }
  return "?";
}

Lease* LeaseBook::find(const std::string& id) {
  auto it = leases_.find(id);
  return it == leases_.end() ? nullptr : it->second.get();
}

const Lease* LeaseBook::find(const std::string& id) const {
  auto it = leases_.find(id);
  return it == leases_.end() ? nullptr : it->second.get();
}

std::vector<std::string> LeaseBook::enqueue(std::unique_ptr<Lease> l,
                                            const admission::HeadroomFn& headroom) {
  std::string id = l->id;
  engine_.enqueue(l->req);
  if (l->client().conn) ++queuedPerConn_[l->client().conn];
  ++queuedPerUid_[l->owner];
  counted(*l);
  leases_[id] = std::move(l);
  return engine_.grantArrival(id, headroom);
}

void LeaseBook::leftQueue(const Lease& l) {
  if (auto u = queuedPerUid_.find(l.owner); u != queuedPerUid_.end() && --u->second == 0)
    queuedPerUid_.erase(u);
  auto it = queuedPerConn_.find(l.client().conn);
  if (it == queuedPerConn_.end()) return;
  if (--it->second == 0) queuedPerConn_.erase(it);
}

void LeaseBook::markGranted(Lease& l) {
  leftQueue(l);
  l.markGranted(clock::realtimeNs());
}

void LeaseBook::cancel(Lease& l) {
  engine_.cancel(l.id);
  leftQueue(l);
}

Status LeaseBook::hold(std::unique_ptr<Lease> l) {
  auto s = engine_.hold(l->req);
  std::string id = l->id;
  counted(*l);
  leases_[id] = std::move(l);
  return s;
}

void LeaseBook::forget(const std::string& id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  if (it->second->state() == Lease::State::Queued) {
    engine_.cancel(id);
    leftQueue(*it->second);
  } else {
    engine_.release(id);
  }
  if (onForget_) onForget_(*it->second);
  uncounted(*it->second);
  leases_.erase(it);
}

std::size_t LeaseBook::queuedOn(std::uint64_t conn) const {
  auto it = queuedPerConn_.find(conn);
  return it == queuedPerConn_.end() ? 0 : it->second;
}

bool LeaseBook::holdsConnection(std::uint64_t conn) const {
  if (queuedOn(conn)) return true;
  return std::any_of(leases_.begin(), leases_.end(),
                     [&](const auto& kv) { return kv.second->client().conn == conn; });
}

const Lease* LeaseBook::ofCgroup(const std::string& cgroup, std::uint64_t inode) const {
  for (const auto& [id, other] : leases_) {
    if (other->place.cgroup.empty()) continue;
    if (other->place.cgroup == cgroup || (inode && other->place.inode == inode)) return other.get();
  }
  return nullptr;
}

admission::WaitFigures LeaseBook::waitAt(std::size_t index,
                                         const admission::HeadroomFn& headroom) const {
  auto q = engine_.at(index);
  if (!q.reason) return {};
  const config::Pool* pool = nullptr;
  for (const auto& p : engine_.pools())
    if (p.name == engine_.waitPool(index)) pool = &p;
  if (!pool && *q.reason != admission::Wait::Behind) return {};
  static const config::Pool kNone{};
  bool measured =
      *q.reason == admission::Wait::HostHeadroom || *q.reason == admission::Wait::GpuHeadroom;
  admission::Headroom h = measured && pool && headroom ? headroom(*pool) : admission::Headroom{};
  return admission::waitFigures(*q.req, *q.reason, pool ? *pool : kNone,
                                engine_.usage(pool ? pool->name : std::string()), h);
}

LeaseBook::Move LeaseBook::moveAt(std::size_t index, const admission::HeadroomFn& headroom,
                                  std::uint64_t nowUs) {
  auto q = engine_.at(index);
  Lease* l = find(q.req->id);
  Move m{l, index + 1, engine_.queued(), q.reason, engine_.waitPool(index), {}};
  m.figures = waitAt(index, headroom);
  if (l) {
    l->toldPosition(index + 1, nowUs);
  }
  return m;
}

std::vector<LeaseBook::Move> LeaseBook::moves(const admission::HeadroomFn& headroom) {
  // Only the waiters whose place or reason changed: a request appended to the
  // queue tells itself, not the 10,000 ahead of it.
  std::vector<Move> out;
  std::uint64_t now = clock::monotonicUs();
  std::size_t from = engine_.positionsChangedFrom();
  engine_.positionsSeen();
  std::size_t total = engine_.queued();
  std::set<std::size_t> told;
  for (std::size_t i = from; i < total; ++i) {
    Lease* l = find(engine_.at(i).req->id);
    if (!l || !l->client().pending || l->client().lastPosition == i + 1) continue;
    out.push_back(moveAt(i, headroom, now));
    told.insert(i);
  }
  for (std::size_t i : engine_.takeReasonChanges()) {
    if (i >= total || told.count(i)) continue;
    Lease* l = find(engine_.at(i).req->id);
    if (!l || !l->client().pending) continue;
    out.push_back(moveAt(i, headroom, now));
  }
  return out;
}

std::vector<LeaseBook::Move> LeaseBook::due(std::uint64_t nowUs, std::uint64_t everyUs,
                                            const admission::HeadroomFn& headroom) {
  std::vector<Move> out;
  for (std::size_t i = 0; i < engine_.queued(); ++i) {
    Lease* l = find(engine_.at(i).req->id);
    if (!l || !l->client().pending || nowUs - l->client().lastToldUs < everyUs) continue;
    out.push_back(moveAt(i, headroom, nowUs));
  }
  return out;
}

std::optional<LeaseBook::Move> LeaseBook::waitOf(const std::string& id,
                                                 const admission::HeadroomFn& headroom) {
  for (std::size_t i = 0; i < engine_.queued(); ++i)
    if (engine_.at(i).req->id == id) return moveAt(i, headroom, clock::monotonicUs());
  return std::nullopt;
}

const Lease* LeaseBook::overlapping(const std::string& cgroup, const std::string& parent) const {
  // Equal paths are ofCgroup's to find; here one holds the other.
  auto within = [](const std::string& inner, const std::string& outer) {
    return cgroup::isWithin(inner, outer);
  };
  for (const auto& [id, l] : leases_) {
    const std::string& other = l->place.cgroup;
    if (other.empty() || other == cgroup || id == parent) continue;
    if (within(cgroup, other) || within(other, cgroup)) return l.get();
  }
  return nullptr;
}

std::size_t LeaseBook::live() const {
  return static_cast<std::size_t>(std::count_if(leases_.begin(), leases_.end(), [](const auto& kv) {
    return kv.second->state() != Lease::State::Queued;
  }));
}

}  // namespace tally::daemon
