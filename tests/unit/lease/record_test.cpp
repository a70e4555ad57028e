// The pure parts of a lease: unit parsing, cgroup memory file parsers, the
// read-back rules, outcome classification and the outcome record.
#include "lease/record.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <limits>

#include "lease/outcome.h"
#include "probes/cgroup_memory.h"
#include "support/fake_host.h"
#include "util/units.h"

namespace tally {
namespace {

using namespace tally::testing;
using units::parseDurationUs;
using units::parseSize;

constexpr std::uint64_t kMiB = 1 << 20;
// Real memory.events as read in the VM (kernel 6.12.117).
constexpr const char* kEvents = "low 0\nhigh 0\nmax 33\noom 1\noom_kill 4\noom_group_kill 1\n";

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

// --- the record -------------------------------------------------------------

TEST(Record, AbsentFiguresCarryAReasonNeverZero) {
  lease::LeaseRecord r;
  r.spec.id = "0123456789ab";
  r.spec.declaration.name = "job";
  r.spec.command = {"job", "--x"};
  r.spec.declaration.memoryMax = 64 * kMiB;
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
            "tally: lease 0123456789ab (job) oom-killed: killed by the kernel OOM killer: cgroup "
            "memory.events "
            "oom_kill=4, MemoryMax=64.0 MiB");
}

TEST(Record, AMappedMemoryMaxKeepsWhatWasDeclared) {
  lease::LeaseRecord r;
  r.spec.id = "x";
  r.spec.declaration.name = "y";
  r.spec.declaration.memoryMax = 64 * kMiB;
  r.spec.kernel.gttCharged = true;  // the hand-over maps MemoryMax onto both
  r.spec.declaration.gpuMemoryMax = 64 * kMiB;
  auto j = lease::recordJson(r);
  EXPECT_EQ(j["declared"]["memory_max"], 64 * kMiB);
  EXPECT_EQ(j["declared"]["memory_max_with_gpu"], 128 * kMiB);
  EXPECT_EQ(j["declared"]["gtt_charged_to_memcg"], true);
  r.spec.kernel.gttCharged = false;
  EXPECT_FALSE(lease::recordJson(r)["declared"].contains("memory_max_with_gpu"));
}

TEST(Record, GpuBoundIsRecordedWithItsActionAndEvents) {
  lease::LeaseRecord r;
  r.spec.id = "x";
  r.spec.declaration.name = "y";
  r.spec.declaration.gpuMemoryMax = 32 * kMiB;
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
  EXPECT_EQ(j["gpu"]["bound"]["action"], "refuse");
  EXPECT_EQ(j["gpu"]["bound"]["consecutive_samples"], 2);
  EXPECT_TRUE(j["gpu"]["bound"]["gpu_memory_high"].is_null());
  EXPECT_TRUE(j["gpu"]["bound"]["events"].empty());
  // Over in 3 samples, never 2 in a row: the summary says why nothing happened.
  EXPECT_NE(lease::summaryLine(r).find(
                "over gpu_memory_max 32.0 MiB in 3 samples (not in a row long enough to act)"),
            std::string::npos)
      << lease::summaryLine(r);
  r.spec.declaration.gpuAction = enforce::Action::Report;
  r.gpuBound.push_back({9, enforce::Verdict::Report, 48 * kMiB, 32 * kMiB, 2, 8,
                        "over its GPU memory bound (report only): ..."});
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
  r.spec.declaration.name = "y";
  r.spec.sampleIntervalUs = 250'000;
  r.gpu.samples = 1;
  r.gpu.peakBytes = 0;
  r.outcome.cls = lease::OutcomeClass::Exited;
  r.outcome.summary = "exited with code 0";
  EXPECT_NE(lease::summaryLine(r).find("; GPU sampled peak 0 B (1 sample every 250ms, drm-fdinfo; "
                                       "shorter spikes are not seen)"),
            std::string::npos)
      << lease::summaryLine(r);
  r.gpu.samples = 4;
  r.spec.sampleIntervalUs = 1'000'000;
  EXPECT_NE(lease::summaryLine(r).find("(4 samples every 1s,"), std::string::npos)
      << lease::summaryLine(r);
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// An outcome whose summary already says its class in words is said once.
TEST(OutcomeWords, TheClassIsNotRepeatedWhenTheSummarySaysIt) {
  EXPECT_EQ(
      lease::outcomeWords("killed-by-tally", "killed by tally: GPU memory 4.0 GiB over 3.0 GiB"),
      "killed by tally: GPU memory 4.0 GiB over 3.0 GiB");
  EXPECT_EQ(lease::outcomeWords("oom-killed", "killed by the kernel OOM killer"),
            "oom-killed: killed by the kernel OOM killer");
  EXPECT_EQ(lease::outcomeWords("exited", "exited with code 3"), "exited with code 3");
  EXPECT_EQ(lease::outcomeWords("lost", ""), "lost");
}

}  // namespace
}  // namespace tally
