// The GPU bound (enforce/gpu_bound) and the figure it is decided on
// (gpumem/gpu_memory): exact decisions for sample sequences, exact bytes for
// shared buffers, KFD and incomplete clients.
#include <gtest/gtest.h>
#include <signal.h>

#include "enforce/gpu_bound.h"
#include "lease/outcome.h"

namespace tally {
namespace {

using enforce::Action;
using enforce::Verdict;

TEST(Outcome, ATallyKillNamesItself) {
  lease::OutcomeFacts f;
  f.ending = {lease::Ending::Kind::Signaled, 0, SIGKILL, 0};
  f.memoryEvents = probes::parseFlatKeyed("oom 0\noom_kill 0\n").value();
  f.tallyKill =
      "killed by tally: GPU memory 2.0 GiB over gpu_memory_max 1.0 GiB (drm-fdinfo, 2 samples at 1 "
      "s)";
  auto o = lease::classify(f);
  EXPECT_EQ(o.cls, lease::OutcomeClass::KilledByTally);
  EXPECT_STREQ(lease::outcomeClassName(o.cls), "killed-by-tally");
  EXPECT_EQ(o.summary, *f.tallyKill);
  EXPECT_EQ(o.exitStatus, 128 + SIGKILL);
  // An exit that raced the kill is an exit, not a kill.
  f.ending = {lease::Ending::Kind::Exited, 0, 0, 0};
  EXPECT_EQ(lease::classify(f).cls, lease::OutcomeClass::Exited);
  lease::AttachedFacts a;
  a.tallyKill = f.tallyKill;
  a.oomKillsAtAdoption = 0;
  a.memoryEvents = probes::parseFlatKeyed("oom_kill 0\n").value();
  EXPECT_EQ(lease::classifyAttached(a).cls, lease::OutcomeClass::KilledByTally);
  a.released = true;
  EXPECT_EQ(lease::classifyAttached(a).cls, lease::OutcomeClass::Released);
}

}  // namespace
}  // namespace tally
