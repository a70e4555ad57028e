// The pure parts of a lease: unit parsing, cgroup memory file parsers, the
// read-back rules, outcome classification and the outcome record.
#include "lease/outcome.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <limits>

#include "probes/cgroup_memory.h"
#include "support/fake_host.h"
#include "util/units.h"

namespace tally {
namespace {

using namespace tally::testing;
using units::parseDurationUs;
using units::parseSize;

// Real memory.events as read in the VM (kernel 6.12.117).
constexpr const char* kEvents = "low 0\nhigh 0\nmax 33\noom 1\noom_kill 4\noom_group_kill 1\n";

// --- classification -------------------------------------------------------

lease::OutcomeFacts signaled(int sig, const char* events) {
  lease::OutcomeFacts f;
  f.ending = {lease::Ending::Kind::Signaled, 0, sig, 0};
  if (events)
    f.memoryEvents = probes::parseFlatKeyed(events);
  else
    f.memoryEventsUnknown = "cannot read memory.events: gone";
  f.memoryMax = probes::MemoryLimit{false, 67108864};
  return f;
}

TEST(Classify, OomKillNamesCounterAndLimit) {
  auto o = lease::classify(signaled(SIGKILL, kEvents));
  EXPECT_EQ(o.cls, lease::OutcomeClass::OomKilled);
  EXPECT_EQ(o.exitStatus, 137);
  EXPECT_EQ(o.oomKills, 4u);
  EXPECT_EQ(o.summary,
            "killed by the kernel OOM killer: cgroup memory.events oom_kill=4, MemoryMax=64.0 MiB");
}

TEST(Classify, SigkillWithoutOomKillIsNotAnOom) {
  auto o = lease::classify(signaled(SIGKILL, "oom 0\noom_kill 0\n"));
  EXPECT_EQ(o.cls, lease::OutcomeClass::KilledBySignal);
  EXPECT_EQ(o.exitStatus, 137);
  EXPECT_NE(o.summary.find("not the OOM killer"), std::string::npos);
}

TEST(Classify, UnknownEventsAreSaidToBeUnknown) {
  auto o = lease::classify(signaled(SIGKILL, nullptr));
  EXPECT_EQ(o.cls, lease::OutcomeClass::KilledBySignal);
  EXPECT_FALSE(o.oomKills);
  EXPECT_NE(o.summary.find("unknown: cannot read memory.events: gone"), std::string::npos);
}

TEST(Classify, OomPolicyStopEndsWithSigterm) {
  auto f = signaled(SIGTERM, kEvents);
  f.policy = lease::OomPolicy::Stop;
  auto o = lease::classify(f);
  EXPECT_EQ(o.cls, lease::OutcomeClass::OomKilled);
  EXPECT_EQ(o.exitStatus, 143);
  // With policy kill a SIGTERM after an OOM elsewhere in the lease is not the OOM's doing.
  f.policy = lease::OomPolicy::Kill;
  EXPECT_EQ(lease::classify(f).cls, lease::OutcomeClass::KilledBySignal);
}

TEST(Classify, ExitCodesMirrorAndContinueNotesTheKill) {
  lease::OutcomeFacts f;
  f.ending = {lease::Ending::Kind::Exited, 3, 0, 0};
  f.memoryEvents = probes::parseFlatKeyed("oom 0\noom_kill 0\n");
  auto o = lease::classify(f);
  EXPECT_EQ(o.cls, lease::OutcomeClass::Exited);
  EXPECT_EQ(o.exitStatus, 3);
  EXPECT_EQ(o.summary, "exited with code 3");
  f.memoryEvents = probes::parseFlatKeyed("oom 1\noom_kill 1\n");
  f.policy = lease::OomPolicy::Continue;
  o = lease::classify(f);
  EXPECT_EQ(o.cls, lease::OutcomeClass::Exited);
  EXPECT_NE(o.summary.find("OOM killer killed 1 process(es)"), std::string::npos);
}

TEST(Classify, StoppedByTally) {
  auto f = signaled(SIGTERM, "oom_kill 0\n");
  f.stopSignal = SIGINT;
  auto o = lease::classify(f);
  EXPECT_EQ(o.cls, lease::OutcomeClass::Stopped);
  EXPECT_EQ(o.exitStatus, 143);
  EXPECT_EQ(o.summary, "stopped by tally on SIGINT: the workload ended by SIGTERM");
  lease::OutcomeFacts g;
  g.ending = {lease::Ending::Kind::Exited, 0, 0, 0};
  g.stopSignal = SIGHUP;
  EXPECT_EQ(lease::classify(g).cls, lease::OutcomeClass::Stopped);
  EXPECT_EQ(lease::classify(g).exitStatus, 0);
}

TEST(Classify, RefusedAndExecFailed) {
  lease::OutcomeFacts f;
  f.refusal = "no systemd (PID 1 is init); memory controller is on cgroup v1";
  auto o = lease::classify(f);
  EXPECT_EQ(o.cls, lease::OutcomeClass::ContainmentRefused);
  EXPECT_EQ(o.exitStatus, 125);
  EXPECT_EQ(
      o.summary,
      "the workload never ran: no systemd (PID 1 is init); memory controller is on cgroup v1");
  f.ending = {lease::Ending::Kind::ExecFailed, 0, 0, ENOENT};
  EXPECT_EQ(lease::classify(f).exitStatus, 127);
  f.ending.execErrno = EACCES;
  EXPECT_EQ(lease::classify(f).exitStatus, 126);
  EXPECT_EQ(lease::classify(f).cls, lease::OutcomeClass::ExecFailed);
}

TEST(Classify, MissingFactsStayUnknown) {
  // memory.events without oom_kill (an old kernel): not a zero.
  auto o = lease::classify(signaled(SIGKILL, "oom 0\n"));
  EXPECT_EQ(o.cls, lease::OutcomeClass::KilledBySignal);
  EXPECT_FALSE(o.oomKills);
  EXPECT_NE(o.summary.find("unknown: memory.events has no oom_kill"), std::string::npos)
      << o.summary;
  // No wait status: the ending is not guessed.
  lease::OutcomeFacts f;
  f.ending.kind = lease::Ending::Kind::Unknown;
  f.endingUnknown = "waitpid: No child processes";
  o = lease::classify(f);
  EXPECT_EQ(o.cls, lease::OutcomeClass::Unknown);
  EXPECT_EQ(o.exitStatus, 125);
  EXPECT_EQ(o.summary, "how the workload ended is unknown: waitpid: No child processes");
  EXPECT_FALSE(o.signal);
}

TEST(Classify, SignalNames) {
  EXPECT_EQ(lease::signalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(lease::signalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(lease::signalName(63), "signal 63");
}

// An attached lease's attacher reported how its processes ended (the Slurm
// plugin): recorded as its exit code, said as the attacher's word; tally
// still ran nothing, so no tally exit status.
TEST(Outcome, AnAttachersReportedExitIsRecordedAsItsWord) {
  lease::AttachedFacts f;
  f.memoryEvents = probes::parseFlatKeyed("oom 0\noom_kill 0\n");
  f.oomKillsAtAdoption = 0;
  f.reported = lease::Ending{lease::Ending::Kind::Exited, 3, 0, 0};
  auto o = lease::classifyAttached(f);
  EXPECT_EQ(o.cls, lease::OutcomeClass::Ended);
  EXPECT_EQ(o.exitCode, 3);
  EXPECT_EQ(o.signal, std::nullopt);
  EXPECT_FALSE(o.hasExitStatus);
  EXPECT_EQ(o.summary,
            "the workload's cgroup emptied (cgroup.events populated 0); its tasks exited with "
            "code 3 (its attacher's report)");
}

}  // namespace
}  // namespace tally
