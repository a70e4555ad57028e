// The GPU bound (enforce/gpu_bound) and the figure it is decided on
// (gpumem/gpu_memory): exact decisions for sample sequences, exact bytes for
// shared buffers, KFD and incomplete clients.
#include "enforce/gpu_bound.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace tally {
namespace {

using enforce::Action;
using enforce::Verdict;
constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::uint64_t MiB = 1ULL << 20;

struct Samples {
  enforce::GpuBound bound;
  enforce::GpuBoundState state;
  std::uint64_t t = 0;
  enforce::Decision step(std::optional<std::uint64_t> bytes) {
    t += 1'000'000'000;
    return enforce::observe(bound, state, bytes, "drm-fdinfo", t);
  }
};

TEST(GpuBound, KillsAfterTwoConsecutiveSamplesOverAndNamesTheFigures) {
  Samples r{{40 * GiB, std::nullopt, Action::Kill, 2, 1'000'000}, {}};
  EXPECT_EQ(r.step(39 * GiB).verdict, Verdict::None);
  auto first = r.step(41 * GiB);
  EXPECT_EQ(first.verdict, Verdict::Over);
  EXPECT_EQ(first.samples, 1u);
  std::uint64_t over = 41 * GiB + 200 * MiB;  // 41.2 GiB
  auto second = r.step(over);
  EXPECT_EQ(second.verdict, Verdict::Kill);
  EXPECT_EQ(second.samples, 2u);
  EXPECT_EQ(second.bytes, over);
  EXPECT_EQ(second.limit, 40 * GiB);
  EXPECT_EQ(second.firstOverNs, 2'000'000'000u);
  EXPECT_EQ(second.summary,
            "killed by tally: GPU memory 41.2 GiB over gpu_memory_max 40.0 GiB (drm-fdinfo, 2 "
            "samples at 1s)");
  // It acts once: later samples over the limit do not kill again.
  EXPECT_EQ(r.step(50 * GiB).verdict, Verdict::None);
  auto events = enforce::eventsOf(second, 7);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Verdict::Kill);
  EXPECT_EQ(enforce::boundEventJson(events[0])["kind"], "gpu-memory-kill");
}

TEST(GpuBound, ADipBelowTheLimitStartsTheCountAgain) {
  Samples r{{10 * GiB, std::nullopt, Action::Kill, 2, 250'000}, {}};
  EXPECT_EQ(r.step(11 * GiB).verdict, Verdict::Over);
  EXPECT_EQ(r.step(10 * GiB).verdict, Verdict::None);  // exactly at the limit is not over
  EXPECT_EQ(r.step(11 * GiB).verdict, Verdict::Over);
  auto d = r.step(12 * GiB);
  EXPECT_EQ(d.verdict, Verdict::Kill);
  EXPECT_NE(d.summary.find("2 samples at 250ms"), std::string::npos) << d.summary;
}

TEST(GpuBound, AnAbsentSampleNeitherCountsNorBreaksTheRun) {
  Samples r{{10 * GiB, std::nullopt, Action::Kill, 3, 1'000'000}, {}};
  EXPECT_EQ(r.step(11 * GiB).verdict, Verdict::Over);
  EXPECT_EQ(r.step(std::nullopt).verdict, Verdict::None);
  EXPECT_EQ(r.step(std::nullopt).verdict, Verdict::None);
  EXPECT_EQ(r.step(11 * GiB).samples, 2u);
  EXPECT_EQ(r.step(11 * GiB).verdict, Verdict::Kill);
  // Nothing read ever kills, however long.
  Samples blind{{1, std::nullopt, Action::Kill, 1, 1'000'000}, {}};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(blind.step(std::nullopt).verdict, Verdict::None);
}

TEST(GpuBound, ReportModeReportsOnceAndNeverKills) {
  Samples r{{GiB, std::nullopt, Action::Report, 1, 1'000'000}, {}};
  auto d = r.step(2 * GiB);
  EXPECT_EQ(d.verdict, Verdict::Report);
  EXPECT_EQ(d.summary,
            "over its GPU memory bound (report only): GPU memory 2.0 GiB over gpu_memory_max 1.0 "
            "GiB (drm-fdinfo, 1 sample at 1s)");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.step(3 * GiB).verdict, Verdict::None);
}

TEST(GpuBound, HighRaisesOneEventPerCrossingAndNeverKills) {
  Samples r{{std::nullopt, 8 * GiB, Action::Kill, 2, 1'000'000}, {}};
  EXPECT_EQ(r.step(7 * GiB).high, Verdict::None);
  auto up = r.step(9 * GiB);
  EXPECT_EQ(up.high, Verdict::HighCrossed);
  EXPECT_EQ(up.verdict, Verdict::None);
  EXPECT_EQ(up.highSummary, "GPU memory 9.0 GiB above gpu_memory_high 8.0 GiB (drm-fdinfo)");
  EXPECT_EQ(r.step(20 * GiB).high, Verdict::None);  // still above: no second event
  EXPECT_EQ(r.step(std::nullopt).high, Verdict::None);
  EXPECT_EQ(r.step(8 * GiB).high, Verdict::HighCleared);
  EXPECT_EQ(r.step(9 * GiB).high, Verdict::HighCrossed);
}

TEST(GpuBound, HighAndMaxTogetherBothSpeak) {
  Samples r{{10 * GiB, 8 * GiB, Action::Kill, 1, 1'000'000}, {}};
  auto d = r.step(11 * GiB);
  EXPECT_EQ(d.high, Verdict::HighCrossed);
  EXPECT_EQ(d.verdict, Verdict::Kill);
  auto events = enforce::eventsOf(d, 5);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Verdict::HighCrossed);
  EXPECT_EQ(events[1].kind, Verdict::Kill);
}

TEST(GpuBound, ActionSpellings) {
  for (Action a : {Action::Refuse, Action::Kill, Action::Report})
    EXPECT_EQ(enforce::parseAction(enforce::actionName(a)), a);
  EXPECT_EQ(enforce::parseAction("refuse"), Action::Refuse);
  EXPECT_EQ(enforce::parseAction("kill"), Action::Kill);
  EXPECT_EQ(enforce::parseAction("report"), Action::Report);
  EXPECT_FALSE(enforce::parseAction("Kill"));
  EXPECT_FALSE(enforce::parseAction(""));
  // What the command line accepts and how an error lists them, from the one list.
  EXPECT_EQ(enforce::actionNames(), (std::vector<std::string>{"refuse", "kill", "report"}));
  EXPECT_EQ(enforce::actionChoices(), "\"refuse\", \"kill\" or \"report\"");
}

// Refuse is the kernel's first; over the bound in a sample anyway (memory no
// creation path showed, or no kernel charge here) it kills as Kill does.
TEST(GpuBound, ARefusingBoundStillKillsAsTheBackstop) {
  enforce::GpuBound b;
  EXPECT_EQ(b.action, Action::Refuse) << "the default";
  b.max = GiB;
  b.consecutive = 2;
  enforce::GpuBoundState st;
  EXPECT_EQ(enforce::observe(b, st, 2 * GiB, "fdinfo", 1).verdict, Verdict::Over);
  auto d = enforce::observe(b, st, 2 * GiB, "fdinfo", 2);
  EXPECT_EQ(d.verdict, Verdict::Kill);
  EXPECT_EQ(d.summary.rfind("killed by tally: ", 0), 0u) << d.summary;
}

// The one driver both enforcers use: kill first, then record; a failed kill
// is said (a gpu-memory-kill-failed event with why, once per run over the
// bound), not recorded as done, and tried again at the next sample over.
TEST(GpuBound, TheDriverKillsFirstAndRetriesAFailedKill) {
  enforce::GpuBound b{4 * GiB, 3 * GiB, Action::Kill, 1, 1'000'000};
  enforce::GpuBoundState st;
  std::vector<std::string> seen;
  std::string failedSummary;
  bool killWorks = false;
  enforce::BoundSeams seams{[&]() -> Status {
                              seen.push_back("kill");
                              if (killWorks) return Ok{};
                              return Error{EPERM, "cgroup.kill: Permission denied"};
                            },
                            [&](const enforce::BoundEvent& e) {
                              seen.push_back(enforce::verdictName(e.kind));
                              if (e.kind == Verdict::KillFailed) failedSummary = e.summary;
                            },
                            [&](const std::string& why) { seen.push_back("failed: " + why); }};
  auto killed = enforce::drive(b, st, 5 * GiB, "drm-fdinfo", 1, seams);
  EXPECT_FALSE(killed);
  EXPECT_EQ(seen, (std::vector<std::string>{"kill", "failed: cgroup.kill: Permission denied",
                                            "gpu-memory-high", "gpu-memory-kill-failed"}));
  EXPECT_EQ(failedSummary,
            "could not kill it over its gpu_memory_max: cgroup.kill: Permission denied (GPU "
            "memory 5.0 GiB over gpu_memory_max 4.0 GiB (drm-fdinfo, 1 sample at 1s))");
  // Tried again, failing again: not said again in the same run over.
  seen.clear();
  EXPECT_FALSE(enforce::drive(b, st, 5 * GiB, "drm-fdinfo", 2, seams));
  EXPECT_EQ(seen, (std::vector<std::string>{"kill", "failed: cgroup.kill: Permission denied"}));
  seen.clear();
  killWorks = true;
  killed = enforce::drive(b, st, 5 * GiB, "drm-fdinfo", 3, seams);
  ASSERT_TRUE(killed);
  EXPECT_EQ(*killed,
            "killed by tally: GPU memory 5.0 GiB over gpu_memory_max 4.0 GiB (drm-fdinfo, 3 "
            "samples at 1s)");
  EXPECT_EQ(seen,
            (std::vector<std::string>{"kill", "gpu-memory-kill"}));  // the act, then its event
  seen.clear();
  EXPECT_FALSE(enforce::drive(b, st, 6 * GiB, "drm-fdinfo", 4, seams));  // once per lease
  EXPECT_TRUE(seen.empty());
}

// A run over the bound that ends (back under) and comes again says a kill
// that fails again: once per run, not once per lease.
TEST(GpuBound, AFailedKillIsSaidOncePerRunOverTheBound) {
  enforce::GpuBound b{1 * GiB, std::nullopt, Action::Kill, 1, 1'000'000};
  enforce::GpuBoundState st;
  int said = 0;
  enforce::BoundSeams seams{
      []() -> Status {
        return Error{ESRCH, "gone"};
      },
      [&](const enforce::BoundEvent& e) { said += e.kind == Verdict::KillFailed; }, nullptr};
  for (std::uint64_t t = 1; t <= 5; ++t) enforce::drive(b, st, 2 * GiB, "drm-fdinfo", t, seams);
  EXPECT_EQ(said, 1);
  enforce::drive(b, st, GiB / 2, "drm-fdinfo", 6, seams);  // under again
  for (std::uint64_t t = 7; t <= 9; ++t) enforce::drive(b, st, 2 * GiB, "drm-fdinfo", t, seams);
  EXPECT_EQ(said, 2);
  // The same run, failing for another reason now: said again, once.
  enforce::BoundSeams other{
      []() -> Status {
        return Error{EPERM, "denied"};
      },
      [&](const enforce::BoundEvent& e) { said += e.kind == Verdict::KillFailed; }, nullptr};
  for (std::uint64_t t = 10; t <= 12; ++t) enforce::drive(b, st, 2 * GiB, "drm-fdinfo", t, other);
  EXPECT_EQ(said, 3);
  // Its row reads back (the ledger's and the events' one reader).
  enforce::BoundEvent e;
  e.kind = Verdict::KillFailed;
  e.summary = "could not kill it";
  auto back = enforce::boundEventFromJson(enforce::boundEventJson(e));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->kind, Verdict::KillFailed);
}

}  // namespace
}  // namespace tally
