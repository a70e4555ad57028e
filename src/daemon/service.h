// The daemon's lease service: it decodes each request, checks who may do it,
// and moves leases between their states (queued → granted → running →
// ended). What it moves is owned elsewhere, one owner per concern:
//
//   LeaseBook    the leases and the admission engine (daemon/lease_book.h)
//   LeaseEvents  ledger rows, the journal, subscribers, counters (lease_events.h)
//   Sampler      metering and the GPU bound of attached leases (sampler.h)
//   PoolMeasures headroom and totals from the meters and the host snapshot (headroom.h)
//   Endings      how a lease ends (endings.h)
//   placement    where a lease runs: an attach target resolved and adopted,
//                a run lease's cgroup checked (placement.h)
//   recovery     re-adopting open leases after a restart (recovery.h)
//   Views        what the RPC and the metrics show (views.h)
//   declared     the config's [leases.*]: each run of a declared unit
//                leased (declared_leases.h)
//
// One instance lives in the event loop; every entry point runs to completion
// without blocking on a client (replies go through the Outbox).
//
// Who may do what (docs/daemon.md, "Access"):
//   anyone who can connect   hello, pools, leases, lease, seats, overview,
//                            metrics, subscribe, acquire
//   the lease's owner, root  started, complete, bound, resume, release, cancel
//   root                     reload; attach (and anyone to a cgroup directory they own;
//                            --memory-max only where they could write
//                            memory.max themselves, never on a systemd unit)
//
// Every request's params go through one typed decoder (rpc/lease_api.h), and
// every path a client names is made canonical before any rule sees it. A
// request is accepted only in the lease states where it means something
// (started: granted; complete and bound: running), otherwise "conflict".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "coverage/assess.h"
#include "coverage/handover.h"
#include "daemon/build_info.h"
#include "daemon/declared_leases.h"
#include "daemon/endings.h"
#include "daemon/headroom.h"
#include "daemon/kernel_upkeep.h"
#include "daemon/lease_book.h"
#include "daemon/lease_events.h"
#include "daemon/limits.h"
#include "daemon/placement.h"
#include "daemon/pool_access.h"
#include "daemon/query_budget.h"
#include "daemon/sampler.h"
#include "daemon/seams.h"
#include "daemon/views.h"
#include "fs/root.h"
#include "host/snapshot.h"
#include "ledger/ledger.h"
#include "rpc/lease_api.h"
#include "rpc/protocol.h"

namespace tally::daemon {

struct ServiceEnv {
  const fs::Root& proc;
  const fs::Root& sys;
  const fs::Root* cgroupRoot = nullptr;  // null: no cgroup v2 root (attach and run leases refused)
  Outbox& outbox;
  Watches& watches;
  Units* units = nullptr;  // null: no systemd manager reachable
  std::uint64_t pageSize = 4096;
  journal::Journal* journal = nullptr;  // null: messages go to stderr
  Limits limits = {};
  // CLOCK_MONOTONIC in µs, for each lease's sampling cadence and an attach
  // lease's wait for its exit report: a seam, so a test can step time (null:
  // the real clock).
  std::uint64_t (*monotonicUs)() = nullptr;
  // The kernel charge and bound (bpf/), loaded by the daemon at start
  // where the kernel allows; null: off (fdinfo meters, the sampled kill bounds).
  bpf::KernelCharge* kernelCharge = nullptr;
  // How the config's user and group names become ids, once at construction
  // (daemon/pool_access.h); null: the system's (NSS).
  const NameLookup* names = nullptr;
  // Follows the leases' cgroup trees by inotify (cgroup/tree_watch.h), so a
  // wide tree is walked at its changes; null: every walk is whole.
  cgroup::TreeWatcher* treeWatcher = nullptr;
  BuildInfo build = {};  // what it was built from (overview, tally_build_info)
  // Why no lease can be contained on this host (contain::HostLayout's
  // problems: no cgroup v2 memory controller, no cgroup root); empty: they
  // can. Said at start, in the overview (daemon status) and as
  // tally_containment_possible.
  std::vector<std::string> cannotContain = {};
  // A reload's config: the file read again and put through every check
  // `tally config check` makes (config::load, daemon::checkOnHost), or all
  // of its problems in one message. Null: nothing to read again (a reload
  // is refused, saying so).
  std::function<Result<config::Config>()> readConfig = nullptr;
};

class Service {
 public:
  using json = nlohmann::json;
  Service(const config::Config& cfg, ledger::Ledger& ledger, ServiceEnv env);

  // Re-adopts the leases the ledger says are open (after a restart, kill -9
  // included). One line per lease for the log, or the error that kept the
  // open leases from being read (the daemon must not start then).
  Result<std::vector<std::string>> recover();

  // One request, decoded and answered (a reply or an error on `conn`). An
  // exception here is a bug; daemon/dispatch.h is the boundary that turns it
  // into an "internal" reply.
  void handle(std::uint64_t conn, const Peer& peer, const rpc::Request& req);
  void disconnected(std::uint64_t conn);
  // Whether a connection holds something the daemon must keep it for: a lease
  // bound to it, a request waiting for its reply, a subscription.
  bool connectionInUse(std::uint64_t conn) const;
  // inotify on a lease's cgroup.events fired (or its pidfd).
  void cgroupChanged(const std::string& leaseId);
  // systemd signalled a change of a watched unit: a lease whose run is over
  // ends saying how, and a declared unit's new run is leased.
  void unitChanged(const std::string& unit);
  // After recover(): watches every declared unit ([leases.*]) and leases
  // those that run now. One line per declaration, for the log.
  std::vector<std::string> startDeclared();
  // Housekeeping: queue timeouts, client grace, stop escalation, grants.
  void tick();
  // How long the tick may wait: kBusyTickUs while anything it handles is
  // pending (a queue, a stop's or a client's grace, an awaited exit report),
  // else kIdleTickUs. An idle daemon wakes once a second, not four times.
  std::uint64_t tickIntervalUs() const;
  static constexpr std::uint64_t kBusyTickUs = 250'000, kIdleTickUs = 1'000'000;
  // Work served in slices across turns of the loop, one slice a call (a
  // follower's replay of the ledger): true while more is left. The loop
  // calls it between connections' shares of requests when asked
  // (Outbox::wantTurn).
  bool backgroundWork() { return events_.replaySlice(); }
  // The daemon's one log path (LeaseEvents::note), for the parts around the service.
  void note(int priority, const std::string& message) { events_.note(priority, message); }
  // Whether `conn` has a replay left (served when its reader catches up).
  bool replayWaits(std::uint64_t conn) const { return events_.replayingFor(conn); }
  // After each turn of the loop, once its replies are sent: the ledger's
  // head witness moves to the turn's last row (ledger::Ledger::deferHead).
  void endOfTurn() { ledger_.flushHead(); }
  // Meters every running lease once and stores the samples.
  void sample();
  std::uint64_t nextSampleDelayUs() const { return sampler_.nextSampleDelayUs(); }
  // Sample retention, run every minute or so.
  void prune();

  // GTT -> memcg coverage found at start: recorded in the ledger (a change
  // from the last start is said), and used by admission, headroom and bounds.
  // What the kernel charge does here (bpf/availability.h), for the overview.
  void setKernelCharge(bpf::Verdict v) { views_.setKernelCharge(std::move(v)); }
  void setCoverage(const coverage::Assessment& a);
  // The ledger's damage no operator accepted (ledger::unacknowledged), found
  // at start: while there is any, nothing new is granted ("unavailable");
  // running leases stay metered and bounded.
  void setLedgerDamage(std::vector<std::string> problems) { ledgerDamage_ = std::move(problems); }
  coverage::Coverage coverage() const { return handover_.coverage; }

  // The seat rows (one per lease) and the whole picture tally top and the
  // metrics are made of. `nowNs` is CLOCK_REALTIME.
  json seats(std::uint64_t nowNs) { return views_.seats(nowNs); }
  json overview(std::uint64_t nowNs) { return views_.overview(nowNs); }

  // `tally daemon reload`, SIGHUP, `systemctl reload tally`: the config read
  // again through the gate `config check` is (env.readConfig). Pools and
  // [leases.*] change in place; a change that would strand a live lease (a
  // pool it holds removed, a limit lowered below what its holders hold) is
  // refused whole and nothing changes. A waiter the new pools can never
  // grant is refused ("refused-by-reload"). [daemon] settings are read at
  // start only: said, not applied. Returns what changed, one line each (the
  // journal has them too); the error says why nothing did.
  Result<std::vector<std::string>> reload();

  std::size_t liveLeases() const { return book_.live(); }
  std::size_t queuedRequests() const { return book_.queued(); }
  std::string statusLine() const;

 private:
  void reply(std::uint64_t conn, const json& id, const json& result);
  void fail(std::uint64_t conn, const json& id, const char* code, const std::string& message);
  void deny(std::uint64_t conn, const json& id, const Denial& d) {
    fail(conn, id, d.code, d.message);
  }
  // The lease, when `peer` is its owner or root; else the error is sent and null returned.
  Lease* owned(std::uint64_t conn, const Peer& peer, const json& id, const std::string& lease);

  void onAcquire(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Declared& d,
                 const rpc::api::Attach* attach);
  // The admission both share, and a declared lease's too (conn 0: nobody
  // to reply to). `wouldWait`: refused only because it would have waited.
  struct Admission {
    std::optional<Denial> denial;
    bool wouldWait = false;
  };
  Admission admit(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Declared& d,
                  const rpc::api::Attach* attach);
  bool joined(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Attach& a);
  void onStarted(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Started& p);
  void onComplete(std::uint64_t conn, const Peer& peer, const json& id, rpc::api::Complete& p);
  void onResume(std::uint64_t conn, const Peer& peer, const json& id, const std::string& lease);
  void onRelease(std::uint64_t conn, const Peer& peer, const json& id, const std::string& lease,
                 bool cancelOnly, const std::optional<std::string>& containmentRefused = {});
  void onBound(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Bound& p);
  void onExited(std::uint64_t conn, const Peer& peer, const json& id, const rpc::api::Exited& p);
  void onLeaseQuery(std::uint64_t conn, const json& id, const rpc::api::LeaseQuery& p);
  // An id as given: whole, or its first characters when they name exactly
  // one lease (live; in the ledger too with `ledgerToo`). The error says
  // none matched or which did.
  Result<std::string> leaseIdOf(const std::string& given, bool ledgerToo);

  // Root, or a member of [daemon] priority_group: may ask for a priority above 0.
  bool mayPrioritise(const Peer& peer) const;
  // Grants what fits now (a full pass) and tells waiters their new places.
  void tryGrant();
  // Why it was refused after all (recorded, adoption failed), or nothing.
  std::optional<std::string> granted(Lease& l);

  // Declared leases ([leases.*]), followed by unit (daemon/declared_leases.h).
  Lease* leaseOfUnit(const std::string& unit);
  const config::DeclaredLease* declarationOf(const std::string& unit) const;
  void leaseDeclared(const config::DeclaredLease& d);
  void noteDeclared(const config::DeclaredLease& d, DeclaredRun& st, const std::string& why);
  // Once a second: the declared units that run unleased for want of room, tried again.
  void retryDeclared(std::uint64_t nowUs);
  // An attached lease whose cgroup emptied: its outcome says how its unit's run ended.
  void endAttached(Lease& l);
  admission::HeadroomFn headroom();
  // What ended leases' buffers hold changed: each pool's residue to
  // admission, and a grant pass (freed buffers may admit a waiter).
  void residueChanged();
  // The devices a lease in `pools` may use: the pools' named devices, or
  // none named (every device) when any pool names none.
  std::vector<std::string> poolDevices(const std::vector<std::string>& pools) const;

  config::Config cfg_;
  ledger::Ledger& ledger_;
  ServiceEnv env_;
  coverage::Handover handover_;
  std::string coverageKernel_;
  LeaseBook book_;
  LeaseEvents events_;
  KernelUpkeep upkeep_;
  host::SnapshotCache host_;
  PoolMeasures measures_;
  Sampler sampler_;
  Endings endings_;
  Views views_;
  PoolAccess access_;  // resolved once at construction
  QueryBudget queries_;
  std::uint64_t lastStatusPassUs_ = 0;  // the last pass telling waiters their status
  DeclaredRuns declared_;
  // Attach leases whose cgroup emptied and whose attacher's exit report is
  // awaited until a deadline (Lease::Ending::reportDeadlineUs): the tick looks
  // at these only.
  std::set<std::string> awaitingReport_;
  std::vector<std::string> ledgerDamage_;
};

}  // namespace tally::daemon
