// enforce::plan, the one decision of how a lease's bounds are enforced: each
// row a lease (top-level or a child), the kernel's hand-over state and what
// the kernel charge can do, with the plan worked out by hand from
// docs/enforcement.md and docs/coverage.md.
#include "enforce/plan.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace tally::enforce {
namespace {

constexpr std::uint64_t G = 1ULL << 30;
using U = std::optional<std::uint64_t>;

struct Row {
  std::string what;
  Bounds declared;
  std::optional<Plan> parent;
  KernelState kernel;
  // The plan expected.
  U memoryMax;
  bool withGpu;
  U max;
  Action action;
  unsigned consecutive;
  bool advisory;
  U kernelLimit;
};

Bounds bounds(U memoryMax, U max, Action a = Action::Refuse, unsigned consecutive = 2) {
  Bounds b;
  b.memoryMax = memoryMax;
  b.gpu.max = max;
  b.gpu.action = a;
  b.gpu.consecutive = consecutive;
  return b;
}

Plan parentPlan(U max, Action a, unsigned consecutive, bool advisory) {
  Plan p;
  p.bound.max = max;
  p.bound.action = a;
  p.bound.consecutive = consecutive;
  p.advisory = advisory;
  return p;
}

const KernelState kRefusing{false, false, true};  // host-only coverage, the BPF LSM on
const KernelState kNoCharge{false, false, false};
const KernelState kGttCharged{true, false, true};  // the kernel charges GTT: the hand-over
const KernelState kGttKept{true, true, true};      // ... and keep_gpu_memory_max

TEST(Plan, TheMatrixOfChildAdvisoryAndKernel) {
  const Row rows[] = {
      {"refuse where the charge refuses: the kernel holds the bound, the sample backs it",
       bounds(8 * G, 40 * G),
       {},
       kRefusing,
       8 * G,
       false,
       40 * G,
       Action::Refuse,
       2,
       false,
       40 * G},
      {"refuse with no kernel charge: the sampled kill alone",
       bounds(8 * G, 40 * G),
       {},
       kNoCharge,
       8 * G,
       false,
       40 * G,
       Action::Refuse,
       2,
       false,
       std::nullopt},
      {"kill: sampled only, never refused in the kernel",
       bounds(8 * G, 40 * G, Action::Kill),
       {},
       kRefusing,
       8 * G,
       false,
       40 * G,
       Action::Kill,
       2,
       false,
       std::nullopt},
      {"report: neither",
       bounds(std::nullopt, 40 * G, Action::Report, 5),
       {},
       kRefusing,
       std::nullopt,
       false,
       40 * G,
       Action::Report,
       5,
       false,
       std::nullopt},
      {"GTT charged: MemoryMax holds both, the bound only reports",
       bounds(8 * G, 40 * G),
       {},
       kGttCharged,
       48 * G,
       true,
       40 * G,
       Action::Report,
       2,
       true,
       std::nullopt},
      {"GTT charged, kept: MemoryMax holds both and the bound still refuses",
       bounds(8 * G, 40 * G),
       {},
       kGttKept,
       48 * G,
       true,
       40 * G,
       Action::Refuse,
       2,
       false,
       40 * G},
      {"GTT charged, no GPU bound: MemoryMax as declared, nothing advisory",
       bounds(8 * G, std::nullopt),
       {},
       kGttCharged,
       8 * G,
       false,
       std::nullopt,
       Action::Refuse,
       2,
       false,
       std::nullopt},
      {"GTT charged, no --memory-max: no MemoryMax made up",
       bounds(std::nullopt, 40 * G),
       {},
       kGttCharged,
       std::nullopt,
       false,
       40 * G,
       Action::Report,
       2,
       true,
       std::nullopt},
      {"a child with no max takes its parent's, action and over-samples too",
       bounds(std::nullopt, std::nullopt), parentPlan(16 * G, Action::Kill, 3, false), kRefusing,
       std::nullopt, false, 16 * G, Action::Kill, 3, false, std::nullopt},
      {"a child over its parent's max is held to it, with its own action",
       bounds(std::nullopt, 32 * G), parentPlan(16 * G, Action::Kill, 3, false), kRefusing,
       std::nullopt, false, 16 * G, Action::Refuse, 2, false, 16 * G},
      {"a child under its parent's max keeps its own", bounds(std::nullopt, 8 * G),
       parentPlan(16 * G, Action::Kill, 3, false), kRefusing, std::nullopt, false, 8 * G,
       Action::Refuse, 2, false, 8 * G},
      {"a parent with no max holds its child to nothing", bounds(std::nullopt, std::nullopt),
       parentPlan(std::nullopt, Action::Refuse, 2, false), kRefusing, std::nullopt, false,
       std::nullopt, Action::Refuse, 2, false, std::nullopt},
      {"a parent's advisory max makes the child's bound advisory", bounds(std::nullopt, 32 * G),
       parentPlan(16 * G, Action::Report, 2, true), kRefusing, std::nullopt, false, 16 * G,
       Action::Report, 2, true, std::nullopt},
      {"a child's own max under GTT charged is advisory by its own right",
       bounds(std::nullopt, 8 * G), parentPlan(16 * G, Action::Kill, 2, false), kGttCharged,
       std::nullopt, false, 8 * G, Action::Report, 2, true, std::nullopt},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    const Plan p = plan(r.declared, r.parent ? &*r.parent : nullptr, r.kernel);
    EXPECT_EQ(p.memoryMax, r.memoryMax);
    EXPECT_EQ(p.memoryMaxWithGpu, r.withGpu);
    EXPECT_EQ(p.bound.max, r.max);
    EXPECT_EQ(actionName(p.bound.action), std::string(actionName(r.action)));
    EXPECT_EQ(p.bound.consecutive, r.consecutive);
    EXPECT_EQ(p.advisory, r.advisory);
    EXPECT_EQ(p.kernelLimit, r.kernelLimit);
  }
}

TEST(Plan, HighAndTheSampleIntervalPassThrough) {
  Bounds b = bounds(std::nullopt, 40 * G);
  b.gpu.high = 30 * G;
  b.gpu.sampleIntervalUs = 250'000;
  const Plan p = plan(b, nullptr, kRefusing);
  EXPECT_EQ(p.bound.high, 30 * G);
  EXPECT_EQ(p.bound.sampleIntervalUs, 250'000u);
}

TEST(Plan, OnlyABoundThatCanStillKillIsPacedOrKillsOnArrival) {
  GpuBoundState fresh, acted;
  acted.acted = true;
  const Plan refuse = plan(bounds(std::nullopt, 40 * G), nullptr, kRefusing);
  EXPECT_EQ(refuse.pacedMax(fresh), 40 * G);
  EXPECT_EQ(refuse.pacedMax(acted), std::nullopt) << "its kill is done: normal pace";
  EXPECT_TRUE(refuse.killsOverMax());
  const Plan advisory = plan(bounds(std::nullopt, 40 * G), nullptr, kGttCharged);
  EXPECT_EQ(advisory.pacedMax(fresh), std::nullopt);
  EXPECT_FALSE(advisory.killsOverMax());
  const Plan highOnly = plan(bounds(std::nullopt, std::nullopt), nullptr, kRefusing);
  EXPECT_EQ(highOnly.pacedMax(fresh), std::nullopt) << "no max to be near";
  EXPECT_FALSE(highOnly.killsOverMax());
}

}  // namespace
}  // namespace tally::enforce
