#include "run/runner.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cgroup/cgroup.h"
#include "contain/held_child.h"
#include "contain/stop_grace.h"
#include "contain/systemd_lease.h"
#include "contain/verify.h"
#include "enforce/cadence.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::run {

using namespace tally::lease;
namespace {

// The lease's oom_kill count right now, for OOMPolicy=stop on cgroupfs.
std::uint64_t oomKillsNow(const cgroup::Cgroup& cg) {
  auto ev = cg.memoryEvents();
  return ev ? ev->get("oom_kill").value_or(0) : 0;
}

void warnIf(LeaseRecord& rec, const Status& s, const char* what) {
  if (!s) rec.warnings.push_back(fmt::format("{}: {}", what, s.error().message));
}

// One sample through the GPU bound (enforce::drive): events go to the
// record and to stderr at once (the operator sees them while the workload
// runs); a kill ends the whole lease cgroup (KillUnit for a scope,
// cgroup.kill otherwise) and names itself in the outcome.
void enforceGpuBound(LeaseRecord& rec, OutcomeFacts& facts, contain::LeaseCgroup& lease,
                     const enforce::GpuBound& bound, enforce::GpuBoundState& state,
                     const LeaseMeter& meter, LeaseObserver* observer) {
  auto killed = enforce::drive(
      bound, state, meter.gpu().lastBytes, meter.gpu().lastSource, clock::realtimeNs(),
      {[&] { return lease.killAll(); },
       [&](const enforce::BoundEvent& e) {
         fmt::print(stderr, "tally: lease {}: {}\n", rec.spec.id, e.summary);
         rec.gpuBound.push_back(e);
         // After the kill: a slow daemon never delays it. A kill this client
         // could not do stays in its record and on stderr: the daemon
         // enforces the same bound and says its own failures, and a
         // client's word must not raise the operators' alert.
         if (observer && e.kind != enforce::Verdict::KillFailed) observer->bound(e);
       },
       [&](const std::string& why) {
         rec.warnings.push_back("killing the lease over its gpu_memory_max: " + why);
       }});
  if (killed) facts.tallyKill = *killed;
}

bool stillPopulated(const cgroup::Cgroup& cg) {
  auto p = cg.populated();
  return p && *p;  // gone or unreadable: nothing is left to wait for
}

// The main process ended but some of the lease's processes did not (they
// ignore SIGTERM, or were never told). Under systemd the scope's stop gives
// them its grace (TimeoutStopSec) before SIGKILL; a stop signal to tally
// during that grace ends them at once, as a second Ctrl-C does while the main
// process still runs. (A cgroupfs lease's end kills what is left at once.)
void drainLeftovers(const RunEnv& env, contain::LeaseCgroup& lease, const cgroup::Cgroup& cg,
                    LeaseRecord& rec) {
  if (std::string(lease.manager()) == "cgroupfs" || !stillPopulated(cg)) return;
  warnIf(rec, lease.stop(), "stopping what is left of the lease");
  std::uint64_t deadline = clock::monotonicUs() + contain::kStopGraceUs + 2'000'000;
  while (stillPopulated(cg)) {
    std::uint64_t now = clock::monotonicUs();
    if (now >= deadline) {
      warnIf(rec, lease.killAll(), "killing what is left of the lease after the stop grace");
      return;
    }
    pollfd fd{env.signalFd, POLLIN, 0};
    // cgroup.events has no poll support worth relying on here: 50 ms steps.
    int n = ::poll(&fd, env.signalFd >= 0 ? 1 : 0, 50);
    if (n > 0 && (fd.revents & POLLIN)) {
      signalfd_siginfo si{};
      if (::read(env.signalFd, &si, sizeof si) == sizeof si) {
        warnIf(rec, lease.killAll(),
               "killing what is left of the lease (a stop signal during its grace)");
        return;
      }
    }
  }
}

}  // namespace

LeaseRecord runLease(const LeaseSpec& spec, const RunEnv& env, contain::LeaseCgroup* lease,
                     const std::string& refusal) {
  LeaseRecord rec;
  rec.spec = spec;
  rec.startedAtNs = clock::realtimeNs();
  rec.manager = lease ? lease->manager() : "none";
  OutcomeFacts facts;
  facts.policy = spec.oomPolicy;

  auto finishRefused = [&](std::string why) {
    facts.ending.kind = Ending::Kind::NeverRan;
    facts.refusal = std::move(why);
    rec.endedAtNs = clock::realtimeNs();
    rec.outcome = classify(facts);
    return rec;
  };
  if (!lease) return finishRefused(refusal);
  rec.unit = lease->unitName();
  rec.slice = lease->sliceName();
  if (!env.cgroupRoot)
    return finishRefused("the cgroup v2 root cannot be opened, so containment cannot be read back");

  auto child = contain::HeldChild::spawn(spec.command);
  if (!child) return finishRefused(child.error().message);

  // Place, then read back; any failure kills the held child before it execs.
  auto refuseAfterFork = [&](const Error& e) {
    child->abandon();
    warnIf(rec, lease->release(), "removing the refused lease");
    return finishRefused(e.message);
  };
  if (auto s = lease->place(child->pid()); !s) return refuseAfterFork(s.error());
  rec.cgroup = lease->cgroup();
  if (auto s = contain::verifyMembership(env.proc, child->pid(), lease->cgroup()); !s)
    return refuseAfterFork(s.error());
  auto cg = cgroup::Cgroup::open(*env.cgroupRoot, lease->cgroup());
  if (!cg)
    return refuseAfterFork(Error{
        cg.error().code,
        fmt::format("cannot open the lease's cgroup {}: {}", lease->cgroup(), cg.error().message)});
  auto applied = contain::verifyLimits(*cg, contain::expectedLimits(spec), env.pageSize,
                                       lease->delegationHint());
  if (!applied) return refuseAfterFork(applied.error());
  rec.applied = *applied;

  // A stop requested while the lease was being set up: the workload is not
  // started only to be stopped.
  if (env.signalFd >= 0) {
    signalfd_siginfo si{};
    if (::read(env.signalFd, &si, sizeof si) == sizeof si) {
      return refuseAfterFork(Error{0, fmt::format("tally received {} before the workload started",
                                                  signalName(static_cast<int>(si.ssi_signo)))});
    }
  }
  if (env.observer) {
    if (auto s = env.observer->placed(rec, *lease); !s) return refuseAfterFork(s.error());
  }
  // The runner executes the spec's plan; it decides nothing of it.
  const enforce::Plan plan = spec.plan();
  LeaseMeter meter(env.proc, env.sys, *cg, plan.bound.max);
  enforce::GpuBound bound = plan.bound;
  enforce::GpuBoundState boundState;
  rec.startedAtNs = clock::realtimeNs();
  if (env.onStart) env.onStart(rec);
  if (int execErr = child->release(); execErr != 0) {
    facts.ending = Ending{Ending::Kind::ExecFailed, 0, 0, execErr};
    (void)child->reap();
  } else {
    // The daemon's cadence (enforce::Pace): every near_bound_interval within
    // the margin of gpu_memory_max, else every sample interval.
    const enforce::Cadence cadence{spec.sampleIntervalUs,
                                   std::min(enforce::Cadence{}.nearUs, spec.sampleIntervalUs),
                                   enforce::Cadence{}.marginPercent};
    enforce::Pace pace;
    auto sampleAndBound = [&](std::uint64_t nowUs) {
      meter.sample();
      bound.sampleIntervalUs =
          pace.sampled(cadence, plan.pacedMax(boundState), meter.gpu().lastBytes, nowUs);
      if (bound.any()) enforceGpuBound(rec, facts, *lease, bound, boundState, meter, env.observer);
    };
    sampleAndBound(clock::monotonicUs());
    std::uint64_t killDeadline = 0;  // after a stop: SIGKILL everything if still alive
    bool stopRequested = false, oomStopSent = false;
    for (;;) {
      std::uint64_t now = clock::monotonicUs();
      std::uint64_t wake = pace.nextUs;
      if (killDeadline && killDeadline < wake) wake = killDeadline;
      int timeoutMs = wake > now ? static_cast<int>((wake - now + 999) / 1000) : 0;
      pollfd fds[2] = {{child->pidfd(), POLLIN, 0}, {env.signalFd, POLLIN, 0}};
      int n = ::poll(fds, env.signalFd >= 0 ? 2 : 1, timeoutMs);
      if (n < 0 && errno != EINTR) {
        rec.warnings.push_back(fmt::format("poll: {}", std::strerror(errno)));
        break;
      }
      if (n > 0 && (fds[0].revents & POLLIN)) break;  // the main process ended
      if (n > 0 && env.signalFd >= 0 && (fds[1].revents & POLLIN)) {
        signalfd_siginfo si{};
        if (::read(env.signalFd, &si, sizeof si) == sizeof si) {
          int sig = static_cast<int>(si.ssi_signo);
          if (!stopRequested) {
            stopRequested = true;
            facts.stopSignal = sig;
            warnIf(rec, lease->stop(), "stopping the lease");
            killDeadline = clock::monotonicUs() + contain::kStopGraceUs + 2'000'000;
          } else {
            warnIf(rec, lease->killAll(), "killing the lease");  // a second signal: no more grace
          }
        }
      }
      now = clock::monotonicUs();
      if (killDeadline && now >= killDeadline) {
        warnIf(rec, lease->killAll(), "killing the lease after the stop grace");
        killDeadline = 0;
      }
      if (now >= pace.nextUs) {
        sampleAndBound(now);
        // OOMPolicy=stop has no kernel knob: without systemd tally enforces it.
        if (spec.oomPolicy == OomPolicy::Stop && !oomStopSent &&
            std::string(lease->manager()) == "cgroupfs" && oomKillsNow(*cg) > 0) {
          oomStopSent = true;
          warnIf(rec, lease->stop(), "stopping the lease after an OOM kill (OOMPolicy=stop)");
        }
      }
    }
    auto status = child->reap();
    if (!status) {
      facts.ending.kind = Ending::Kind::Unknown;
      facts.endingUnknown = status.error().message;
    } else if (WIFEXITED(*status)) {
      facts.ending = Ending{Ending::Kind::Exited, WEXITSTATUS(*status), 0, 0};
    } else {
      facts.ending = Ending{Ending::Kind::Signaled, 0, WTERMSIG(*status), 0};
    }
  }
  rec.endedAtNs = clock::realtimeNs();
  rec.host = meter.host();
  rec.gpu = meter.gpu();

  drainLeftovers(env, *lease, *cg, rec);
  warnIf(rec, lease->endWorkload(), "ending the lease's remaining processes");
  rec.counters = cgroup::readFinalCounters(*env.cgroupRoot, lease->countersCgroup());
  facts.memoryEvents = rec.counters.events;
  facts.memoryEventsUnknown = rec.counters.eventsUnknown;
  facts.memoryMax = applied->memoryMax;
  rec.outcome = classify(facts);
  if (env.observer) env.observer->finished(rec);
  warnIf(rec, lease->release(), "removing the lease's cgroup");
  return rec;
}

}  // namespace tally::run
