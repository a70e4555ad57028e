#include "daemon/service.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "cgroup/path.h"
#include "daemon/headroom.h"
#include "daemon/journal.h"
#include "daemon/service_lease.h"
#include "lease/outcome.h"
#include "lease/record.h"
#include "lease/spec.h"
#include "probes/cgroup_memory.h"
#include "probes/meminfo.h"
#include "probes/proc_cgroup.h"
#include "probes/sysfs_value.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::daemon {

using json = nlohmann::json;
namespace code = rpc::code;

namespace {

std::optional<std::uint64_t> readU64(const fs::Root& root, const std::string& rel) {
  auto t = root.read(rel, 64);
  if (!t) return std::nullopt;
  return probes::parseSysfsU64(*t);
}

json optJson(const std::optional<std::uint64_t>& v) { return v ? json(*v) : json(nullptr); }

const char* unitInterface(const std::string& unit) {
  if (text::endsWith(unit, ".service")) return "org.freedesktop.systemd1.Service";
  if (text::endsWith(unit, ".scope")) return "org.freedesktop.systemd1.Scope";
  if (text::endsWith(unit, ".slice")) return "org.freedesktop.systemd1.Slice";
  return nullptr;
}

}  // namespace

Service::Service(const config::Config& cfg, ledger::Ledger& ledger, ServiceEnv env)
    : cfg_(cfg), ledger_(ledger), env_(env), engine_(cfg.pools), hostCache_(std::make_unique<HostCache>()),
      startedAtNs_(clock::realtimeNs()) {
  // Every kind is exported from the start: a counter that appears only after
  // its first event loses that event in rate().
  for (auto v : {enforce::Verdict::HighCrossed, enforce::Verdict::HighCleared, enforce::Verdict::Kill, enforce::Verdict::Report}) {
    boundCounts_[enforce::verdictName(v)] = 0;
  }
  for (const char* c : {"exited", "killed-by-signal", "oom-killed", "stopped", "exec-failed", "containment-refused", "unknown", "ended",
                        "released", "lost", "killed-by-tally", "withdrawn"}) {
    outcomeCounts_[c] = 0;
  }
}

Service::~Service() = default;

void Service::reply(std::uint64_t conn, const json& id, const json& result) {
  if (conn) env_.outbox.send(conn, rpc::encodeReply(id, result));
}

void Service::fail(std::uint64_t conn, const json& id, const char* c, const std::string& message) {
  if (conn) env_.outbox.send(conn, rpc::encodeError(id, {c, message}));
}

std::size_t Service::liveLeases() const {
  return static_cast<std::size_t>(std::count_if(leases_.begin(), leases_.end(), [](const auto& kv) {
    return kv.second->state != Lease::State::Queued;
  }));
}

std::string Service::statusLine() const {
  return fmt::format("{} lease(s) held, {} queued, {} pool(s)", liveLeases(), engine_.queued(), cfg_.pools.size());
}

Service::Lease* Service::find(const std::string& id) {
  auto it = leases_.find(id);
  return it == leases_.end() ? nullptr : it->second.get();
}

Service::Lease* Service::owned(std::uint64_t conn, const Peer& peer, const json& id, const std::string& lease) {
  Lease* l = find(lease);
  if (!l) {
    fail(conn, id, code::kNotFound, fmt::format("no live lease {} (ended leases are in 'tally ledger')", lease));
    return nullptr;
  }
  if (peer.uid != 0 && peer.uid != l->owner) {
    fail(conn, id, code::kForbidden, fmt::format("lease {} belongs to uid {}; only its owner or root may do this", lease, l->owner));
    return nullptr;
  }
  return l;
}

void Service::handle(std::uint64_t conn, const Peer& peer, const rpc::Request& req) {
  using rpc::api::Method;
  auto m = rpc::api::parseMethod(req.method);
  if (!m) {
    return fail(conn, req.id, code::kUnknownMethod,
                fmt::format("unknown method '{}' ({})", text::truncateUtf8(text::trim(req.method), 64), rpc::api::methodList()));
  }
  // Every params object goes through its method's decoder; a refusal names the field.
  auto invalid = [&](const Error& e) { fail(conn, req.id, code::kInvalidParams, e.message); };
  switch (*m) {
    case Method::Acquire: {
      auto p = rpc::api::decodeAcquire(req.params);
      if (!p) return invalid(p.error());
      return onAcquire(conn, peer, req.id, p->declared, nullptr);
    }
    case Method::Attach: {
      auto p = rpc::api::decodeAttach(req.params);
      if (!p) return invalid(p.error());
      return onAcquire(conn, peer, req.id, p->declared, &*p);
    }
    case Method::Started: {
      auto p = rpc::api::decodeStarted(req.params);
      if (!p) return invalid(p.error());
      return onStarted(conn, peer, req.id, *p);
    }
    case Method::Complete: {
      auto p = rpc::api::decodeComplete(req.params);
      if (!p) return invalid(p.error());
      return onComplete(conn, peer, req.id, *p);
    }
    case Method::Bound: {
      auto p = rpc::api::decodeBound(req.params);
      if (!p) return invalid(p.error());
      return onBound(conn, peer, req.id, *p);
    }
    case Method::Resume:
    case Method::Release:
    case Method::Cancel:
    case Method::Lease: {
      auto p = rpc::api::decodeLeaseRef(req.params);
      if (!p) return invalid(p.error());
      if (*m == Method::Resume) return onResume(conn, peer, req.id, p->lease);
      if (*m == Method::Lease) return onLease(conn, req.id, p->lease);
      return onRelease(conn, peer, req.id, p->lease, *m == Method::Cancel);
    }
    case Method::Hello:
    case Method::Leases:
    case Method::Pools:
    case Method::Subscribe:
    case Method::Seats:
    case Method::Overview:
    case Method::Metrics: {
      if (auto s = rpc::api::decodeEmpty(req.params); !s) return invalid(s.error());
      if (*m == Method::Hello) return onHello(conn, peer, req.id);
      if (*m == Method::Leases) return onLeases(conn, req.id);
      if (*m == Method::Pools) return onPools(conn, req.id);
      if (*m == Method::Subscribe) return onSubscribe(conn, req.id);
      if (*m == Method::Seats) return onSeats(conn, req.id);
      if (*m == Method::Overview) return onOverview(conn, req.id);
      return onMetrics(conn, req.id);
    }
  }
}

bool Service::connectionInUse(std::uint64_t conn) const {
  if (subscribers_.count(conn) || queuedPerConn_.count(conn)) return true;
  return std::any_of(leases_.begin(), leases_.end(), [&](const auto& kv) { return kv.second->conn == conn; });
}

void Service::forget(const std::string& id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  if (it->second->state == Lease::State::Queued) leftQueue(*it->second);
  leases_.erase(it);
}

void Service::leftQueue(const Lease& l) {
  auto it = queuedPerConn_.find(l.conn);
  if (it == queuedPerConn_.end()) return;
  if (--it->second == 0) queuedPerConn_.erase(it);
}

void Service::onHello(std::uint64_t conn, const Peer& peer, const json& id) {
  reply(conn, id, {{"protocol", rpc::kProtocolVersion}, {"daemon_pid", ::getpid()}, {"uid", peer.uid},
                   {"state_dir", cfg_.daemon.stateDir}});
}

// acquire (a run lease: the client will run the scope) and attach (the daemon
// adopts a workload that already runs) share admission.
void Service::onAcquire(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Declared& d,
                        const rpc::api::Attach* attach) {
  // What one connection, and everyone together, may keep waiting.
  if (conn && queuedPerConn_.count(conn) && queuedPerConn_[conn] >= env_.limits.maxQueuedPerConnection) {
    return fail(conn, id, code::kBusy,
                fmt::format("this connection already has {} requests waiting (the limit); wait for a grant or cancel one",
                            env_.limits.maxQueuedPerConnection));
  }
  if (engine_.queued() >= env_.limits.maxQueued) {
    return fail(conn, id, code::kBusy,
                fmt::format("the daemon's queue is full ({} requests waiting); try again later", env_.limits.maxQueued));
  }
  enforce::GpuBound bound{d.gpuMemoryMax, d.gpuMemoryHigh, d.gpuAction.value_or(enforce::Action::Kill),
                          d.gpuOverSamples.value_or(enforce::kDefaultConsecutive), cfg_.daemon.sampleIntervalUs};
  auto l = std::make_unique<Lease>();
  l->id = lease::newLeaseId();
  l->kind = attach ? "attach" : "run";
  l->name = d.name.value_or(l->kind);
  l->owner = peer.uid;
  l->peerPid = peer.pid;
  l->conn = conn;
  l->requestedAtNs = clock::realtimeNs();
  l->req.id = l->id;
  l->req.pools = d.pools;
  l->req.memoryMax = d.memoryMax;
  l->req.gpuMemoryMax = d.gpuMemoryMax;
  l->req.priority = d.priority;
  l->bound = bound;
  l->attributes = d.attributes;
  applyCoverage(*l);
  std::uint64_t waitUs = d.timeoutUs.value_or(cfg_.daemon.queueTimeoutUs);
  if (waitUs) l->req.deadlineUs = clock::monotonicUs() + waitUs;
  if (auto s = engine_.check(l->req); !s) return fail(conn, id, code::kRefused, s.error().message);
  if (attach) {
    if (d.memoryMax && *d.memoryMax < env_.pageSize) {
      // memory.max counts pages: below one, the kernel reads 0 and OOM-kills the workload.
      return fail(conn, id, code::kInvalidParams,
                  fmt::format("\"memory_max\" {} is below one page ({} bytes); the kernel would round it to 0", *d.memoryMax, env_.pageSize));
    }
    if (auto denied = placeAttach(peer, *attach, *l)) return deny(conn, id, *denied);
  }
  l->pending = true;
  l->pendingId = id;
  std::string leaseId = l->id;
  engine_.enqueue(l->req);
  if (conn) ++queuedPerConn_[conn];
  leases_[leaseId] = std::move(l);
  // Only the new arrival's fate can have changed: no walk of a long queue.
  auto ids = engine_.grantArrival(leaseId, [this](const config::Pool& pool) { return headroomFor(pool); });
  for (const auto& gid : ids) {
    if (Lease* g = find(gid)) granted(*g);  // may refuse and forget the new lease
  }
  sendPositions();  // only the waiters whose place changed (the new one, at least)
}

// The attach target, resolved to one canonical cgroup and checked: the
// directory is opened without following symlinks, its owner and inode come
// from that open directory, and every rule applies to the canonical path.
std::optional<Service::Denial> Service::placeAttach(const Peer& peer, const rpc::api::Attach& a, Lease& l) {
  if (!env_.cgroupRoot) return Denial{code::kRefused, "the daemon has no cgroup v2 root to meter an attached workload in"};
  std::string path;
  if (!a.target.unit.empty()) {
    const std::string& unit = a.target.unit;
    if (!unitInterface(unit)) return Denial{code::kInvalidParams, fmt::format("\"unit\": '{}' is not a .service, .scope or .slice unit", unit)};
    if (!env_.units) return Denial{code::kRefused, "no systemd manager is reachable from the daemon; attach with --cgroup or --pid"};
    auto cg = env_.units->controlGroup(unit);
    if (!cg) return Denial{code::kRefused, cg.error().message};
    if (cg->empty()) return Denial{code::kRefused, fmt::format("unit {} has no control group; is it running?", unit)};
    path = *cg;
    l.unit = unit;
    l.target = {{"unit", unit}};
  } else if (!a.target.cgroup.empty()) {
    path = a.target.cgroup;
    l.target = {{"cgroup", path}};
  } else {
    pid_t pid = *a.target.pid;
    auto text = env_.proc.read(fmt::format("{}/cgroup", pid), 64 * 1024);
    if (!text) return Denial{code::kNotFound, fmt::format("process {}: {}", pid, text.error().message)};
    auto parsed = probes::parseProcCgroup(*text);
    if (!parsed || parsed->deleted || parsed->outsideNamespace) {
      return Denial{code::kRefused, fmt::format("process {} has no live cgroup v2 path the daemon can see", pid)};
    }
    path = parsed->path;
    l.target = {{"pid", pid}};
  }
  auto canonical = cgroup::canonicalPath(path);
  if (!canonical) return Denial{code::kRefused, fmt::format("cgroup '{}' {}", text::truncateUtf8(path, 256), canonical.error().message)};
  const std::string& cg = *canonical;
  if (cg == "/") return Denial{code::kRefused, "the root cgroup is the whole host, not a workload"};
  auto dir = env_.cgroupRoot->openDirBeneath(cg);
  if (!dir) return Denial{code::kNotFound, fmt::format("cgroup {}: {}", cg, dir.error().message)};
  auto st = dir->statSelf();
  if (!st) return Denial{code::kNotFound, fmt::format("cgroup {}: {}", cg, st.error().message)};
  if (peer.uid != 0 && st->st_uid != peer.uid) {
    return Denial{code::kForbidden, fmt::format("cgroup {} belongs to uid {}; only root or its owner may attach to it", cg, st->st_uid)};
  }
  if (peer.uid != 0 && l.req.memoryMax) {
    // The daemon writes for a user only what the user could write: never a
    // systemd unit's limit, and memory.max only where that file is theirs (a
    // delegated cgroup's own limits belong to whoever delegated it).
    if (!a.target.unit.empty() || unitInterface(std::string(fs::baseName(cg)))) {
      return Denial{code::kForbidden, "only root may set MemoryMax on a systemd unit through the daemon"};
    }
    auto knob = dir->lstat("memory.max");
    if (!knob || knob->st_uid != peer.uid || !S_ISREG(knob->st_mode)) {
      return Denial{code::kForbidden, fmt::format("{}/memory.max is not yours to write (it belongs to uid {}); only root may set "
                                                  "--memory-max on this cgroup",
                                                  cg, knob ? std::to_string(knob->st_uid) : std::string("?"))};
    }
  }
  auto inode = static_cast<std::uint64_t>(st->st_ino);
  if (const Lease* other = leaseOfCgroup(cg, inode)) {
    return Denial{code::kConflict, fmt::format("cgroup {} is already leased by {}", cg, other->id)};
  }
  l.cgroup = l.countersCgroup = cg;
  l.inode = inode;
  if (!populated(l)) return Denial{code::kRefused, fmt::format("cgroup {} has no processes (cgroup.events populated 0)", cg)};
  return std::nullopt;
}

const Service::Lease* Service::leaseOfCgroup(const std::string& cgroup, std::uint64_t inode) const {
  for (const auto& [id, other] : leases_) {
    if (other->cgroup.empty()) continue;
    if (other->cgroup == cgroup || (inode && other->inode == inode)) return other.get();
  }
  return nullptr;
}

json Service::grantBody(const Lease& l) const {
  json b;
  b["schema"] = 1;
  b["kind"] = l.kind;
  b["name"] = l.name;
  b["owner_uid"] = l.owner;
  b["peer_pid"] = l.peerPid;
  b["pools"] = l.req.pools;
  b["priority"] = l.req.priority;
  b["declared"] = {{"memory_max", optJson(l.req.memoryMax)}, {"gpu_memory_max", optJson(l.req.gpuMemoryMax)},
                   {"gpu_memory_high", optJson(l.bound.high)}, {"source", "declared"}};
  if (!l.attributes.empty()) b["declared"]["attributes"] = lease::attributesJson(l.attributes);
  if (l.bound.any()) {
    b["gpu_bound"] = {{"action", enforce::actionName(l.bound.action)}, {"consecutive_samples", l.bound.consecutive},
                      {"enforced_by", l.kind == "attach" ? "daemon" : "client"}};
  }
  b["requested_at_ns"] = l.requestedAtNs;
  if (!l.target.is_null()) b["target"] = l.target;
  return b;
}

void Service::tryGrant() {
  if (engine_.queued() == 0) return;
  auto ids = engine_.grant([this](const config::Pool& pool) { return headroomFor(pool); });
  for (const auto& id : ids) {
    if (Lease* l = find(id)) granted(*l);
  }
  if (!ids.empty()) sendPositions();
}

void Service::granted(Lease& l) {
  leftQueue(l);
  l.state = Lease::State::Granted;
  l.grantedAtNs = clock::realtimeNs();
  auto ev = ledger_.appendEvent(l.id, ledger::kGranted, grantBody(l).dump(), l.grantedAtNs);
  if (!ev) {
    // Fail closed: a lease the ledger cannot record is not granted.
    engine_.release(l.id);
    if (l.pending) fail(l.conn, l.pendingId, code::kInternal, fmt::format("the lease could not be recorded: {}", ev.error().message));
    forget(std::string(l.id));
    return;
  }
  announce(l, ledger::kGranted, grantBody(l));
  if (l.kind == "attach") {
    if (auto s = adopt(l); !s) {
      fail(l.conn, l.pendingId, code::kRefused, s.error().message);
      close(l, ledger::kWithdrawn, {{"reason", s.error().message}});  // frees l
      return;
    }
  }
  if (l.pending) {
    json r = leaseJson(l);
    reply(l.conn, l.pendingId, r);
    l.pending = false;
  }
  if (l.kind == "attach") l.conn = 0;  // an attached lease lives on without its client
}

// Applies --memory-max to an attached workload and reads it back, then meters it.
Status Service::adopt(Lease& l) {
  const fs::Root& root = *env_.cgroupRoot;
  if (l.req.memoryMax) {
    // A cgroup that is a systemd unit's (a podman scope, a service found by
    // --pid) gets its limit through systemd, which would otherwise undo a
    // direct write; it counts as the unit's only when systemd says so.
    std::string unit = l.unit;
    if (unit.empty() && env_.units && unitInterface(std::string(fs::baseName(l.cgroup)))) {
      std::string candidate(fs::baseName(l.cgroup));
      if (auto cg = env_.units->controlGroup(candidate); cg && *cg == l.cgroup) unit = candidate;
    }
    if (!unit.empty()) {
      if (!env_.units) return Error{0, "no systemd manager is reachable to set MemoryMax on " + unit};
      if (auto s = env_.units->setMemoryMax(unit, *l.req.memoryMax); !s) return Error{0, fmt::format("SetUnitProperties({}, MemoryMax={}): {}", unit, *l.req.memoryMax, s.error().message)};
      l.unit = unit;
    } else {
      if (auto s = root.write(fs::joinPath(l.cgroup, "memory.max"), std::to_string(*l.req.memoryMax)); !s) {
        return Error{s.error().code, s.error().message + " (to set --memory-max)"};
      }
    }
  }
  // Read back: the declared MemoryMax, and nothing else is touched.
  auto text = root.read(fs::joinPath(l.cgroup, "memory.max"), 64);
  if (!text) {
    if (l.req.memoryMax) return Error{0, fmt::format("cannot read back {}/memory.max: {}", l.cgroup, text.error().message)};
  } else if (auto lim = probes::parseMemoryLimit(*text)) {
    contain::AppliedLimits a;
    a.memoryMax = *lim;
    if (auto h = root.read(fs::joinPath(l.cgroup, "memory.high"), 64)) {
      if (auto hl = probes::parseMemoryLimit(*h)) a.memoryHigh = *hl;
    }
    if (auto g = readU64(root, fs::joinPath(l.cgroup, "memory.oom.group"))) a.oomGroup = *g == 1;
    if (l.req.memoryMax && !contain::limitMatches(l.req.memoryMax, *lim, env_.pageSize)) {
      return Error{0, fmt::format("{}/memory.max reads {} after MemoryMax={} was set; refusing the lease", l.cgroup, text::trim(*text),
                                  *l.req.memoryMax)};
    }
    l.applied = a;
  }
  if (auto ev = root.read(fs::joinPath(l.cgroup, "memory.events"), 4096)) {
    if (auto parsed = probes::parseFlatKeyed(*ev)) l.oomKillsAtAdoption = parsed->get("oom_kill");
  }
  l.state = Lease::State::Running;
  l.startedAtNs = clock::realtimeNs();
  json body = {{"unit", l.unit}, {"cgroup", l.cgroup}, {"cgroup_inode", l.inode}, {"counters_cgroup", l.countersCgroup},
               {"oom_kill_at_adoption", optJson(l.oomKillsAtAdoption)}};
  if (l.applied) body["applied"] = {{"memory_max", l.applied->memoryMax.unlimited ? json("max") : json(l.applied->memoryMax.bytes)}, {"source", "cgroup"}};
  if (auto ev = ledger_.appendEvent(l.id, ledger::kAdopted, body.dump(), l.startedAtNs); !ev) return ev.error();
  announce(l, ledger::kAdopted, body);
  startMetering(l);
  if (l.target.contains("pid")) (void)env_.watches.watchPid(l.id, static_cast<pid_t>(l.target["pid"].get<std::uint64_t>()));
  return Ok{};
}

void Service::startMetering(Lease& l) {
  l.meter = std::make_unique<lease::LeaseMeter>(env_.proc, env_.sys, *env_.cgroupRoot, l.cgroup, l.req.gpuMemoryMax);
  l.meter->sample();
  std::string events = fmt::format("{}/{}", env_.cgroupRoot->path(), fs::joinPath(l.countersCgroup, "cgroup.events"));
  if (auto s = env_.watches.watch(l.id, events); !s) {
    fmt::print(stderr, "tally daemon: lease {}: cannot watch {}: {}; its end is found by polling\n", l.id, events, s.error().message);
  }
}

Result<bool> Service::readPopulated(const Lease& l) const {
  if (!env_.cgroupRoot) return Error{0, "the daemon has no cgroup v2 root"};
  auto t = env_.cgroupRoot->read(fs::joinPath(l.countersCgroup, "cgroup.events"), 4096);
  if (!t) {
    if (t.error().code == ENOENT) return false;  // gone: nothing runs there
    return t.error();
  }
  auto ev = probes::parseFlatKeyed(*t);
  if (!ev || !ev->get("populated")) return Error{0, "cgroup.events has no 'populated' line"};
  return *ev->get("populated") == 1;
}

bool Service::populated(const Lease& l) const {
  auto p = readPopulated(l);
  return p && *p;  // unreadable counts as not running, as a vanished cgroup does
}

void Service::sendPositions() {
  // Only the waiters whose place changed hear about it: a request appended
  // to the queue tells itself, not the 10,000 ahead of it.
  std::size_t from = engine_.positionsChangedFrom();
  engine_.positionsSeen();
  std::size_t total = engine_.queued();
  for (std::size_t i = from; i < total; ++i) {
    auto q = engine_.at(i);
    Lease* l = find(q.req->id);
    if (!l || !l->pending) continue;
    std::size_t pos = i + 1;
    if (l->lastPosition == pos) continue;
    l->lastPosition = pos;
    env_.outbox.send(l->conn, rpc::encodeEvent(l->pendingId, "queued",
                                               {{"lease", l->id}, {"position", pos}, {"queued", total},
                                                {"waiting_for", q.reason ? admission::waitName(*q.reason) : "grant"}}));
  }
}

void Service::onStarted(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Started& p) {
  Lease* l = owned(conn, peer, id, p.lease);
  if (!l) return;
  if (l->kind != "run" || l->state != Lease::State::Granted) {
    return fail(conn, id, code::kConflict, fmt::format("lease {} is not a granted run lease waiting to start", l->id));
  }
  if (!env_.cgroupRoot) return fail(conn, id, code::kRefused, "the daemon has no cgroup v2 root to meter the lease in");
  // The cgroup must be this lease's own (its name carries the lease id) and
  // belong to the caller, so a client cannot point the daemon at someone
  // else's workload (release would stop it).
  if (fs::baseName(p.cgroup).find(l->id) == std::string_view::npos) {
    return fail(conn, id, code::kForbidden, fmt::format("cgroup {} is not lease {}'s (its name must contain the lease id)", p.cgroup, l->id));
  }
  auto dir = env_.cgroupRoot->openDirBeneath(p.cgroup);
  if (!dir) return fail(conn, id, code::kNotFound, fmt::format("cgroup {}: {}", p.cgroup, dir.error().message));
  auto st = dir->statSelf();
  if (!st) return fail(conn, id, code::kNotFound, fmt::format("cgroup {}: {}", p.cgroup, st.error().message));
  if (peer.uid != 0 && st->st_uid != peer.uid) {
    return fail(conn, id, code::kForbidden, fmt::format("cgroup {} belongs to uid {}, not to the caller", p.cgroup, st->st_uid));
  }
  // Where the final counters are read: the lease's cgroup, below it, or the
  // lease's own slice (systemd removes a stopped scope's cgroup at once, so
  // a scope's counters live in its parent tally-<id>.slice). Never anyone
  // else's cgroup: its memory.peak would become this lease's.
  std::string counters = p.countersCgroup.empty() ? p.cgroup : p.countersCgroup;
  bool ownSlice = counters == fs::parentPath(p.cgroup) && fs::baseName(counters).find(l->id) != std::string_view::npos;
  if (!cgroup::isWithin(counters, p.cgroup) && !ownSlice) {
    return fail(conn, id, code::kForbidden,
                fmt::format("\"counters_cgroup\" {} is neither cgroup {}, below it, nor the lease's own slice", counters, p.cgroup));
  }
  if (counters != p.cgroup) {
    auto cdir = env_.cgroupRoot->openDirBeneath(counters);
    if (!cdir) return fail(conn, id, code::kNotFound, fmt::format("counters cgroup {}: {}", counters, cdir.error().message));
    auto cst = cdir->statSelf();
    if (cst && peer.uid != 0 && cst->st_uid != peer.uid) {
      return fail(conn, id, code::kForbidden, fmt::format("counters cgroup {} belongs to uid {}, not to the caller", counters, cst->st_uid));
    }
  }
  auto inode = static_cast<std::uint64_t>(st->st_ino);
  if (const Lease* other = leaseOfCgroup(p.cgroup, inode); other && other != l) {
    return fail(conn, id, code::kConflict, fmt::format("cgroup {} is already leased by {}", p.cgroup, other->id));
  }
  l->unit = p.unit;
  l->cgroup = p.cgroup;
  l->countersCgroup = counters;
  l->inode = inode;
  l->state = Lease::State::Running;
  l->startedAtNs = clock::realtimeNs();
  l->conn = conn;
  l->graceDeadlineUs = 0;
  json body = {{"unit", l->unit}, {"cgroup", l->cgroup}, {"cgroup_inode", l->inode}, {"counters_cgroup", l->countersCgroup}};
  if (auto ev = ledger_.appendEvent(l->id, ledger::kStarted, body.dump(), l->startedAtNs); !ev) {
    return fail(conn, id, code::kInternal, fmt::format("the start could not be recorded: {}", ev.error().message));
  }
  announce(*l, ledger::kStarted, body);
  startMetering(*l);
  reply(conn, id, leaseJson(*l));
}

void Service::onComplete(std::uint64_t conn, const Peer& peer, const json& id, rpc::api::Complete& p) {
  Lease* l = owned(conn, peer, id, p.lease);
  if (!l) return;
  if (l->kind != "run") return fail(conn, id, code::kConflict, "only run leases are completed by their client");
  // An outcome exists only for a workload that started: a queued request or
  // a grant that never started has nothing to report (release withdraws it).
  if (l->state != Lease::State::Running) {
    return fail(conn, id, code::kConflict,
                fmt::format("lease {} is {}, not running: there is no outcome to record (release it to withdraw it)", l->id,
                            l->state == Lease::State::Queued ? "queued" : "granted but never started"));
  }
  json& record = p.record;
  // What the daemon saw itself, beside what the client reports.
  json seen;
  if (l->meter) {
    const auto& h = l->meter->host();
    const auto& g = l->meter->gpu();
    seen["samples"] = h.samples;
    seen["memory_peak_sampled_bytes"] = optJson(h.peakCurrent);
    seen["gpu_samples"] = g.samples;
    seen["gpu_peak_bytes"] = optJson(g.peakBytes);
    seen["source"] = "cgroup, drm-fdinfo";
  }
  if (env_.cgroupRoot && !l->countersCgroup.empty()) {
    auto counters = lease::readFinalCounters(*env_.cgroupRoot, l->countersCgroup);
    if (counters.memoryPeak) seen["memory_peak_bytes"] = *counters.memoryPeak;
    if (counters.events) seen["oom_kill"] = optJson(counters.events->get("oom_kill"));
  }
  if (l->boundRefused) seen["bound_events_refused"] = l->boundRefused;
  record["daemon"] = seen;
  if (l->recovered) record["daemon"]["readopted_after_restart"] = true;
  auto ev = ledger_.appendEvent(l->id, ledger::kOutcome, record.dump(-1, ' ', false, json::error_handler_t::replace));
  if (!ev) return fail(conn, id, ev.error().code == EEXIST ? code::kConflict : code::kInternal, ev.error().message);
  announce(*l, ledger::kOutcome, record);
  json r = {{"lease", l->id}, {"seq", ev->seq}, {"hash", ev->hash}};
  std::string leaseId = l->id;
  engine_.release(leaseId);
  env_.watches.unwatch(leaseId);
  forget(leaseId);
  reply(conn, id, r);
  tryGrant();
}

void Service::onResume(std::uint64_t conn, const Peer& peer, const json& id, const std::string& lease) {
  Lease* l = owned(conn, peer, id, lease);
  if (!l) return;
  if (l->kind != "run") return fail(conn, id, code::kConflict, "only run leases have a client to resume");
  if (l->state == Lease::State::Queued) return fail(conn, id, code::kConflict, fmt::format("lease {} is still queued; there is nothing to resume", l->id));
  l->conn = conn;
  l->graceDeadlineUs = 0;
  reply(conn, id, leaseJson(*l));
}

void Service::requestStop(Lease& l) {
  // The scope's processes get SIGTERM now and SIGKILL (cgroup.kill) after the
  // same grace systemd gives a stopping scope.
  if (!env_.cgroupRoot) return;
  if (auto procs = env_.cgroupRoot->read(fs::joinPath(l.cgroup, "cgroup.procs"), 1 << 20)) {
    std::string_view rest = *procs;
    while (!rest.empty()) {
      auto nl = rest.find('\n');
      auto pid = text::parseU64(rest.substr(0, nl));
      if (pid && *pid > 1) ::kill(static_cast<pid_t>(*pid), SIGTERM);
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
  }
  l.killDeadlineUs = clock::monotonicUs() + 10'000'000;
}

void Service::onRelease(std::uint64_t conn, const Peer& peer, const json& reqId, const std::string& lease, bool cancelOnly) {
  Lease* l = owned(conn, peer, reqId, lease);
  if (!l) return;
  std::string id = l->id;
  if (l->state == Lease::State::Queued) {
    engine_.cancel(id);
    fail(l->conn, l->pendingId, code::kCancelled, fmt::format("request {} was cancelled by uid {}", id, peer.uid));
    if (l->conn != conn) reply(conn, reqId, {{"lease", id}, {"state", "cancelled"}});
    forget(id);
    tryGrant();
    sendPositions();
    return;
  }
  if (cancelOnly) return fail(conn, reqId, code::kConflict, fmt::format("lease {} is no longer queued; use release", id));
  json releasedBody = {{"by_uid", peer.uid}, {"by_pid", peer.pid}};
  if (ledger_.appendEvent(id, ledger::kReleased, releasedBody.dump())) announce(*l, ledger::kReleased, releasedBody);
  if (l->state == Lease::State::Granted) {
    close(*l, ledger::kWithdrawn, {{"reason", fmt::format("released by uid {} before it started", peer.uid)}});
    return reply(conn, reqId, {{"lease", id}, {"state", "withdrawn"}});
  }
  if (l->kind == "attach") {
    finishAttached(*l, true);
    return reply(conn, reqId, {{"lease", id}, {"state", "released"}});
  }
  // A running run lease: its workload is stopped; the client reports the outcome.
  l->releaseRequested = true;
  requestStop(*l);
  if (!l->conn) l->graceDeadlineUs = clock::monotonicUs() + cfg_.daemon.clientGraceUs;
  reply(conn, reqId, {{"lease", id}, {"state", "stopping"}});
}

void Service::close(Lease& l, const char* kind, const json& body) {
  std::string id = l.id;
  if (auto ev = ledger_.appendEvent(id, kind, body.dump()); !ev) {
    // Nothing lost: the row goes to the log when the ledger refuses it.
    fmt::print(stderr, "tally daemon: lease {}: {}; the {} row follows\n{}\n", id, ev.error().message, kind, body.dump());
  }
  announce(l, kind, body);
  engine_.release(id);
  env_.watches.unwatch(id);
  forget(id);
  tryGrant();
}

void Service::finishAttached(Lease& l, bool released) {
  lease::LeaseRecord rec;
  rec.spec.id = l.id;
  rec.spec.name = l.name;
  rec.spec.memoryMax = l.req.memoryMax;
  rec.spec.gpuMemoryMax = l.req.gpuMemoryMax;
  rec.spec.gpuMemoryHigh = l.bound.high;
  rec.spec.gpuAction = l.bound.action;
  rec.spec.gpuConsecutive = l.bound.consecutive;
  rec.spec.sampleIntervalUs = cfg_.daemon.sampleIntervalUs;
  rec.gpuBound = l.boundEvents;
  rec.manager = "attached";
  rec.unit = l.unit;
  rec.cgroup = l.cgroup;
  rec.applied = l.applied;
  rec.startedAtNs = l.startedAtNs;
  rec.endedAtNs = clock::realtimeNs();
  if (l.meter) {
    l.meter->sample();
    rec.host = l.meter->host();
    rec.gpu = l.meter->gpu();
  }
  lease::AttachedFacts f;
  f.released = released;
  f.oomKillsAtAdoption = l.oomKillsAtAdoption;
  f.tallyKill = l.tallyKill;
  if (l.applied) f.memoryMax = l.applied->memoryMax;
  rec.counters = lease::readFinalCounters(*env_.cgroupRoot, l.countersCgroup);
  f.memoryEvents = rec.counters.events;
  f.memoryEventsUnknown = rec.counters.eventsUnknown;
  rec.outcome = lease::classifyAttached(f);
  json body = lease::recordJson(rec);
  body["lease"]["kind"] = "attach";
  if (!l.target.is_null()) body["lease"]["target"] = l.target;
  if (l.recovered) body["daemon"] = {{"readopted_after_restart", true}};
  close(l, ledger::kOutcome, body);
}

void Service::closeLost(Lease& l, const std::string& why) {
  lease::LeaseRecord rec;
  rec.spec.id = l.id;
  rec.spec.name = l.name;
  rec.spec.memoryMax = l.req.memoryMax;
  rec.spec.gpuMemoryMax = l.req.gpuMemoryMax;
  rec.manager = l.kind == "attach" ? "attached" : "client";
  rec.unit = l.unit;
  rec.cgroup = l.cgroup;
  rec.startedAtNs = l.startedAtNs;
  rec.endedAtNs = clock::realtimeNs();
  if (l.meter) {
    rec.host = l.meter->host();
    rec.gpu = l.meter->gpu();
  } else if (l.recovered) {
    // This daemon never metered it; the samples taken before the restart
    // are summarised from the ledger below ("ledger_samples").
    rec.host.lastError = "not sampled since the daemon restarted; see ledger_samples";
    rec.gpu.lastError = rec.host.lastError;
  }
  if (env_.cgroupRoot && !l.countersCgroup.empty()) rec.counters = lease::readFinalCounters(*env_.cgroupRoot, l.countersCgroup);
  rec.outcome.cls = lease::OutcomeClass::Lost;
  rec.outcome.hasExitStatus = false;
  rec.outcome.summary = "how the workload ended is unknown: " + why;
  if (rec.counters.events) rec.outcome.oomKills = rec.counters.events->get("oom_kill");
  json body = lease::recordJson(rec);
  body["lease"]["kind"] = l.kind;
  // The samples the ledger kept are facts too: their peaks, from the ledger.
  if (auto samples = ledger_.samples(l.id); samples && !samples->empty()) {
    std::optional<std::uint64_t> mem, gpu;
    for (const auto& s : *samples) {
      if (s.memoryCurrent && (!mem || *s.memoryCurrent > *mem)) mem = s.memoryCurrent;
      if (s.gpuBytes && (!gpu || *s.gpuBytes > *gpu)) gpu = s.gpuBytes;
    }
    body["ledger_samples"] = {{"count", samples->size()}, {"memory_current_peak_bytes", optJson(mem)}, {"gpu_peak_bytes", optJson(gpu)},
                              {"first_at_ns", samples->front().atNs}, {"last_at_ns", samples->back().atNs}};
  }
  stopLeaseSlice(l);
  close(l, ledger::kLost, body);
}

// A run lease's client makes and removes its slice (tally-<id>.slice); a
// client killed before it could leaves the slice behind, active and empty.
// (The slice is <parent>-<id>.slice: lease::leaseSliceName.)
// The daemon, closing the lease, stops it. Only that slice: its name carries
// the lease id and it is the parent of the lease's cgroup.
void Service::stopLeaseSlice(const Lease& l) {
  if (l.kind != "run" || !env_.units || l.countersCgroup.empty() || l.countersCgroup == l.cgroup) return;
  std::string slice(fs::baseName(l.countersCgroup));
  if (!text::endsWith(slice, l.id + ".slice") || fs::parentPath(l.cgroup) != l.countersCgroup) return;
  if (auto s = env_.units->stopUnit(slice); !s) {
    note(4, fmt::format("lease {}: could not stop its slice {}: {}", l.id, slice, s.error().message), {{"TALLY_LEASE", l.id}});
  }
}

void Service::cgroupChanged(const std::string& leaseId) {
  Lease* l = find(leaseId);
  if (!l || l->state != Lease::State::Running) return;
  if (populated(*l)) return;
  if (l->kind == "attach") return finishAttached(*l, false);
  // A run lease's workload ended: its client reports the outcome; without a
  // client the lease is lost after the grace.
  if (!l->conn && !l->graceDeadlineUs) l->graceDeadlineUs = clock::monotonicUs() + cfg_.daemon.clientGraceUs;
}

void Service::disconnected(std::uint64_t conn) {
  subscribers_.erase(conn);
  queuedPerConn_.erase(conn);
  std::vector<std::string> ids;
  for (auto& [id, l] : leases_) {
    if (l->conn == conn) ids.push_back(id);
  }
  for (const auto& id : ids) {
    Lease* l = find(id);
    if (!l) continue;
    l->conn = 0;
    l->pending = false;
    if (l->state == Lease::State::Queued) {
      engine_.cancel(id);  // the waiter went away: its request goes with it
      forget(id);
    } else if (l->kind == "run") {
      // The client may come back (resume); until the grace ends the lease stays.
      l->graceDeadlineUs = clock::monotonicUs() + cfg_.daemon.clientGraceUs;
    }
  }
  if (!ids.empty()) {
    tryGrant();
    sendPositions();
  }
}

void Service::tick() {
  std::uint64_t now = clock::monotonicUs();
  bool changed = false;
  for (const auto& id : engine_.expire(now)) {
    changed = true;
    Lease* l = find(id);
    if (!l) continue;
    fail(l->conn, l->pendingId, code::kTimeout, fmt::format("no grant within the queue timeout (position {} of {})",
                                                            l->lastPosition.value_or(0), engine_.queued() + 1));
    forget(id);
  }
  std::vector<std::string> lost, stuck;
  for (auto& [id, l] : leases_) {
    if (l->killDeadlineUs && now >= l->killDeadlineUs) {
      l->killDeadlineUs = 0;
      if (env_.cgroupRoot && populated(*l)) {
        if (auto s = env_.cgroupRoot->write(fs::joinPath(l->cgroup, "cgroup.kill"), "1"); !s) {
          fmt::print(stderr, "tally daemon: lease {}: {}\n", id, s.error().message);
        }
      }
    }
    if (l->graceDeadlineUs && now >= l->graceDeadlineUs && !l->conn) {
      if (l->state == Lease::State::Granted) stuck.push_back(id);
      else if (l->state == Lease::State::Running && (l->kind != "run" || !populated(*l))) lost.push_back(id);
      else l->graceDeadlineUs = 0;  // still running without its client: it may resume later
    }
  }
  for (const auto& id : stuck) {
    if (Lease* l = find(id)) close(*l, ledger::kWithdrawn, {{"reason", "the client went away before the workload started"}});
  }
  for (const auto& id : lost) {
    if (Lease* l = find(id)) closeLost(*l, "the workload ended while its client was away and it never reported (no wait status)");
  }
  // Grants happen when something is released; the tick only retries the
  // requests that wait on measured headroom, which changes by itself.
  bool headroomWait = false;
  for (const auto& q : engine_.queueView()) {
    if (q.reason == admission::Wait::HostHeadroom || q.reason == admission::Wait::GpuHeadroom) {
      headroomWait = true;
      break;
    }
  }
  if (changed || headroomWait) {
    tryGrant();
    sendPositions();
  }
}

void Service::sample() {
  std::uint64_t now = clock::realtimeNs();
  std::vector<std::string> ended;
  std::vector<ledger::Sample> batch;
  for (auto& [id, l] : leases_) {
    if (l->state != Lease::State::Running || !l->meter) continue;
    l->meter->sample();
    const auto& h = l->meter->host();
    const auto& g = l->meter->gpu();
    ledger::Sample s{id, now, h.last, g.lastBytes, std::nullopt, std::nullopt};
    if (g.lastBytes) {
      auto get = [&](const char* r) -> std::optional<std::uint64_t> {
        auto it = g.lastRegions.find(r);
        return it == g.lastRegions.end() ? std::optional<std::uint64_t>() : it->second;
      };
      s.gttBytes = get("gtt");
      s.vramBytes = get("vram");
    }
    batch.push_back(std::move(s));
    if (l->kind == "attach" && l->bound.any()) enforceBound(*l, now);
    // A missed inotify event (or none possible) is caught here.
    if (l->kind == "attach" && !populated(*l)) ended.push_back(id);
  }
  if (auto st = ledger_.appendSamples(batch); !st) fmt::print(stderr, "tally daemon: {}\n", st.error().message);
  for (const auto& id : ended) cgroupChanged(id);
}

// One sample of an attached lease through its GPU bound.
void Service::enforceBound(Lease& l, std::uint64_t nowNs) {
  const auto& g = l.meter->gpu();
  auto d = enforce::observe(l.bound, l.boundState, g.lastBytes, g.lastSource, nowNs);
  for (const auto& e : enforce::eventsOf(d, nowNs)) recordBound(l, e);
  if (d.verdict != enforce::Verdict::Kill) return;
  l.tallyKill = d.summary;
  // The lease's cgroup and nothing else: KillUnit when systemd owns it (it
  // would restart or mis-account a unit killed behind its back), else
  // cgroup.kill on the leased cgroup.
  Status s = !l.unit.empty() && env_.units ? env_.units->killUnit(l.unit, SIGKILL)
                                           : env_.cgroupRoot->write(fs::joinPath(l.cgroup, "cgroup.kill"), "1");
  if (!s) {
    l.tallyKill.reset();
    l.boundState.acted = false;  // try again next sample
    note(3, fmt::format("lease {} ({}): could not kill it over its gpu_memory_max: {}", l.id, l.name, s.error().message),
         {{"TALLY_LEASE", l.id}});
  }
}

// A bound event: in the lease's rows, to subscribers, and to the journal.
void Service::recordBound(Lease& l, const enforce::BoundEvent& e) {
  l.boundEvents.push_back(e);
  ++boundCounts_[enforce::verdictName(e.kind)];
  json body = enforce::boundEventJson(e);
  body["source"] = l.meter ? l.meter->gpu().lastSource : "drm-fdinfo";
  if (auto r = ledger_.appendEvent(l.id, ledger::kGpuBound, body.dump(), e.atNs); !r) {
    fmt::print(stderr, "tally daemon: lease {}: the ledger refused a gpu-bound row: {}\n", l.id, r.error().message);
  }
  json fields = body;
  fields["lease"] = l.id;
  fields["name"] = l.name;
  broadcast("gpu-bound", fields);
  auto entry = boundEventEntry(l.id, l.name, e);
  note(entry.priority, entry.message, entry.fields);
}

void Service::broadcast(const std::string& event, const json& fields) {
  for (const auto& [conn, id] : subscribers_) env_.outbox.send(conn, rpc::encodeEvent(id, event, fields));
}

void Service::announce(const Lease& l, const std::string& kind, const json& body) {
  auto entry = lifecycleEntry(kind, l.id, l.name, l.req.pools, body);
  for (const auto& [k, v] : entry.fields) {
    if (k == "TALLY_OUTCOME") ++outcomeCounts_[v];
  }
  note(entry.priority, entry.message, entry.fields);
}

void Service::note(int priority, const std::string& message, const std::vector<std::pair<std::string, std::string>>& fields) {
  if (env_.journal) env_.journal->note(priority, message, fields);
  else fmt::print(stderr, "tally daemon: {}\n", message);
}

// A run lease's client reports what its GPU bound noticed or did. Only while
// the lease runs, and at most Limits::boundBurst at once, then one per
// Limits::boundRefillUs: a client cannot fill the ledger and the journal.
void Service::onBound(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Bound& p) {
  Lease* l = owned(conn, peer, id, p.lease);
  if (!l) return;
  if (l->kind != "run" || l->state != Lease::State::Running) {
    return fail(conn, id, code::kConflict,
                fmt::format("lease {} is not a running run lease; only its client reports GPU bound events, while it runs", l->id));
  }
  std::uint64_t now = clock::monotonicUs();
  if (!l->boundRefillAtUs) {
    l->boundTokens = env_.limits.boundBurst;
  } else if (now > l->boundRefillAtUs) {
    l->boundTokens = std::min<double>(env_.limits.boundBurst,
                                      l->boundTokens + static_cast<double>(now - l->boundRefillAtUs) /
                                                           static_cast<double>(env_.limits.boundRefillUs));
  }
  l->boundRefillAtUs = now;
  if (l->boundTokens < 1.0) {
    if (l->boundRefused++ == 0) {
      note(4, fmt::format("lease {} ({}): its client reports GPU bound events faster than {} at once and one per {} ms; "
                          "the excess is refused and counted in the outcome",
                          l->id, l->name, env_.limits.boundBurst, env_.limits.boundRefillUs / 1000),
           {{"TALLY_LEASE", l->id}});
    }
    return fail(conn, id, code::kRateLimited,
                fmt::format("too many GPU bound events for lease {}; this one was not recorded ({} refused so far)", l->id, l->boundRefused));
  }
  l->boundTokens -= 1.0;
  enforce::BoundEvent e = p.event;
  e.atNs = clock::realtimeNs();
  if (e.kind == enforce::Verdict::Kill) l->tallyKill = e.summary;
  recordBound(*l, e);
  reply(conn, id, {{"recorded", true}});
}

void Service::onSubscribe(std::uint64_t conn, const json& id) {
  subscribers_[conn] = id;
  reply(conn, id, {{"subscribed", {"gpu-bound", "coverage"}}});
}

void Service::prune() {
  auto r = ledger_.pruneSamples(clock::realtimeNs(), cfg_.daemon.samplesFullResolutionUs * 1000, cfg_.daemon.samplesMaxAgeUs * 1000,
                                cfg_.daemon.samplesMaxRows);
  if (!r) fmt::print(stderr, "tally daemon: sample retention: {}\n", r.error().message);
}

// The kernel charges GTT: MemoryMax bounds it, so gpu_memory_max only
// reports, unless the operator keeps it (keep_gpu_memory_max).
void Service::applyCoverage(Lease& l) const {
  if (coverage_ != coverage::Coverage::HostAndGtt || cfg_.daemon.keepGpuMemoryMax || !l.bound.max) return;
  l.bound.action = enforce::Action::Report;
  l.advisory = true;
}

// A lease's host memory without its GPU memory: memory.current, less the
// GTT the kernel charged into it when it charges GTT (the same bytes are the
// lease's GPU memory; counting them in both would count them twice).
std::optional<std::uint64_t> Service::hostOnly(const Lease& l) const {
  if (!l.meter) return std::nullopt;
  auto current = l.meter->host().last;
  if (!current || coverage_ != coverage::Coverage::HostAndGtt) return current;
  const auto& regions = l.meter->gpu().lastRegions;
  auto gtt = regions.find("gtt");
  if (!l.meter->gpu().lastBytes || gtt == regions.end()) return std::nullopt;  // the split is unknown
  return *current > gtt->second ? *current - gtt->second : 0;
}

// The coverage this daemon found at start, recorded once per start; a change
// from the last recorded one (a new kernel, a new module option) is said in
// the ledger and the journal with what tally now does differently.
void Service::setCoverage(const coverage::Assessment& a) {
  coverage_ = a.verdict.coverage;
  coverageKernel_ = a.kernel;
  json body = {{"kernel", a.kernel}, {"coverage", coverage::coverageName(a.verdict.coverage)}, {"basis", a.verdict.basis},
               {"verdict", a.verdict.line}, {"static_signs", coverage::signsJson(a.signs)},
               {"active_probe", a.probe ? json(coverage::probeJson(*a.probe)) : json(nullptr)},
               {"keep_gpu_memory_max", cfg_.daemon.keepGpuMemoryMax}};
  auto last = coverage::lastRecorded(ledger_);
  std::string now = coverage::coverageName(a.verdict.coverage);
  bool covered = a.verdict.coverage == coverage::Coverage::HostAndGtt;
  std::string doing = covered ? fmt::format("budgets and headroom stop adding fdinfo GTT to host memory; tally run maps --gpu-memory-max "
                                            "onto MemoryMax; gpu_memory_max {}",
                                            cfg_.daemon.keepGpuMemoryMax ? "still kills (keep_gpu_memory_max)" : "is advisory (reports, never kills)")
                              : "tally bounds GTT itself: gpu_memory_max kills, MemoryMax bounds host memory only";
  if (last && (last->coverage != now || last->kernel != a.kernel)) {
    body["changed_from"] = {{"kernel", last->kernel}, {"coverage", last->coverage}};
    if (last->coverage != now) {
      note(4, fmt::format("GTT coverage changed from {} (kernel {}) to {} (kernel {}): {}", last->coverage, last->kernel, now, a.kernel, doing),
           {{"TALLY_EVENT", "coverage-changed"}, {"TALLY_COVERAGE", now}, {"TALLY_KERNEL", a.kernel}});
    }
  }
  body["tally_does"] = doing;
  if (auto r = ledger_.appendEvent("", ledger::kCoverage, body.dump()); !r) {
    fmt::print(stderr, "tally daemon: the ledger refused the coverage row: {}\n", r.error().message);
  }
  broadcast("coverage", body);
}

void Service::refreshHost() {
  // Host figures are read at most once per 100 ms, however many requests wait.
  std::uint64_t now = clock::monotonicUs();
  if (hostCache_->readAtUs && now - hostCache_->readAtUs <= 100'000) return;
  hostCache_->readAtUs = now;
  hostCache_->figures.memAvailable.reset();
  if (auto t = env_.proc.read("meminfo", 64 * 1024)) hostCache_->figures.memAvailable = probes::parseMemInfo(*t).memAvailable;
  if (auto d = devices::discoverDrmDevices(env_.sys)) hostCache_->figures.devices = std::move(*d);
  else hostCache_->figures.devices = {};
}

admission::Headroom Service::headroomFor(const config::Pool& pool) {
  refreshHost();
  std::vector<HolderUse> holders;
  for (const auto& id : engine_.usage(pool.name).holders) {
    const Lease* l = const_cast<Service*>(this)->find(id);
    if (!l) continue;
    HolderUse u;
    u.memoryMax = l->req.memoryMax;
    u.gpuMemoryMax = l->req.gpuMemoryMax;
    if (l->meter) {
      u.memoryInUse = hostOnly(*l);
      u.gpuInUse = l->meter->gpu().lastBytes;
    }
    holders.push_back(u);
  }
  return poolHeadroom(pool, hostCache_->figures, holders);
}

json Service::leaseJson(const Lease& l, const admission::Engine::Queued* queued, std::size_t index) const {
  static constexpr const char* kStates[] = {"queued", "granted", "running"};
  json j;
  j["lease"] = l.id;
  j["name"] = l.name;
  j["kind"] = l.kind;
  j["state"] = kStates[static_cast<int>(l.state)];
  j["owner_uid"] = l.owner;
  j["pools"] = l.req.pools;
  j["priority"] = l.req.priority;
  j["declared"] = {{"memory_max", optJson(l.req.memoryMax)}, {"gpu_memory_max", optJson(l.req.gpuMemoryMax)}};
  j["requested_at_ns"] = l.requestedAtNs;
  if (l.state == Lease::State::Queued) {
    auto position = queued ? std::optional<std::size_t>(index + 1) : engine_.position(l.id);
    auto why = queued ? queued->reason : engine_.waitReason(l.id);
    j["position"] = position ? json(*position) : json(nullptr);
    j["waiting_for"] = why ? json(admission::waitName(*why)) : json(nullptr);
  } else {
    j["granted_at_ns"] = l.grantedAtNs;
  }
  if (!l.target.is_null()) j["target"] = l.target;
  if (!l.unit.empty()) j["unit"] = l.unit;
  if (!l.cgroup.empty()) {
    j["cgroup"] = l.cgroup;
    j["cgroup_inode"] = l.inode;
    j["started_at_ns"] = l.startedAtNs;
  }
  j["client_connected"] = l.conn != 0;
  if (l.recovered) j["readopted_after_restart"] = true;
  if (l.releaseRequested) j["release_requested"] = true;
  if (l.meter) {
    const auto& h = l.meter->host();
    const auto& g = l.meter->gpu();
    j["memory"] = {{"current_bytes", optJson(h.last)}, {"peak_sampled_bytes", optJson(h.peakCurrent)}, {"samples", h.samples},
                   {"source", "cgroup"}};
    if (!h.last && h.lastError) j["memory"]["unknown"] = *h.lastError;
    j["gpu"] = {{"current_bytes", optJson(g.lastBytes)}, {"peak_bytes", optJson(g.peakBytes)}, {"regions", g.lastRegions},
                {"samples", g.samples}, {"source", "drm-fdinfo"}};
    if (!g.lastBytes) j["gpu"]["unknown"] = g.lastError.value_or(g.samplesIncomplete ? "a client printed no resident figure" : "not sampled");
    // What budgets and headroom count: host and GPU memory, each byte once.
    auto host = hostOnly(l);
    j["budget_figures"] = {{"coverage", coverage::coverageName(coverage_)}, {"host_bytes", optJson(host)}, {"gpu_bytes", optJson(g.lastBytes)},
                           {"total_bytes", host && g.lastBytes ? json(*host + *g.lastBytes) : json(nullptr)}};
  }
  if (l.bound.any()) {
    j["gpu_bound"] = {{"action", enforce::actionName(l.bound.action)}, {"consecutive_samples", l.bound.consecutive},
                      {"advisory", l.advisory}, {"acted", l.boundState.acted}};
  }
  if (coverage_ == coverage::Coverage::HostAndGtt && l.req.memoryMax && l.req.gpuMemoryMax) {
    // The kernel bounds GTT in MemoryMax now: a run lease's MemoryMax must hold both.
    j["memory_max_effective"] = *l.req.memoryMax + *l.req.gpuMemoryMax;
  }
  j["coverage"] = coverage::coverageName(coverage_);
  return j;
}

void Service::onLeases(std::uint64_t conn, const json& id) {
  json list = json::array();
  for (const auto& [leaseId, l] : leases_) {
    if (l->state != Lease::State::Queued) list.push_back(leaseJson(*l));
  }
  auto view = engine_.queueView();
  for (std::size_t i = 0; i < view.size(); ++i) {
    if (const Lease* l = find(view[i].req->id)) list.push_back(leaseJson(*l, &view[i], i));
  }
  reply(conn, id, {{"leases", list}});
}

void Service::onLease(std::uint64_t conn, const json& reqId, const std::string& leaseId) {
  const std::string* id = &leaseId;
  json r;
  if (const Lease* l = find(*id)) r = leaseJson(*l);
  auto events = ledger_.events(*id);
  if (events && !events->empty()) {
    json rows = json::array();
    for (const auto& e : *events) {
      json body = json::parse(e.body, nullptr, false);
      rows.push_back({{"seq", e.seq}, {"at_ns", e.atNs}, {"kind", e.kind}, {"body", body}, {"hash", e.hash}});
    }
    r["ledger"] = rows;
    if (!r.contains("state")) {
      r["lease"] = *id;
      r["state"] = "ended";
    }
  }
  if (r.is_null()) return fail(conn, reqId, code::kNotFound, fmt::format("no lease {} (live or in the ledger)", *id));
  reply(conn, reqId, r);
}

json Service::poolsJson() {
  json list = json::array();
  for (const auto& p : cfg_.pools) {
    const auto& u = engine_.usage(p.name);
    json j;
    j["pool"] = p.name;
    j["capacity"] = p.capacity;
    j["holders"] = u.holders;
    json queued = json::array();
    for (const auto* r : engine_.queue()) {
      if (std::find(r->pools.begin(), r->pools.end(), p.name) != r->pools.end()) queued.push_back(r->id);
    }
    j["queue"] = queued;
    j["memory_budget"] = optJson(p.memoryBudget);
    j["memory_declared"] = u.memoryDeclared;
    j["gpu_memory_budget"] = optJson(p.gpuMemoryBudget);
    j["gpu_memory_declared"] = u.gpuMemoryDeclared;
    j["devices"] = p.devices;
    auto h = headroomFor(p);
    j["headroom"] = {{"host_bytes", optJson(h.hostBytes)}, {"gpu_bytes", optJson(h.gpuBytes)},
                     {"source", "meminfo MemAvailable, sysfs-device mem_info_*, minus holders' unused declarations"}};
    if (!h.hostBytes) j["headroom"]["host_unknown"] = "MemAvailable not readable";
    if (!h.gpuBytes) j["headroom"]["gpu_unknown"] = "no device of the pool exports mem_info_gtt/vram_{total,used}";
    list.push_back(j);
  }
  return list;
}

void Service::onPools(std::uint64_t conn, const json& id) { reply(conn, id, {{"pools", poolsJson()}}); }

Result<std::vector<std::string>> Service::recover() {
  std::vector<std::string> log;
  auto open = ledger_.openLeases();
  if (!open) return Error{0, fmt::format("cannot read the open leases from the ledger: {}", open.error().message)};
  for (const auto& events : *open) {
    auto l = std::make_unique<Lease>();
    l->id = events.front().leaseId;
    l->recovered = true;
    json started;
    for (const auto& e : events) {
      json body = json::parse(e.body, nullptr, false);
      if (!body.is_object()) continue;
      if (e.kind == ledger::kGranted) {
        l->kind = body.value("kind", "run");
        l->name = body.value("name", "lease");
        l->owner = body.value("owner_uid", 0u);
        l->grantedAtNs = e.atNs;
        l->requestedAtNs = body.value("requested_at_ns", std::uint64_t{0});
        l->req.id = l->id;
        if (body.contains("pools") && body["pools"].is_array()) {
          for (const auto& p : body["pools"]) {
            if (p.is_string()) l->req.pools.push_back(p.get<std::string>());
          }
        }
        l->req.priority = body.value("priority", 0);
        const json& d = body.contains("declared") ? body["declared"] : json::object();
        if (d.contains("memory_max") && d["memory_max"].is_number_unsigned()) l->req.memoryMax = d["memory_max"].get<std::uint64_t>();
        if (d.contains("gpu_memory_max") && d["gpu_memory_max"].is_number_unsigned()) l->req.gpuMemoryMax = d["gpu_memory_max"].get<std::uint64_t>();
        l->bound.max = l->req.gpuMemoryMax;
        l->bound.sampleIntervalUs = cfg_.daemon.sampleIntervalUs;
        if (d.contains("gpu_memory_high") && d["gpu_memory_high"].is_number_unsigned()) l->bound.high = d["gpu_memory_high"].get<std::uint64_t>();
        if (body.contains("gpu_bound") && body["gpu_bound"].is_object()) {
          const json& gb = body["gpu_bound"];
          if (auto a = enforce::parseAction(gb.value("action", "kill"))) l->bound.action = *a;
          l->bound.consecutive = std::clamp(gb.value("consecutive_samples", enforce::kDefaultConsecutive), 1u, 100u);
        }
        applyCoverage(*l);
        if (auto attrs = lease::attributesFromJson(d.contains("attributes") ? d["attributes"] : json())) l->attributes = std::move(*attrs);
        if (body.contains("target")) l->target = body["target"];
      } else if (e.kind == ledger::kStarted || e.kind == ledger::kAdopted) {
        started = body;
        l->startedAtNs = e.atNs;
        if (body.contains("oom_kill_at_adoption") && body["oom_kill_at_adoption"].is_number_unsigned()) {
          l->oomKillsAtAdoption = body["oom_kill_at_adoption"].get<std::uint64_t>();
        }
      } else if (e.kind == ledger::kReleased) {
        l->releaseRequested = true;
      } else if (e.kind == ledger::kGpuBound && body.value("kind", "") == enforce::verdictName(enforce::Verdict::Kill)) {
        // Killed before the restart: the outcome still names it, and it is not killed twice.
        l->tallyKill = body.value("summary", "");
        l->boundState.acted = true;
      }
    }
    Lease& ref = *l;
    leases_[l->id] = std::move(l);
    if (auto s = engine_.hold(ref.req); !s) log.push_back(fmt::format("lease {}: re-admitted over its pools' limits: {}", ref.id, s.error().message));
    if (started.is_null()) {
      // Granted, never started: a run lease's client may still be setting up.
      ref.state = Lease::State::Granted;
      ref.graceDeadlineUs = clock::monotonicUs() + cfg_.daemon.clientGraceUs;
      log.push_back(fmt::format("lease {} ({}): granted, not started; waiting for its client to resume", ref.id, ref.name));
      continue;
    }
    ref.unit = started.value("unit", "");
    ref.cgroup = started.value("cgroup", "");
    ref.countersCgroup = started.value("counters_cgroup", ref.cgroup);
    ref.inode = started.value("cgroup_inode", std::uint64_t{0});
    ref.state = Lease::State::Running;
    // Same identity: the unit still has this cgroup, and the directory is the
    // very one (inode), not a new cgroup of the same name.
    std::string why;
    if (!env_.cgroupRoot) {
      why = "the daemon has no cgroup v2 root";
    } else if (auto st = env_.cgroupRoot->stat(ref.cgroup); !st) {
      why = fmt::format("its cgroup {} is gone", ref.cgroup);
    } else if (static_cast<std::uint64_t>(st->st_ino) != ref.inode) {
      why = fmt::format("cgroup {} was re-created (inode {} is not the recorded {})", ref.cgroup, st->st_ino, ref.inode);
    } else if (ref.kind == "attach" && !ref.unit.empty() && env_.units) {
      auto cg = env_.units->controlGroup(ref.unit);
      if (cg && *cg != ref.cgroup) why = fmt::format("unit {} now has cgroup '{}'", ref.unit, *cg);
    }
    if (why.empty() && ref.kind == "attach" && !populated(ref)) why = fmt::format("cgroup {} emptied while the daemon was down", ref.cgroup);
    if (!why.empty() && ref.kind == "attach") {
      log.push_back(fmt::format("lease {} ({}): lost: {}", ref.id, ref.name, why));
      closeLost(ref, why + " (the daemon was not running)");
      continue;
    }
    if (!why.empty()) {
      // A run lease's client holds the outcome; it may still report it.
      log.push_back(fmt::format("lease {} ({}): {}; waiting for its client to report", ref.id, ref.name, why));
      ref.graceDeadlineUs = clock::monotonicUs() + cfg_.daemon.clientGraceUs;
      continue;
    }
    json readopted = {{"cgroup", ref.cgroup}, {"cgroup_inode", ref.inode}, {"unit", ref.unit}};
    if (ledger_.appendEvent(ref.id, ledger::kReadopted, readopted.dump())) announce(ref, ledger::kReadopted, readopted);
    startMetering(ref);
    if (ref.target.contains("pid") && ref.target["pid"].is_number_integer()) {
      (void)env_.watches.watchPid(ref.id, static_cast<pid_t>(ref.target["pid"].get<std::int64_t>()));
    }
    if (ref.kind == "run") ref.graceDeadlineUs = clock::monotonicUs() + cfg_.daemon.clientGraceUs;
    log.push_back(fmt::format("lease {} ({}): re-adopted {}", ref.id, ref.name, ref.cgroup));
  }
  return log;
}

}  // namespace tally::daemon
