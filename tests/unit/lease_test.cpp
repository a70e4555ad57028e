// The pure parts of a lease: unit parsing, cgroup memory file parsers, the
// read-back rules, outcome classification and the outcome record.
#include <signal.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <limits>

#include "contain/verify.h"
#include "fs/root.h"
#include "lease/outcome.h"
#include "lease/record.h"
#include "lease/spec.h"
#include "util/units.h"
#include "probes/cgroup_memory.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;
using units::parseDurationUs;
using units::parseSize;

constexpr std::uint64_t kMiB = 1 << 20;

TEST(Units, SizesIn1024BasedUnitsAndEverySpelling) {
  EXPECT_EQ(*parseSize("0"), 0u);
  EXPECT_EQ(*parseSize("4096"), 4096u);
  EXPECT_EQ(*parseSize("4096B"), 4096u);
  EXPECT_EQ(*parseSize("64M"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64m"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64Mi"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64MiB"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64MB"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64 MiB"), 64 * kMiB);
  EXPECT_EQ(*parseSize("1K"), 1024u);
  EXPECT_EQ(*parseSize("2KiB"), 2048u);
  EXPECT_EQ(*parseSize("3G"), 3ull << 30);
  EXPECT_EQ(*parseSize("1T"), 1ull << 40);
  EXPECT_EQ(*parseSize("16777215T"), 16777215ull << 40);
  EXPECT_EQ(*parseSize(" 8G "), 8ull << 30);
}

TEST(Units, BadSizesSayWhatIsAccepted) {
  for (const char* bad : {"", "M", "-1", "1.5G", "64X", "64 M B", "infinity", "0x10", "12P"}) {
    auto r = parseSize(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(parseSize("64X").error().message.find("K, M, G or T"), std::string::npos);
  // Overflow: in the digits and through the unit multiply.
  EXPECT_FALSE(parseSize("18446744073709551616").ok());
  EXPECT_FALSE(parseSize("16777216T").ok());
  EXPECT_NE(parseSize("16777216T").error().message.find("too large"), std::string::npos);
}

TEST(Units, Durations) {
  EXPECT_EQ(*parseDurationUs("1s"), 1000000u);
  EXPECT_EQ(*parseDurationUs("2"), 2000000u);
  EXPECT_EQ(*parseDurationUs("250ms"), 250000u);
  EXPECT_EQ(*parseDurationUs("50us"), 50u);
  EXPECT_EQ(*parseDurationUs("2m"), 120000000u);
  EXPECT_EQ(*parseDurationUs("1h"), 3600000000u);
  EXPECT_EQ(*parseDurationUs("7d"), 604800000000u);
  EXPECT_FALSE(parseDurationUs("1y").ok());
  EXPECT_FALSE(parseDurationUs("213503983d").ok());
  EXPECT_FALSE(parseDurationUs("ms").ok());
  EXPECT_FALSE(parseDurationUs("99999999999999999999s").ok());
  EXPECT_FALSE(parseDurationUs("18446744073709551615m").ok());
}

// Real memory.events and memory.stat as read in the VM (kernel 6.12.117).
constexpr const char* kEvents = "low 0\nhigh 0\nmax 33\noom 1\noom_kill 4\noom_group_kill 1\n";

TEST(CgroupMemory, FlatKeyedFromTheKernel) {
  auto ev = probes::parseFlatKeyed(kEvents);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->entries.size(), 6u);
  EXPECT_EQ(ev->get("oom_kill"), 4u);
  EXPECT_EQ(ev->get("oom_group_kill"), 1u);
  EXPECT_EQ(ev->get("max"), 33u);
  EXPECT_FALSE(ev->get("sock_throttled"));
  auto populated = probes::parseFlatKeyed("populated 0\nfrozen 0\n");
  ASSERT_TRUE(populated);
  EXPECT_EQ(populated->get("populated"), 0u);
}

TEST(CgroupMemory, FlatKeyedHostileInput) {
  EXPECT_TRUE(probes::parseFlatKeyed("")->entries.empty());
  EXPECT_FALSE(probes::parseFlatKeyed("oom_kill\n"));            // no value
  EXPECT_FALSE(probes::parseFlatKeyed("oom_kill -1\n"));         // negative
  EXPECT_FALSE(probes::parseFlatKeyed("oom_kill 18446744073709551616\n"));  // overflow
  EXPECT_FALSE(probes::parseFlatKeyed(" 5\n"));                  // no key
  EXPECT_FALSE(probes::parseFlatKeyed(std::string("oom\0kill 1\n", 11)));  // NUL inside
  // Truncation at every byte: a prefix either parses to a prefix of the
  // entries or is refused; it never invents a value.
  std::string full = kEvents;
  for (std::size_t n = 0; n <= full.size(); ++n) {
    auto p = probes::parseFlatKeyed(full.substr(0, n));
    if (!p) continue;
    for (const auto& [k, v] : p->entries) {
      auto whole = probes::parseFlatKeyed(full)->get(k);
      if (whole) {
        EXPECT_LE(v, *whole) << "prefix " << n;
      }
    }
  }
  auto dup = probes::parseFlatKeyed("oom 1\noom 2\n");
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->get("oom"), 1u);
  EXPECT_EQ(dup->entries.size(), 1u);
}

TEST(CgroupMemory, Limits) {
  EXPECT_EQ(*probes::parseMemoryLimit("max\n"), (probes::MemoryLimit{true, 0}));
  EXPECT_EQ(*probes::parseMemoryLimit("67108864\n"), (probes::MemoryLimit{false, 67108864}));
  EXPECT_FALSE(probes::parseMemoryLimit(""));
  EXPECT_FALSE(probes::parseMemoryLimit("maximum"));
  EXPECT_FALSE(probes::parseMemoryLimit("64M"));
}

TEST(Verify, PageRoundingEitherNeighbourButNothingElse) {
  const std::uint64_t page = 4096;
  probes::MemoryLimit max{true, 0};
  EXPECT_TRUE(cgroup::limitMatches(std::nullopt, max, page));
  EXPECT_FALSE(cgroup::limitMatches(64 * kMiB, max, page));
  EXPECT_TRUE(cgroup::limitMatches(64 * kMiB, {false, 64 * kMiB}, page));
  EXPECT_TRUE(cgroup::limitMatches(1000000, {false, 999424}, page));   // down (page_counter_memparse)
  EXPECT_TRUE(cgroup::limitMatches(1000000, {false, 1003520}, page));  // up
  EXPECT_FALSE(cgroup::limitMatches(1000000, {false, 995328}, page));
  EXPECT_FALSE(cgroup::limitMatches(64 * kMiB, {false, 64 * kMiB + page}, page));
  EXPECT_FALSE(cgroup::limitMatches(std::nullopt, {false, 64 * kMiB}, page)) << "a limit nobody declared";
  EXPECT_TRUE(cgroup::limitMatches(0, {false, 0}, page));
}

struct VerifyTree : ::testing::Test {
  TempDir dir;
  std::string lease = "/tally.slice/tally-ab.slice/tally-ab.scope";
  void write(const std::string& file, const std::string& v) { writeFile(dir.path() + lease + "/" + file, v); }
  void SetUp() override {
    write("memory.max", "67108864\n");
    write("memory.high", "max\n");
    write("memory.swap.max", "max\n");
    write("memory.oom.group", "1\n");
  }
  Result<cgroup::AppliedLimits> verify(const cgroup::ExpectedLimits& e) {
    auto root = fs::Root::open(dir.path());
    auto cg = cgroup::Cgroup::open(*root, lease);
    if (!cg) return cg.error();
    return contain::verifyLimits(*cg, e, 4096, "; DELEGATE-HINT");
  }
};

TEST_F(VerifyTree, MatchingLimitsAreReportedAsApplied) {
  auto r = verify({64 * kMiB, std::nullopt, std::nullopt, true});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->memoryMax.bytes, 64 * kMiB);
  EXPECT_TRUE(r->memoryHigh.unlimited);
  EXPECT_TRUE(r->oomGroup);
}

TEST_F(VerifyTree, EveryMismatchIsNamed) {
  write("memory.high", "1048576\n");
  write("memory.oom.group", "0\n");
  auto r = verify({32 * kMiB, std::nullopt, std::nullopt, true});
  ASSERT_FALSE(r);
  const auto& m = r.error().message;
  EXPECT_NE(m.find("memory.max is 67108864, declared 33554432"), std::string::npos) << m;
  EXPECT_NE(m.find("memory.high is 1048576, declared max"), std::string::npos) << m;
  EXPECT_NE(m.find("memory.oom.group is 0"), std::string::npos) << m;
}

TEST_F(VerifyTree, MissingMemoryControllerNamesWhoMustDelegate) {
  TempDir empty;
  makeDirs(empty.path() + lease);
  auto root = fs::Root::open(empty.path());
  auto cg = cgroup::Cgroup::open(*root, lease);
  ASSERT_TRUE(cg) << cg.error().message;
  auto r = contain::verifyLimits(*cg, {}, 4096, "; DELEGATE-HINT");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("memory controller not enabled for " + lease), std::string::npos);
  EXPECT_NE(r.error().message.find("DELEGATE-HINT"), std::string::npos);
}

TEST_F(VerifyTree, GarbageInALimitFileIsRefused) {
  write("memory.max", "lots\n");
  auto r = verify({64 * kMiB, std::nullopt, std::nullopt, true});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a limit"), std::string::npos);
  write("memory.max", "67108864\n");
  write("memory.oom.group", "2\n");
  EXPECT_FALSE(verify({64 * kMiB, std::nullopt, std::nullopt, true}));
}

TEST_F(VerifyTree, DeclaredSwapLimitWithoutSwapAccountingIsRefused) {
  ::unlink((dir.path() + lease + "/memory.swap.max").c_str());
  EXPECT_TRUE(verify({64 * kMiB, std::nullopt, std::nullopt, true}));
  auto r = verify({64 * kMiB, std::nullopt, 0, true});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("swap accounting"), std::string::npos);
}

TEST(VerifyMembership, ComparesTheV2Line) {
  TempDir dir;
  writeFile(dir.path() + "/42/cgroup", "12:memory:/x\n0::/tally.slice/tally-ab.slice/tally-ab.scope\n");
  writeFile(dir.path() + "/43/cgroup", "0::/user.slice\n");
  writeFile(dir.path() + "/44/cgroup", "12:memory:/x\n");
  auto root = fs::Root::open(dir.path());
  EXPECT_TRUE(contain::verifyMembership(*root, 42, "/tally.slice/tally-ab.slice/tally-ab.scope"));
  auto wrong = contain::verifyMembership(*root, 43, "/tally.slice/tally-ab.slice/tally-ab.scope");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("is in /user.slice"), std::string::npos);
  EXPECT_FALSE(contain::verifyMembership(*root, 44, "/x"));
  EXPECT_FALSE(contain::verifyMembership(*root, 45, "/x")) << "a vanished process is not in the lease";
}

TEST(LeaseNames, SliceNestsUnderTheParentAndIdsHaveNoDash) {
  lease::LeaseSpec s;
  s.id = "0123456789ab";
  EXPECT_EQ(lease::leaseSliceName(s), "tally-0123456789ab.slice");
  EXPECT_EQ(lease::leaseScopeName(s), "tally-0123456789ab.scope");
  s.slice = "gpu-batch.slice";
  EXPECT_EQ(lease::leaseSliceName(s), "gpu-batch-0123456789ab.slice");
  s.slice = "-.slice";
  EXPECT_EQ(lease::leaseSliceName(s), "tally0123456789ab.slice");
  auto a = lease::newLeaseId(), b = lease::newLeaseId();
  EXPECT_EQ(a.size(), 12u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

// --- classification -------------------------------------------------------

lease::OutcomeFacts signaled(int sig, const char* events) {
  lease::OutcomeFacts f;
  f.ending = {lease::Ending::Kind::Signaled, 0, sig, 0};
  if (events) f.memoryEvents = probes::parseFlatKeyed(events);
  else f.memoryEventsUnknown = "cannot read memory.events: gone";
  f.memoryMax = probes::MemoryLimit{false, 67108864};
  return f;
}

TEST(Classify, OomKillNamesCounterAndLimit) {
  auto o = lease::classify(signaled(SIGKILL, kEvents));
  EXPECT_EQ(o.cls, lease::OutcomeClass::OomKilled);
  EXPECT_EQ(o.exitStatus, 137);
  EXPECT_EQ(o.oomKills, 4u);
  EXPECT_EQ(o.summary, "killed by the kernel OOM killer: cgroup memory.events oom_kill=4, MemoryMax=67108864");
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
  EXPECT_EQ(o.summary, "the workload never ran: no systemd (PID 1 is init); memory controller is on cgroup v1");
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
  EXPECT_NE(o.summary.find("unknown: memory.events has no oom_kill"), std::string::npos) << o.summary;
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

// --- the record -------------------------------------------------------------

TEST(Record, AbsentFiguresCarryAReasonNeverZero) {
  lease::LeaseRecord r;
  r.spec.id = "0123456789ab";
  r.spec.name = "job";
  r.spec.command = {"job", "--x"};
  r.spec.memoryMax = 64 * kMiB;
  r.manager = "system";
  r.startedAtNs = 1'000'000'000;
  r.endedAtNs = 3'500'000'000;
  r.counters.cgroup = "/tally.slice/tally-0123456789ab.slice";
  r.counters.memoryPeakUnknown = "no memory.peak (needs Linux 5.19)";
  r.counters.events = probes::parseFlatKeyed(kEvents);
  r.outcome = lease::classify(signaled(SIGKILL, kEvents));
  auto j = lease::recordJson(r);
  EXPECT_EQ(j["schema"], 1);
  EXPECT_EQ(j["declared"]["memory_max"], 64 * kMiB);
  EXPECT_TRUE(j["declared"]["memory_high"].is_null());
  EXPECT_FALSE(j.contains("applied"));
  EXPECT_EQ(j["duration_us"], 2'500'000u);
  EXPECT_FALSE(j["memory"].contains("peak_bytes"));
  EXPECT_EQ(j["memory"]["peak_unknown"], "no memory.peak (needs Linux 5.19)");
  EXPECT_EQ(j["memory"]["events"]["oom_kill"], 4);
  EXPECT_EQ(j["memory"]["sampled"]["samples"], 0);
  EXPECT_FALSE(j["memory"]["sampled"].contains("peak_current_bytes"));
  EXPECT_EQ(j["gpu"]["samples"], 0);
  EXPECT_FALSE(j["gpu"].contains("peak_bytes"));
  EXPECT_TRUE(j["gpu"].contains("peak_unknown"));
  EXPECT_EQ(j["outcome"]["class"], "oom-killed");
  EXPECT_EQ(j["outcome"]["tally_exit_status"], 137);
  EXPECT_EQ(lease::summaryLine(r),
            "tally: lease 0123456789ab (job) oom-killed: killed by the kernel OOM killer: cgroup memory.events "
            "oom_kill=4, MemoryMax=67108864");
}

TEST(Record, AMappedMemoryMaxKeepsWhatWasDeclared) {
  lease::LeaseRecord r;
  r.spec.id = "x";
  r.spec.name = "y";
  r.spec.declaredMemoryMax = 64 * kMiB;
  r.spec.memoryMax = 128 * kMiB;
  r.spec.gpuMemoryMax = 64 * kMiB;
  auto j = lease::recordJson(r);
  EXPECT_EQ(j["declared"]["memory_max"], 64 * kMiB);
  EXPECT_EQ(j["declared"]["memory_max_with_gpu"], 128 * kMiB);
  EXPECT_EQ(j["declared"]["gtt_charged_to_memcg"], true);
  r.spec.declaredMemoryMax.reset();
  EXPECT_FALSE(lease::recordJson(r)["declared"].contains("memory_max_with_gpu"));
}

TEST(Record, GpuBoundIsRecordedWithItsActionAndEvents) {
  lease::LeaseRecord r;
  r.spec.id = "x";
  r.spec.name = "y";
  r.spec.gpuMemoryMax = 32 * kMiB;
  r.gpu.samples = 5;
  r.gpu.peakBytes = 48 * kMiB;
  r.gpu.atPeak = {{"gtt", 48 * kMiB}};
  r.gpu.samplesOverBudget = 3;
  r.counters.memoryPeak = kMiB;
  r.outcome.cls = lease::OutcomeClass::Exited;
  r.outcome.summary = "exited with code 0";
  auto j = lease::recordJson(r);
  EXPECT_EQ(j["gpu"]["peak_bytes"], 48 * kMiB);
  EXPECT_EQ(j["gpu"]["at_peak"]["gtt"], 48 * kMiB);
  EXPECT_EQ(j["gpu"]["bound"]["samples_over_gpu_memory_max"], 3);
  EXPECT_EQ(j["gpu"]["bound"]["action"], "kill");
  EXPECT_EQ(j["gpu"]["bound"]["consecutive_samples"], 2);
  EXPECT_TRUE(j["gpu"]["bound"]["gpu_memory_high"].is_null());
  EXPECT_TRUE(j["gpu"]["bound"]["events"].empty());
  // Over in 3 samples, never 2 in a row: the summary says why nothing happened.
  EXPECT_NE(lease::summaryLine(r).find("over gpu_memory_max 32.0 MiB in 3 samples (not in a row long enough to act)"), std::string::npos)
      << lease::summaryLine(r);
  r.spec.gpuAction = enforce::Action::Report;
  r.gpuBound.push_back({9, enforce::Verdict::Report, 48 * kMiB, 32 * kMiB, 2, 8, "over its GPU memory bound (report only): ..."});
  j = lease::recordJson(r);
  EXPECT_EQ(j["gpu"]["bound"]["events"][0]["kind"], "gpu-memory-max-exceeded");
  EXPECT_EQ(j["gpu"]["bound"]["events"][0]["first_over_ns"], 8);
  EXPECT_NE(lease::summaryLine(r).find("(report only)"), std::string::npos);
}

// A spike shorter than one sample is never seen: the line says the peak is
// sampled, how often, and that shorter spikes escape it (not "GPU peak 0 B"
// as if measured).
TEST(Record, TheGpuPeakIsNamedSampledWithItsCadence) {
  lease::LeaseRecord r;
  r.spec.id = "x";
  r.spec.name = "y";
  r.spec.sampleIntervalUs = 250'000;
  r.gpu.samples = 1;
  r.gpu.peakBytes = 0;
  r.outcome.cls = lease::OutcomeClass::Exited;
  r.outcome.summary = "exited with code 0";
  EXPECT_NE(lease::summaryLine(r).find("; GPU sampled peak 0 B (1 sample every 250 ms, drm-fdinfo; shorter spikes are not seen)"),
            std::string::npos)
      << lease::summaryLine(r);
  r.gpu.samples = 4;
  r.spec.sampleIntervalUs = 1'000'000;
  EXPECT_NE(lease::summaryLine(r).find("(4 samples every 1 s,"), std::string::npos) << lease::summaryLine(r);
}

}  // namespace
}  // namespace tally
