// The daemon's lease service: admission over the configured pools, the live
// leases (run leases whose client runs the scope, attached workloads the
// daemon adopts), their meters, and the ledger rows that record them. One
// instance lives in the event loop; every entry point runs to completion
// without blocking on a client (replies go through the Outbox).
//
// Who may do what (docs/daemon.md, "Access"):
//   anyone who can connect   hello, pools, leases, lease, acquire
//   the lease's owner, root  started, complete, resume, release, cancel
//   root                     attach (and anyone to a cgroup directory they own,
//                            without --memory-max on a unit)
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
#include "daemon/seams.h"
#include "fs/root.h"
#include "lease/meter.h"
#include "ledger/ledger.h"
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
};

class Service {
 public:
  using json = nlohmann::json;
  Service(const config::Config& cfg, ledger::Ledger& ledger, ServiceEnv env);
  ~Service();

  // Re-adopts the leases the ledger says are open (after a restart, kill -9
  // included). Returns one line per lease for the log.
  std::vector<std::string> recover();

  void handle(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void disconnected(std::uint64_t conn);
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

  void onHello(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void onAcquire(std::uint64_t conn, const Peer& peer, const rpc::Request& req, bool attach);
  void onStarted(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void onComplete(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void onResume(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void onRelease(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void onLeases(std::uint64_t conn, const rpc::Request& req);
  void onLease(std::uint64_t conn, const rpc::Request& req);
  void onPools(std::uint64_t conn, const rpc::Request& req);
  void onBound(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void onSubscribe(std::uint64_t conn, const rpc::Request& req);
  void onSeats(std::uint64_t conn, const rpc::Request& req);
  void onOverview(std::uint64_t conn, const rpc::Request& req);
  void onMetrics(std::uint64_t conn, const rpc::Request& req);
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
  Lease* owned(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void tryGrant();
  void granted(Lease& l);
  Status adopt(Lease& l);
  void startMetering(Lease& l);
  void sendPositions();
  void close(Lease& l, const char* kind, const json& body);
  void finishAttached(Lease& l, bool released);
  void closeLost(Lease& l, const std::string& why);
  void requestStop(Lease& l);
  json leaseJson(const Lease& l) const;
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
  coverage::Coverage coverage_ = coverage::Coverage::HostOnly;
  std::string coverageKernel_;
  std::uint64_t startedAtNs_ = 0;
  // Since the daemon started: GPU bound events by kind, ended leases by outcome class.
  std::map<std::string, std::uint64_t> boundCounts_, outcomeCounts_;
};

}  // namespace tally::daemon
