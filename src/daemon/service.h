// The daemon's lease service: admission over the configured pools, the live
// leases (run leases whose client runs the scope, attached workloads the
// daemon adopts), their meters, and the ledger rows that record them. One
// instance lives in the event loop; every entry point runs to completion
// without blocking on a client (replies go through the Outbox).
//
// Who may do what (docs/daemon.md, "Access"):
//   anyone who can connect   hello, pools, leases, lease, acquire
//   the lease's owner, root  started, complete, resume, release, cancel, bound
//   root                     attach (and anyone to a cgroup directory they own;
//                            --memory-max only where they could write
//                            memory.max themselves, never on a systemd unit)
//
// Every request's params go through one typed decoder (rpc/lease_api.h), and
// every path a client names is made canonical before any rule sees it. A
// request is accepted only in the lease states where it means something
// (started: granted; complete and bound: running), otherwise "conflict".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "admission/engine.h"
#include "config/config.h"
#include "contain/verify.h"
#include "coverage/assess.h"
#include "enforce/gpu_bound.h"
#include "daemon/limits.h"
#include "daemon/seams.h"
#include "fs/root.h"
#include "lease/meter.h"
#include "ledger/ledger.h"
#include "rpc/lease_api.h"
#include "rpc/protocol.h"
#include "seats/seat.h"

namespace tally::daemon {

struct ServiceEnv {
  const fs::Root& proc;
  const fs::Root& sys;
  const fs::Root* cgroupRoot = nullptr;  // null: no cgroup v2 root (attach and run leases refused)
  Outbox& outbox;
  Watches& watches;
  Units* units = nullptr;  // null: no systemd manager reachable
  std::uint64_t pageSize = 4096;
  Journal* journal = nullptr;  // null: messages go to stderr
  Limits limits = {};
};

class Service {
 public:
  using json = nlohmann::json;
  Service(const config::Config& cfg, ledger::Ledger& ledger, ServiceEnv env);
  ~Service();

  // Re-adopts the leases the ledger says are open (after a restart, kill -9
  // included). Returns one line per lease for the log, or the error that
  // kept the open leases from being read (the daemon must not start then).
  Result<std::vector<std::string>> recover();

  // One request, decoded and answered (a reply or an error on `conn`). An
  // exception here is a bug; daemon/dispatch.h is the boundary that turns it
  // into an "internal" reply.
  void handle(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void disconnected(std::uint64_t conn);
  // Whether a connection holds something the daemon must keep it for: a lease
  // bound to it, a request waiting for its reply, a subscription.
  bool connectionInUse(std::uint64_t conn) const;
  // inotify on a lease's cgroup.events fired.
  void cgroupChanged(const std::string& leaseId);
  // Housekeeping: queue timeouts, client grace, stop escalation, grants.
  void tick();
  // Meters every running lease once and stores the samples.
  void sample();
  // Sample retention, run every minute or so.
  void prune();

  // GTT -> memcg coverage found at start: recorded in the ledger (a change
  // from the last start is said), and used by admission, headroom and bounds.
  void setCoverage(const coverage::Assessment& a);
  coverage::Coverage coverage() const { return coverage_; }

  // The seat rows (one per lease) and the whole picture tally top and the
  // metrics are made of: seats, pools, devices, unattributed GPU memory,
  // coverage, enforcement counters. `nowNs` is CLOCK_REALTIME.
  json seats(std::uint64_t nowNs);
  json overview(std::uint64_t nowNs);

  std::size_t liveLeases() const;
  std::size_t queuedRequests() const { return engine_.queued(); }
  std::string statusLine() const;

  struct Lease;

 private:
  void reply(std::uint64_t conn, const json& id, const json& result);
  void fail(std::uint64_t conn, const json& id, const char* code, const std::string& message);

  // A refusal: the error code and the message the client reads.
  struct Denial {
    const char* code;
    std::string message;
  };
  void deny(std::uint64_t conn, const json& id, const Denial& d) { fail(conn, id, d.code, d.message); }

  void onHello(std::uint64_t conn, const Peer& peer, const json& id);
  void onAcquire(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Declared& d,
                 const rpc::api::Attach* attach);
  void onStarted(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Started& p);
  void onComplete(std::uint64_t conn, const Peer& peer, const json& id, rpc::api::Complete& p);
  void onResume(std::uint64_t conn, const Peer& peer, const json& id, const std::string& lease);
  void onRelease(std::uint64_t conn, const Peer& peer, const json& id, const std::string& lease, bool cancelOnly);
  void onLeases(std::uint64_t conn, const json& id);
  void onLease(std::uint64_t conn, const json& id, const std::string& lease);
  void onPools(std::uint64_t conn, const json& id);
  void onBound(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Bound& p);
  void onSubscribe(std::uint64_t conn, const json& id);
  void onSeats(std::uint64_t conn, const json& id);
  void onOverview(std::uint64_t conn, const json& id);
  void onMetrics(std::uint64_t conn, const json& id);
  // Where an attach request's workload lives (canonical cgroup, its inode
  // and owner), and whether this peer may lease it with these limits.
  std::optional<Denial> placeAttach(const Peer& peer, const rpc::api::Attach& a, Lease& l);
  // The live lease (queued attach included) holding this cgroup, by path or inode.
  const Lease* leaseOfCgroup(const std::string& cgroup, std::uint64_t inode) const;
  // Drops a lease from the book (and from its connection's queue count).
  void forget(const std::string& id);
  // A queued lease left the queue (granted, cancelled, expired, gone).
  void leftQueue(const Lease& l);
  json poolsJson();
  json devicesJson(json& unattributed);
  void refreshHost();
  // A ledger row of a lease's life, announced: to the journal
  // (TALLY_EVENT=lease-<kind>) and, for an end, to the outcome counters.
  void announce(const Lease& l, const std::string& kind, const json& body);
  seats::SeatFacts seatFacts(const Lease& l) const;
  void enforceBound(Lease& l, std::uint64_t nowNs);
  void recordBound(Lease& l, const enforce::BoundEvent& e);
  void broadcast(const std::string& event, const json& fields);
  void note(int priority, const std::string& message, const std::vector<std::pair<std::string, std::string>>& fields);

  Lease* find(const std::string& id);
  Lease* owned(std::uint64_t conn, const Peer& peer, const json& id, const std::string& lease);
  void tryGrant();
  void granted(Lease& l);
  Status adopt(Lease& l);
  void startMetering(Lease& l);
  void sendPositions();
  void close(Lease& l, const char* kind, const json& body);
  void finishAttached(Lease& l, bool released);
  void closeLost(Lease& l, const std::string& why);
  void stopLeaseSlice(const Lease& l);
  void requestStop(Lease& l);
  // A lease as the RPC shows it; a queued one's place comes from `queued`
  // (a queue view's entry and index) when the caller has it, else it is looked up.
  json leaseJson(const Lease& l, const admission::Engine::Queued* queued = nullptr, std::size_t index = 0) const;
  json grantBody(const Lease& l) const;
  bool populated(const Lease& l) const;
  // cgroup.events "populated" of the lease; a removed cgroup is false.
  Result<bool> readPopulated(const Lease& l) const;
  admission::Headroom headroomFor(const config::Pool& pool);
  std::optional<std::uint64_t> hostOnly(const Lease& l) const;
  void applyCoverage(Lease& l) const;

  config::Config cfg_;
  ledger::Ledger& ledger_;
  ServiceEnv env_;
  admission::Engine engine_;
  std::map<std::string, std::unique_ptr<Lease>> leases_;
  std::optional<std::uint64_t> headroomReadAtUs_;
  struct HostCache;
  std::unique_ptr<HostCache> hostCache_;
  std::map<std::uint64_t, json> subscribers_;  // conn -> the subscribe request's id
  std::map<std::uint64_t, std::size_t> queuedPerConn_;  // waiting requests per connection
  coverage::Coverage coverage_ = coverage::Coverage::HostOnly;
  std::string coverageKernel_;
  std::uint64_t startedAtNs_ = 0;
  // Since the daemon started: GPU bound events by kind, ended leases by outcome class.
  std::map<std::string, std::uint64_t> boundCounts_, outcomeCounts_;
};

}  // namespace tally::daemon
