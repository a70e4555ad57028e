// One lease as the daemon holds it. The LeaseBook owns every Lease; its
// parts are split by the part of the daemon that owns them, and each has one
// writer:
//
//   plan       how its bounds are enforced (enforce/plan.h): planned at its
//              request or rebuild, planned again when it nests in a parent
//              (plan(), nestIn())
//   place      where it runs (daemon/placement: placed, adopted, reopened)
//   metering   its meter, pace, bound state and kernel charge (daemon/sampler:
//              a friend; the others read metering())
//   said       what the ledger, journal and subscribers were told of its
//              bound (daemon/lease_events: a friend; the others read said())
//   client     its connection (the transitions below; the others read client())
//   ending     how it ends (the transitions below; the others read ending())
//
// and its state changes only through the transitions below, each written once:
//
//   queued --markGranted--> granted --markRunning--> running
//                                   (markRecovered: running again after a restart)
//
//   the client grace   a run lease without its client (and a granted one whose
//                      client never started it) waits client_grace for it:
//                      awaitClient() starts it, clientBack() ends it
//   the stop grace     a released run lease gets SIGTERM, then SIGKILL after
//                      contain::kStopGraceUs: requestKill() starts it, killDue() says when
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "admission/engine.h"
#include "cgroup/cgroup.h"
#include "cgroup/limits.h"
#include "contain/stop_grace.h"
#include "daemon/limits.h"
#include "enforce/cadence.h"
#include "enforce/gpu_bound.h"
#include "enforce/plan.h"
#include "enforce/refusal_log.h"
#include "lease/attributes.h"
#include "lease/kind.h"
#include "lease/meter.h"
#include "lease/outcome.h"
#include "util/token_bucket.h"

namespace tally::daemon {

class LeaseEvents;
class Sampler;

struct Lease {
  enum class State { Queued, Granted, Running };

  // Who asked for what: set when the request arrives, never changed (a
  // child's bound held to its parent's is its plan's, not its declaration's).
  std::string id;
  lease::LeaseKind kind = lease::LeaseKind::Run;
  uid_t owner = 0;
  pid_t peerPid = 0;
  // The asker's primary and supplementary groups as the kernel gave them at
  // its request: a reload that narrows a pool's access list re-checks a
  // waiter by them (daemon/service_reload.cpp).
  gid_t peerGid = 0;
  std::vector<gid_t> peerGroups{};
  // Its pools and priority, and its declaration (name, limits, GPU bound,
  // attributes): what the request declared, the name resolved (its kind's
  // when none was given).
  admission::Request req;
  // A placed lease (req.placed): what measured headroom lacked at its grant,
  // which did not hold it back and goes into its granted row (none: enough,
  // or not measured).
  std::optional<lease::Shortfall> shortfall;
  // attach: what the operator named (on the heap: only attach leases have one).
  std::unique_ptr<lease::AttachTarget> target;
  std::uint64_t requestedAtNs = 0;
  // A child lease's parent (its id; "" = none; set by nestIn()): the
  // child's cgroup lies in the parent's, it holds no pool (the parent's
  // count it, once), its plan holds it to the smaller of its own GPU bound
  // and the parent's, and it ends with the parent if not before. One level:
  // a parent is never itself a child.
  std::string parent;

  // Where it runs, once it runs (daemon/placement.h, recovery). The cgroups
  // are held open (a re-created cgroup of the same name is never read as
  // this one): `cg` is the lease's, `countersCg` where its final counters
  // live (the same, or its slice). On the heap: a queued request has
  // neither, and 10,000 of them waiting should not carry two empty handles each.
  struct Placement {
    std::string unit, cgroup, countersCgroup;
    std::string invocation;  // the unit's InvocationID when adopted: the run this lease holds
    std::uint64_t inode = 0;
    std::unique_ptr<cgroup::Cgroup> cg, countersCg;
    std::optional<cgroup::AppliedLimits> applied;
    std::optional<std::uint64_t> oomKillsAtAdoption;
  } place;

  // Its meter, pace, bound state and kernel charge (daemon/sampler.h).
  // Declared after `place`: the meter reads place.cg, so it is destroyed first.
  struct Metering {
    std::unique_ptr<lease::LeaseMeter> meter;
    // Its sampling cadence (enforce/cadence.h); near its bound it is sampled
    // every near_bound_interval. lastRowUs: when a sample row was last stored.
    enforce::Pace pace;
    std::uint64_t lastRowUs = 0;
    // Where its plan's bound stands (enforced by the daemon for attached
    // leases; a run lease's client enforces it and reports what happened).
    enforce::GpuBoundState boundState;
    // Armed in the kernel's charge (bpf/): its cgroup id, 0 when not; and the
    // charge it carried from an earlier lease of the same cgroup, if any.
    std::uint64_t kernelArmed = 0;
    std::optional<bpf::LeaseCharge> kernelCarried;
    // A lasting disagreement between its fdinfo and its charge was said.
    bool fdinfoAboveSaid = false;
    // Allocations the kernel refused that no event has said yet.
    enforce::RefusalLog refusals;
    // What seats, overview and the metrics show of its cgroup's memory, read
    // with its sample (at most once a second, Sampler::readFigures): a
    // request reads these, not cgroupfs (only whether it runs is read at the
    // request, so that it is never a sample old).
    struct CgroupFigures {
      std::uint64_t readAtUs = 0;  // monotonic; 0 = not read yet
      Result<std::uint64_t> memoryPeak = Error{0, "not sampled yet"};
      Result<probes::MemoryLimit> memoryMax = Error{0, "not sampled yet"};  // its cgroup's
      // Its counters cgroup's (a run lease's slice), when that is another.
      std::optional<Result<probes::MemoryLimit>> sliceMemoryMax;
    } figures;
  };

  // What was said of its bound (daemon/lease_events.h).
  struct Said {
    std::vector<enforce::BoundEvent> boundEvents;  // every one, in order, for its outcome
    // Bound events a run lease's client may report (Limits::boundBurst at
    // once, one more per Limits::boundRefillUs; made at its first report),
    // and how many were refused.
    std::optional<TokenBucket> clientReports;
    std::uint64_t clientReportsRefused = 0;
    // The bound's action (a kill, or a report) is in the journal: a run
    // lease's client and the daemon both enforce its bound, and one act is
    // said once, whoever saw it first (the ledger keeps both rows).
    bool actSaid = false;
  };

  // Its client: the connection a waiting request or a run lease is bound to.
  struct Client {
    std::uint64_t conn = 0;  // 0 = none
    bool pending = false;    // an acquire/attach waits for its reply on `conn`
    nlohmann::json pendingId;
    std::optional<std::size_t> lastPosition;  // the queue position it was last told
    std::uint64_t lastToldUs = 0;             // monotonic: when it was last told why it waits
    std::uint64_t graceDeadlineUs = 0;        // monotonic; 0: no grace running
  };

  // How it ends (daemon/endings.h), written by the transitions below.
  struct Ending {
    std::uint64_t killDeadlineUs = 0;  // monotonic; 0: no stop in progress
    bool releaseRequested = false;
    bool recovered = false;                // re-adopted after a daemon restart
    std::optional<std::string> tallyKill;  // the kill's summary, once tally killed it
    // A kill its client reported that the daemon's samples never saw over
    // the limit: the client's word, said as such in the outcome.
    std::optional<std::string> clientKill;
    // How the workload's own processes ended, as its attacher reported
    // (exited: the Slurm plugin, for a step's tasks).
    std::optional<lease::Ending> reported;
    // Ended because its parent lease ended while it still ran ("<id> (<name>)").
    std::optional<std::string> parentEnded;
    // The cgroup's counters as last read while it existed: when it emptied,
    // and whenever its memory.events changed (an OOM kill notifies). An
    // attached unit's cgroup may be removed by systemd before the lease
    // ends (its attacher's report is awaited, or systemd was first); the
    // record then keeps these and says when they were read.
    std::optional<cgroup::FinalCounters> lastCounters;
    std::uint64_t lastCountersAtNs = 0;
    bool lastCountersAtEmpty = false;    // read once it emptied: they are final
    bool awaitsReport = false;           // the attacher said it will report (reports_exit)
    bool keptWhenEmpty = false;          // ends with its parent, not when it empties
    std::uint64_t reportDeadlineUs = 0;  // monotonic; set when the cgroup emptied unreported
  };

  const std::string& name() const { return req.declaration.name; }
  const enforce::Plan& plan() const { return plan_; }
  const Metering& metering() const { return metering_; }
  const Said& said() const { return said_; }
  const Ending& ending() const { return ending_; }
  const Client& client() const { return client_; }
  // Operator-declared (--attr), shown in seat rows as "declared".
  const lease::Attributes& attributes() const { return req.declaration.attributes; }
  State state() const { return state_; }
  std::uint64_t grantedAtNs() const { return grantedAtNs_; }
  std::uint64_t startedAtNs() const { return startedAtNs_; }
  bool isRun() const { return kind == lease::LeaseKind::Run; }
  bool isAttach() const { return kind == lease::LeaseKind::Attach; }

  // The state machine (CLOCK_REALTIME ns).
  void markGranted(std::uint64_t nowNs) {
    state_ = State::Granted;
    grantedAtNs_ = nowNs;
  }
  void markRunning(std::uint64_t nowNs) {
    state_ = State::Running;
    startedAtNs_ = nowNs;
  }
  // Rebuilt from its rows after a restart: granted, or running since `startedNs`.
  void markRecovered(State s, std::uint64_t grantedNs, std::uint64_t startedNs) {
    state_ = s;
    grantedAtNs_ = grantedNs;
    startedAtNs_ = startedNs;
    ending_.recovered = true;
  }

  // The client grace (CLOCK_MONOTONIC µs).
  void awaitClient(std::uint64_t nowUs, std::uint64_t graceUs) {
    client_.graceDeadlineUs = nowUs + graceUs;
  }
  void clientBack(std::uint64_t conn) {
    client_.conn = conn;
    client_.graceDeadlineUs = 0;
  }
  bool graceOver(std::uint64_t nowUs) const {
    return client_.graceDeadlineUs && nowUs >= client_.graceDeadlineUs && !client_.conn;
  }
  // The grace ended and the workload still runs: it may resume any time later.
  void endGrace() { client_.graceDeadlineUs = 0; }
  // Its request waits for a reply on its connection (none: a declared lease
  // has nobody to reply to), and the reply was sent.
  void awaitReply(std::uint64_t conn, nlohmann::json requestId) {
    client_.pending = conn != 0;
    client_.pendingId = std::move(requestId);
  }
  void replied() { client_.pending = false; }
  // Its connection closed (an attached lease lives on without it).
  void clientGone() {
    client_.conn = 0;
    client_.pending = false;
  }
  // It was told its queue position `position` at `nowUs`.
  void toldPosition(std::size_t position, std::uint64_t nowUs) {
    client_.lastPosition = position;
    client_.lastToldUs = nowUs;
  }

  // The stop grace (CLOCK_MONOTONIC µs).
  void requestKill(std::uint64_t nowUs) { ending_.killDeadlineUs = nowUs + contain::kStopGraceUs; }
  bool killDue(std::uint64_t nowUs) const {
    return ending_.killDeadlineUs && nowUs >= ending_.killDeadlineUs;
  }
  void killSent() { ending_.killDeadlineUs = 0; }

  // The plan (enforce::plan): made from its declaration (sampled every
  // `sampleIntervalUs`) and the kernel's state when it is requested or
  // rebuilt, and made again, with the same inputs and its parent's plan, when
  // it nests in a parent lease.
  void planFor(const enforce::KernelState& kernel, std::uint64_t sampleIntervalUs);
  void nestIn(const Lease& parent);

  // How it ends.
  void releaseAsked() { ending_.releaseRequested = true; }
  void expectReport(bool promised) { ending_.awaitsReport = promised; }
  void keepWhenEmpty(bool keep) { ending_.keptWhenEmpty = keep; }
  void awaitReportUntil(std::uint64_t deadlineUs) { ending_.reportDeadlineUs = deadlineUs; }
  void reportedEnding(lease::Ending e) { ending_.reported = e; }
  // Its bound killed it: the kill's words name its outcome.
  void killedByTally(const std::string& summary) { ending_.tallyKill = summary; }
  // Killed by its bound before a restart: named so, and not killed twice.
  void killedBeforeRestart(const std::string& summary) {
    ending_.tallyKill = summary;
    metering_.boundState.acted = true;
  }
  void killedByClient(const std::string& summary) { ending_.clientKill = summary; }
  void endedWithParent(const std::string& parentWords) { ending_.parentEnded = parentWords; }
  // Its cgroup's counters as read now (CLOCK_REALTIME ns), final once it emptied.
  void countersRead(cgroup::FinalCounters c, std::uint64_t atNs, bool emptied) {
    ending_.lastCounters = std::move(c);
    ending_.lastCountersAtNs = atNs;
    ending_.lastCountersAtEmpty = emptied;
  }

 private:
  friend class Sampler;      // metering's one writer
  friend class LeaseEvents;  // said's one writer
  enforce::Plan plan_;
  enforce::KernelState planKernel_;
  std::uint64_t planIntervalUs_ = 1'000'000;
  Metering metering_;
  Said said_;
  Ending ending_;
  Client client_;
  State state_ = State::Queued;
  std::uint64_t grantedAtNs_ = 0, startedAtNs_ = 0;
};

const char* stateName(Lease::State s);  // "queued", "granted", "running"

}  // namespace tally::daemon
