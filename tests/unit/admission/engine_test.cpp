#include "admission/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

namespace tally {
namespace {

using admission::Engine;
using admission::Request;

constexpr std::uint64_t GiB = 1ULL << 30;

std::vector<config::Pool> pools() {
  config::Pool gpu{"gpu", 3, 64 * GiB, 96 * GiB, {}};
  config::Pool cpu{"cpu", 2, std::nullopt, std::nullopt, {}};
  config::Pool one{"one", 1, std::nullopt, std::nullopt, {}};
  return {gpu, cpu, one};
}

Request req(const std::string& id, std::vector<std::string> pools,
            std::optional<std::uint64_t> mem = {}, std::optional<std::uint64_t> gpu = {},
            int prio = 0) {
  Request r;
  r.id = id;
  r.pools = std::move(pools);
  r.priority = prio;
  r.declaration.memoryMax = mem;
  r.declaration.gpuMemoryMax = gpu;
  return r;
}

TEST(Admission, RefusesWhatCanNeverBeGrantedAndSaysWhichFlag) {
  Engine e(pools());
  EXPECT_TRUE(e.check(req("a", {"gpu"}, 8 * GiB, 8 * GiB)));
  auto noGpu = e.check(req("a", {"gpu"}, 8 * GiB));
  ASSERT_FALSE(noGpu);
  EXPECT_NE(noGpu.error().message.find("--gpu-memory-max"), std::string::npos);
  auto noMem = e.check(req("a", {"gpu"}, std::nullopt, 8 * GiB));
  ASSERT_FALSE(noMem);
  EXPECT_NE(noMem.error().message.find("--memory-max"), std::string::npos);
  auto tooBig = e.check(req("a", {"gpu"}, 8 * GiB, 97 * GiB));
  ASSERT_FALSE(tooBig);
  EXPECT_EQ(tooBig.error().message,
            "--gpu-memory-max 97.0 GiB is larger than pool gpu's whole GPU memory budget 96.0 GiB");
  auto unknown = e.check(req("a", {"gpus"}));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("configured: gpu, cpu, one"), std::string::npos);
  EXPECT_FALSE(e.check(req("a", {})));
  EXPECT_FALSE(e.check(req("a", {"cpu", "cpu"})));
  EXPECT_TRUE(e.check(req("a", {"cpu"})));  // no budget: no limit needed
}

// Budgets above what the box holds: a request over MemTotal or over the pool's
// devices' total GPU memory would wait for headroom that never comes.
TEST(Admission, RefusesWhatTheHostOrItsDevicesCanNeverHold) {
  Engine e(pools());
  admission::TotalsFn small = [](const config::Pool&) {
    return admission::Totals{48 * GiB, 40 * GiB};
  };
  EXPECT_TRUE(e.check(req("a", {"gpu"}, 48 * GiB, 40 * GiB), small));  // exactly all: fits
  auto host = e.check(req("a", {"gpu"}, 49 * GiB, 8 * GiB), small);
  ASSERT_FALSE(host);
  EXPECT_EQ(host.error().message,
            "--memory-max 49.0 GiB is more than this host's memory (MemTotal 48.0 GiB): it could "
            "never be granted");
  auto gpu = e.check(req("a", {"gpu"}, 8 * GiB, 41 * GiB), small);
  ASSERT_FALSE(gpu);
  EXPECT_EQ(gpu.error().message,
            "--gpu-memory-max 41.0 GiB is more than pool gpu's devices hold (GTT ceiling + VRAM: "
            "40.0 GiB): it could never be granted");
  // Unknown totals refuse nothing; a pool without budgets has no headroom wait to fear.
  admission::TotalsFn unknown = [](const config::Pool&) { return admission::Totals{}; };
  EXPECT_TRUE(e.check(req("a", {"gpu"}, 60 * GiB, 90 * GiB), unknown));
  EXPECT_TRUE(e.check(req("a", {"cpu"}, 500 * GiB), small));
}

// A waiter whose reason changes without moving (the budget frees, headroom
// now holds it) is reported once by takeReasonChanges(), with the pool and
// the numbers its client is told.
TEST(Admission, AReasonChangeIsReportedOnceWithItsFigures) {
  Engine e(pools());
  admission::Headroom plenty{1000 * GiB, 1000 * GiB}, tight{1000 * GiB, 4 * GiB};
  admission::Headroom now = plenty;
  admission::HeadroomFn headroom = [&](const config::Pool&) { return now; };
  e.enqueue(req("a", {"gpu"}, 8 * GiB, 90 * GiB));
  EXPECT_EQ(e.grant(headroom), std::vector<std::string>{"a"});
  e.enqueue(req("b", {"gpu"}, 8 * GiB, 16 * GiB));
  EXPECT_TRUE(e.grant(headroom).empty());
  EXPECT_EQ(e.waitReason("b"), admission::Wait::GpuBudget);
  EXPECT_TRUE(e.takeReasonChanges().empty());  // its first judgement: its arrival tells it
  auto f = admission::waitFigures(*e.request("b"), admission::Wait::GpuBudget, pools()[0],
                                  e.usage("gpu"), now);
  EXPECT_EQ(f.needed, 16 * GiB);
  EXPECT_EQ(f.free, 6 * GiB);
  EXPECT_EQ(f.detail, "pool gpu's GPU memory budget: needs 16.0 GiB, 6.0 GiB of 96.0 GiB left");
  now = tight;
  e.release("a");
  EXPECT_TRUE(e.grant(headroom).empty());
  EXPECT_EQ(e.waitReason("b"), admission::Wait::GpuHeadroom);
  EXPECT_EQ(e.takeReasonChanges(), std::vector<std::size_t>{0});
  EXPECT_EQ(e.waitPool(0), "gpu");
  f = admission::waitFigures(*e.request("b"), admission::Wait::GpuHeadroom, pools()[0],
                             e.usage("gpu"), now);
  EXPECT_EQ(f.detail, "GPU memory on pool gpu's devices: needs 16.0 GiB, 4.0 GiB free");
  EXPECT_TRUE(e.grant(headroom).empty());  // the same reason again: nothing to tell
  EXPECT_TRUE(e.takeReasonChanges().empty());
}

TEST(Admission, CapacityQueuesAndReleaseGrantsInOrder) {
  Engine e(pools());
  e.enqueue(req("a", {"one"}));
  e.enqueue(req("b", {"one"}));
  e.enqueue(req("c", {"one"}));
  EXPECT_EQ(e.grant({}), std::vector<std::string>{"a"});
  EXPECT_EQ(e.position("b"), 1u);
  EXPECT_EQ(e.position("c"), 2u);
  EXPECT_EQ(e.waitReason("b"), admission::Wait::Capacity);
  EXPECT_EQ(e.waitReason("c"), admission::Wait::Behind);
  EXPECT_TRUE(e.release("a"));
  EXPECT_FALSE(e.release("a"));
  EXPECT_EQ(e.grant({}), std::vector<std::string>{"b"});
  EXPECT_TRUE(e.cancel("c"));
  EXPECT_FALSE(e.waiting("c"));
  EXPECT_EQ(e.queued(), 0u);
}

// Declared sums are exact: a request declaring nearly 2^64 bytes cannot
// wrap the pool's sum past its budget, and an unbudgeted pool's sum reads
// saturated, never wrapped to a small number.
TEST(Admission, DeclaredSumsNeverWrap) {
  Engine e(pools());
  e.enqueue(req("a", {"gpu"}, 8 * GiB, 48 * GiB));
  e.enqueue(req("huge", {"gpu"}, 8 * GiB, UINT64_MAX - 40 * GiB));  // 48 GiB + this wraps to 8 GiB
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"a"}));
  EXPECT_EQ(e.waitReason("huge"), admission::Wait::GpuBudget);
  admission::DeclaredSum sum;
  sum.add(UINT64_MAX);
  sum.add(UINT64_MAX);
  EXPECT_EQ(sum.value(), UINT64_MAX);
  sum.remove(UINT64_MAX);
  EXPECT_EQ(sum.value(), UINT64_MAX);
  sum.remove(1);
  EXPECT_EQ(sum.value(), UINT64_MAX - 1);
  EXPECT_TRUE(sum.over(2, UINT64_MAX));
}

TEST(Admission, BudgetsBindBeforeCapacity) {
  Engine e(pools());
  e.enqueue(req("a", {"gpu"}, 8 * GiB, 48 * GiB));
  e.enqueue(req("b", {"gpu"}, 8 * GiB, 40 * GiB));
  e.enqueue(req("c", {"gpu"}, 8 * GiB, 16 * GiB));  // 48+40+16 = 104 > 96
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(e.waitReason("c"), admission::Wait::GpuBudget);
  EXPECT_EQ(e.usage("gpu").gpuMemoryDeclared.value(), 88 * GiB);
  e.release("b");
  EXPECT_EQ(e.grant({}), std::vector<std::string>{"c"});
  EXPECT_EQ(e.usage("gpu").gpuMemoryDeclared.value(), 64 * GiB);
}

TEST(Admission, AtomicOverThePoolSet) {
  Engine e(pools());
  e.enqueue(req("holder", {"one"}));
  e.grant({});
  e.enqueue(req("both", {"cpu", "one"}));
  EXPECT_TRUE(e.grant({}).empty());
  EXPECT_TRUE(e.usage("cpu").holders.empty());  // nothing half-granted
  e.release("holder");
  EXPECT_EQ(e.grant({}), std::vector<std::string>{"both"});
  EXPECT_EQ(e.usage("cpu").holders, std::vector<std::string>{"both"});
  EXPECT_EQ(e.usage("one").holders, std::vector<std::string>{"both"});
}

TEST(Admission, PriorityFirstThenArrivalAndNoOvertakingOnSharedPools) {
  Engine e(pools());
  e.enqueue(req("h", {"one"}));
  e.grant({});
  e.enqueue(req("low", {"one"}, {}, {}, -5));
  e.enqueue(req("mid", {"one"}));
  e.enqueue(req("high", {"one"}, {}, {}, 10));
  e.enqueue(req("other", {"cpu"}, {}, {}, -50));  // disjoint pools: not held up
  EXPECT_EQ(e.grant({}), std::vector<std::string>{"other"});
  EXPECT_EQ(e.position("high"), 1u);
  EXPECT_EQ(e.position("mid"), 2u);
  EXPECT_EQ(e.position("low"), 3u);
  // A big waiting request is not starved by a stream of small ones behind it.
  Engine g(pools());
  g.enqueue(req("small1", {"gpu"}, GiB, 60 * GiB));
  g.grant({});
  g.enqueue(req("big", {"gpu"}, GiB, 90 * GiB));
  g.enqueue(req("small2", {"gpu"}, GiB, 10 * GiB));  // would fit now, but "big" is first
  EXPECT_TRUE(g.grant({}).empty());
  EXPECT_EQ(g.waitReason("small2"), admission::Wait::Behind);
  g.release("small1");
  EXPECT_EQ(g.grant({}), std::vector<std::string>{"big"});
}

TEST(Admission, HeadroomOnlyDelays) {
  Engine e(pools());
  e.enqueue(req("a", {"gpu"}, 8 * GiB, 40 * GiB));
  // Measured headroom far above the budget: the budget still binds.
  auto generous = [](const config::Pool&) { return admission::Headroom{1000 * GiB, 1000 * GiB}; };
  EXPECT_EQ(e.grant(generous), std::vector<std::string>{"a"});
  e.enqueue(req("b", {"gpu"}, 8 * GiB, 40 * GiB));
  e.enqueue(req("c", {"gpu"}, 8 * GiB, 40 * GiB));
  EXPECT_EQ(e.grant(generous), std::vector<std::string>{"b"});  // c: 120 > 96
  EXPECT_EQ(e.waitReason("c"), admission::Wait::GpuBudget);
  e.release("a");
  // Now the budget allows c, but the device has only 30 GiB free: c waits.
  auto tight = [](const config::Pool&) { return admission::Headroom{1000 * GiB, 30 * GiB}; };
  EXPECT_TRUE(e.grant(tight).empty());
  EXPECT_EQ(e.waitReason("c"), admission::Wait::GpuHeadroom);
  auto hostTight = [](const config::Pool&) { return admission::Headroom{4 * GiB, 1000 * GiB}; };
  EXPECT_TRUE(e.grant(hostTight).empty());
  EXPECT_EQ(e.waitReason("c"), admission::Wait::HostHeadroom);
  // Unknown headroom delays nothing.
  auto unknown = [](const config::Pool&) { return admission::Headroom{}; };
  EXPECT_EQ(e.grant(unknown), std::vector<std::string>{"c"});
}

// An attach of a running workload needs of measured headroom only what its
// declaration adds to what it already holds (those bytes are out of the
// measured free already); the budgets still count the whole declaration.
// The day-one case: a model server holding 36 GiB declares 44 with 39.5 free.
TEST(Admission, AnAttachNeedsOnlyWhatItsDeclarationAdds) {
  Engine e(pools());
  auto box = [](const config::Pool&) {
    return admission::Headroom{1000 * GiB, 39 * GiB + 512 * (1ULL << 20)};
  };
  Request server = req("s", {"gpu"}, std::nullopt, 44 * GiB);
  server.heldGpuBytes = 36 * GiB;
  server.heldHostBytes = 2 * GiB;
  e.enqueue(server);
  EXPECT_EQ(e.grant(box), std::vector<std::string>{"s"}) << "8 more of 39.5 free";
  EXPECT_EQ(e.usage("gpu").gpuMemoryDeclared.value(), 44 * GiB) << "the budget counts all 44";
  // Unmeasured, the same declaration waits: all 44 against 39.5.
  e.release("s");
  Request unmeasured = req("u", {"gpu"}, std::nullopt, 44 * GiB);
  e.enqueue(unmeasured);
  EXPECT_TRUE(e.grant(box).empty());
  EXPECT_EQ(e.waitReason("u"), admission::Wait::GpuHeadroom);
  e.cancel("u");
  // Declaring 84 while holding 36 needs 48 more: it waits, and says the arithmetic.
  Request more = req("m", {"gpu"}, 64 * GiB, 84 * GiB);
  more.heldGpuBytes = 36 * GiB;
  more.heldHostBytes = 60 * GiB;
  e.enqueue(more);
  EXPECT_TRUE(e.grant(box).empty());
  auto f = admission::waitFigures(*e.request("m"), admission::Wait::GpuHeadroom, pools()[0],
                                  e.usage("gpu"), box(pools()[0]));
  EXPECT_EQ(f.needed, 48 * GiB);
  EXPECT_EQ(f.detail,
            "GPU memory on pool gpu's devices: needs 48.0 GiB more: declares 84.0 GiB, holds "
            "36.0 GiB, 39.5 GiB free");
  auto lacking = admission::shortfallIn(more, pools()[0], box(pools()[0]));
  ASSERT_TRUE(lacking && lacking->gpu);
  EXPECT_EQ(lacking->gpu->bytes(), 8 * GiB + 512 * (1ULL << 20));
  EXPECT_FALSE(lacking->host) << "64 declared, 60 held: 4 more of 1000 free";
  auto tightHost = [](const config::Pool&) { return admission::Headroom{3 * GiB, 1000 * GiB}; };
  f = admission::waitFigures(*e.request("m"), admission::Wait::HostHeadroom, pools()[0],
                             e.usage("gpu"), tightHost(pools()[0]));
  EXPECT_EQ(f.detail,
            "host memory: needs 4.0 GiB more: declares 64.0 GiB, holds 60.0 GiB, 3.0 GiB free "
            "(MemAvailable less holders' unused declarations)");
  // Holding more than it declares needs nothing more (refuseOverOnArrival
  // says the rest), and never a negative figure.
  EXPECT_EQ(admission::stillNeeded(8 * GiB, 9 * GiB), 0u);
  EXPECT_EQ(admission::stillNeeded(8 * GiB, std::nullopt), 8 * GiB);
  EXPECT_EQ(admission::stillNeeded(std::nullopt, 9 * GiB), 0u);
}

// A waiting attach measured again: held only goes down, and a figure not
// measured now holds nothing (the whole declaration is needed again).
TEST(Admission, AWaitingAttachsHeldFiguresOnlyGoDown) {
  Engine e(pools());
  auto tight = [](const config::Pool&) { return admission::Headroom{1000 * GiB, 10 * GiB}; };
  Request r = req("w", {"gpu"}, std::nullopt, 40 * GiB);
  r.heldGpuBytes = 32 * GiB;  // needs 8 more
  r.heldHostBytes = GiB;
  e.enqueue(r);
  e.lowerHeld("w", GiB, 20 * GiB);  // it freed 12 GiB while it waited: needs 20 more
  EXPECT_TRUE(e.grant(tight).empty());
  EXPECT_EQ(e.waitReason("w"), admission::Wait::GpuHeadroom);
  e.lowerHeld("w", GiB, 36 * GiB);  // a higher reading does not raise it
  EXPECT_EQ(e.request("w")->heldGpuBytes, 20 * GiB);
  e.lowerHeld("w", std::nullopt, std::nullopt);
  EXPECT_FALSE(e.request("w")->heldGpuBytes);
  EXPECT_FALSE(e.request("w")->heldHostBytes);
  e.lowerHeld("nobody", GiB, GiB);  // not waiting: nothing happens
}

// A request the site's scheduler placed (a Slurm job's lease) is held by
// capacity and the declared budgets as any other, never by measured headroom
// or totals, and no waiter's reservation holds it back; what headroom lacked
// is measured for its grant's row.
TEST(Admission, APlacedRequestIsHeldByBudgetsNeverByMeasuredHeadroom) {
  Engine e(pools());
  auto tight = [](const config::Pool&) { return admission::Headroom{4 * GiB, 10 * GiB}; };
  Request unplaced = req("u", {"gpu"}, 8 * GiB, 40 * GiB);
  e.enqueue(unplaced);
  EXPECT_TRUE(e.grantArrival("u", tight).empty());
  EXPECT_EQ(e.waitReason("u"), admission::Wait::HostHeadroom);
  // The same request, placed: granted past the waiter and the headroom.
  Request placed = req("p", {"gpu"}, 8 * GiB, 40 * GiB);
  placed.placed = true;
  e.enqueue(placed);
  EXPECT_EQ(e.grantArrival("p", tight), std::vector<std::string>{"p"});
  // What headroom lacked: both resources, in the pool's own figures.
  auto lacking = admission::shortfallIn(placed, pools()[0], tight(pools()[0]));
  ASSERT_TRUE(lacking);
  EXPECT_EQ(lacking->pool, "gpu");
  ASSERT_TRUE(lacking->host && lacking->gpu);
  EXPECT_EQ(lacking->host->bytes(), 4 * GiB);
  EXPECT_EQ(lacking->gpu->needed, 40 * GiB);
  EXPECT_EQ(lacking->gpu->free, 10 * GiB);
  EXPECT_EQ(lacking->gpu->bytes(), 30 * GiB);
  EXPECT_FALSE(admission::shortfallIn(placed, pools()[0], admission::Headroom{}))
      << "not measured is no shortfall";
  EXPECT_FALSE(admission::shortfallIn(placed, pools()[0], {64 * GiB, 96 * GiB}));
  // The budget still binds: 40 + 60 > 96.
  Request over = req("o", {"gpu"}, 8 * GiB, 60 * GiB);
  over.placed = true;
  e.enqueue(over);
  EXPECT_EQ(e.grantArrival("o", tight), std::vector<std::string>{}) << "budget, not headroom";
  EXPECT_EQ(e.waitReason("o"), admission::Wait::GpuBudget);
  e.cancel("o");
  // Measured totals refuse nothing placed; the budget on its own still does.
  admission::TotalsFn small = [](const config::Pool&) {
    return admission::Totals{8 * GiB, 8 * GiB};
  };
  EXPECT_FALSE(e.check(req("x", {"gpu"}, 8 * GiB, 41 * GiB), small));
  EXPECT_TRUE(e.check(over, small));
  Request huge = over;
  huge.declaration.gpuMemoryMax = 97 * GiB;
  EXPECT_FALSE(e.check(huge, small)) << "larger than the pool's whole budget";
  // Capacity binds too: the pool holds 3 leases (p, then two more).
  e.cancel("u");
  for (const char* id : {"s1", "s2", "s3"}) {
    Request r = req(id, {"gpu"}, GiB, GiB);
    r.placed = true;
    e.enqueue(r);
    bool third = std::string(id) == "s3";
    EXPECT_EQ(e.grantArrival(id, tight).size(), third ? 0u : 1u) << id;
    if (third) {
      EXPECT_EQ(e.waitReason(id), admission::Wait::Capacity);
    }
  }
}

TEST(Admission, QueueTimeoutsExpire) {
  Engine e(pools());
  e.enqueue(req("h", {"one"}));
  e.grant({});
  Request r = req("w", {"one"});
  r.deadlineUs = 1000;
  e.enqueue(r);
  e.enqueue(req("forever", {"one"}));
  EXPECT_TRUE(e.expire(999).empty());
  EXPECT_EQ(e.expire(1000), std::vector<std::string>{"w"});
  EXPECT_TRUE(e.waiting("forever"));
}

TEST(Admission, RecoveryHoldsWhatAlreadyRunsAndSaysWhenItIsOver) {
  Engine e(pools());
  EXPECT_TRUE(e.hold(req("a", {"one"})));
  auto over = e.hold(req("b", {"one"}));
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("over capacity"), std::string::npos);
  EXPECT_EQ(e.usage("one").holders.size(), 2u);
  e.enqueue(req("c", {"one"}));
  EXPECT_TRUE(e.grant({}).empty());
  e.release("a");
  EXPECT_TRUE(e.grant({}).empty());  // still at capacity with b
  e.release("b");
  EXPECT_EQ(e.grant({}), std::vector<std::string>{"c"});
}

// Property: random acquire/release/cancel/expire sequences, with random
// headroom, never exceed capacity or budgets, never grant half a pool set,
// never let a request overtake an earlier one of the same or higher priority
// that shares a pool, and every request is granted once the others leave.
// A pool shared by users: each may hold 2 leases and 24 GiB of its GPU budget.
config::Pool sharedPool() {
  config::Pool p{"shared", 4, 64 * GiB, 64 * GiB, {}};
  p.perUserCapacity = 2;
  p.perUserGpuMemoryBudget = 24 * GiB;
  return p;
}

Request owned(const std::string& id, std::uint32_t owner, std::uint64_t gpu, bool placed = false) {
  Request r = req(id, {"shared"}, 4 * GiB, gpu);
  r.owner = owner;
  r.placed = placed;
  return r;
}

TEST(Admission, AUserAtTheirShareWaitsWithoutHoldingBackAnotherUser) {
  Engine e({sharedPool()});
  for (const char* id : {"a1", "a2", "a3"}) e.enqueue(owned(id, 1000, 4 * GiB));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(e.waitReason("a3"), admission::Wait::UserShare);
  auto f = admission::waitFigures(*e.request("a3"), admission::Wait::UserShare, e.pools()[0],
                                  e.usage("shared"), {});
  EXPECT_EQ(f.detail, "uid 1000's share of pool shared: 2 of 2 leases held (per_user_capacity)");
  // Another user is not behind a3: a3 waits for its owner's leases alone.
  e.enqueue(owned("b1", 1001, 4 * GiB));
  EXPECT_EQ(e.grantArrival("b1", {}), (std::vector<std::string>{"b1"}));
  // The same user's next request stays behind its own earlier one.
  e.enqueue(owned("a4", 1000, 4 * GiB));
  EXPECT_TRUE(e.grant({}).empty());
  EXPECT_EQ(e.waitReason("a4"), admission::Wait::Behind);
  ASSERT_TRUE(e.release("a1"));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"a3"}));
  EXPECT_EQ(e.waitReason("a4"), admission::Wait::UserShare);
  EXPECT_EQ(e.usage("shared").users.at(1000).leases, 2u);
  EXPECT_EQ(e.usage("shared").users.at(1001).leases, 1u);
}

// Red-team cases: a user's second waiter (behind their first) still holds
// back nobody else; the order a request names its pools in does not decide
// whom it holds back; root's and placed leases are outside every share.
TEST(Admission, NoQueueOfOneUsersRequestsHoldsBackAnotherUser) {
  config::Pool gpu = sharedPool();
  gpu.perUserCapacity = 1;
  config::Pool full{"full", 1, std::nullopt, std::nullopt, {}};
  Engine e({gpu, full});
  e.enqueue(owned("a0", 1000, 4 * GiB));
  e.enqueue(req("x", {"full"}));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"a0", "x"}));
  e.enqueue(owned("a1", 1000, 4 * GiB));
  e.enqueue(owned("a2", 1000, 4 * GiB));
  // Full pool first, user's share second: it still waits on its owner's share.
  Request a3 = owned("a3", 1000, 4 * GiB);
  a3.pools = {"full", "shared"};
  e.enqueue(a3);
  e.enqueue(owned("b1", 1001, 4 * GiB));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"b1"}));
  EXPECT_EQ(e.waitReason("a1"), admission::Wait::UserShare);
  EXPECT_EQ(e.waitReason("a2"), admission::Wait::Behind);
  EXPECT_EQ(e.waitReason("a3"), admission::Wait::Behind);
  // Root and the scheduler's placements are not counted in any share.
  for (const char* id : {"r1", "r2"}) e.enqueue(owned(id, 0, 4 * GiB));
  e.enqueue(owned("p1", 1001, 4 * GiB, true));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"r1", "r2"}));  // capacity 4: full
  EXPECT_EQ(e.usage("shared").users.count(0), 0u);
  ASSERT_TRUE(e.release("r1"));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"p1"}));
  EXPECT_EQ(e.usage("shared").users.at(1001).leases, 1u);  // b1 only
}

TEST(Admission, AUsersGpuShareCountsTheirDeclarationsAndSaysTheArithmetic) {
  Engine e({sharedPool()});
  e.enqueue(owned("a1", 1000, 20 * GiB));
  e.enqueue(owned("a2", 1000, 8 * GiB));
  e.enqueue(owned("b1", 1001, 20 * GiB));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"a1", "b1"}));
  EXPECT_EQ(e.waitReason("a2"), admission::Wait::UserShare);
  auto f = admission::waitFigures(*e.request("a2"), admission::Wait::UserShare, e.pools()[0],
                                  e.usage("shared"), {});
  EXPECT_EQ(f.needed, 8 * GiB);
  EXPECT_EQ(f.free, 4 * GiB);
  EXPECT_EQ(f.detail,
            "uid 1000's share of pool shared's GPU memory: needs 8.0 GiB, 4.0 GiB of 24.0 GiB "
            "left (per_user_gpu_memory_budget)");
  // A request above the share on its own could never be granted: refused.
  auto tooBig = e.check(owned("a3", 1000, 25 * GiB));
  ASSERT_FALSE(tooBig);
  EXPECT_EQ(tooBig.error().message,
            "--gpu-memory-max 25.0 GiB is larger than pool shared's share per user 24.0 GiB "
            "(per_user_gpu_memory_budget): ask for 24.0 GiB or less");
  // The scheduler's placement is the scheduler's share, root's the
  // operator's (declared leases): not held by ours.
  EXPECT_TRUE(e.check(owned("p1", 1000, 25 * GiB, true)));
  EXPECT_TRUE(e.check(owned("r1", 0, 25 * GiB)));
  e.enqueue(owned("p1", 1000, 8 * GiB, true));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"p1"}));
  ASSERT_TRUE(e.release("a1"));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"a2"}));
}

TEST(Admission, RecoveryCountsEachOwnersShare) {
  Engine e({sharedPool()});
  ASSERT_TRUE(e.hold(owned("a1", 1000, 4 * GiB)));
  ASSERT_TRUE(e.hold(owned("a2", 1000, 4 * GiB)));
  e.enqueue(owned("a3", 1000, 4 * GiB));
  EXPECT_TRUE(e.grant({}).empty());
  EXPECT_EQ(e.waitReason("a3"), admission::Wait::UserShare);
  ASSERT_TRUE(e.release("a2"));
  ASSERT_TRUE(e.release("a1"));
  EXPECT_EQ(e.usage("shared").users.count(1000), 0u);  // no holder: no entry left behind
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"a3"}));
}

TEST(Admission, APoolsDefaultsDeclareWhatARequestLeavesOut) {
  config::Pool gpu{"gpu", 2, 64 * GiB, 96 * GiB, {}};
  gpu.defaultMemoryMax = 16 * GiB;
  gpu.defaultGpuMemoryMax = 32 * GiB;
  config::Pool small{"small", 2, 64 * GiB, 96 * GiB, {}};
  small.defaultGpuMemoryMax = 8 * GiB;
  std::vector<config::Pool> configured{gpu, small};
  lease::Declaration bare;
  EXPECT_EQ(admission::fillDefaults(bare, {"gpu"}, configured),
            (std::vector<std::string>{"memory_max", "gpu_memory_max"}));
  EXPECT_EQ(bare.memoryMax, 16 * GiB);
  EXPECT_EQ(bare.gpuMemoryMax, 32 * GiB);
  // Several pools: the smallest default, so every pool's share holds it.
  lease::Declaration both;
  admission::fillDefaults(both, {"gpu", "small"}, configured);
  EXPECT_EQ(both.gpuMemoryMax, 8 * GiB);
  // What the request declares is never replaced.
  lease::Declaration asked;
  asked.gpuMemoryMax = 40 * GiB;
  EXPECT_EQ(admission::fillDefaults(asked, {"gpu"}, configured),
            (std::vector<std::string>{"memory_max"}));
  EXPECT_EQ(asked.gpuMemoryMax, 40 * GiB);
  lease::Declaration none;
  EXPECT_TRUE(admission::fillDefaults(none, {"small2"}, configured).empty());
  EXPECT_FALSE(none.memoryMax);
}

// A reload's pools: a change that would leave a live lease outside its
// pool's rules is refused whole (nothing changes); one that does not is
// applied, and a waiter the new pools could never grant leaves the queue.
TEST(Admission, AReloadThatWouldStrandALiveLeaseIsRefusedWholeAndNamesEach) {
  Engine e({sharedPool(), pools()[1]});
  e.enqueue(owned("a1", 1000, 8 * GiB));
  e.enqueue(owned("a2", 1000, 8 * GiB));
  e.enqueue(req("c1", {"cpu"}));
  ASSERT_EQ(e.grant({}), (std::vector<std::string>{"a1", "a2", "c1"}));

  config::Pool smaller = sharedPool();
  smaller.capacity = 1;                      // below its 2 holders
  smaller.gpuMemoryBudget = 12 * GiB;        // below 16 GiB declared
  smaller.perUserGpuMemoryBudget = 8 * GiB;  // below uid 1000's 16 GiB
  config::Pool cpuBudgeted = pools()[1];
  cpuBudgeted.memoryBudget = 8 * GiB;  // c1 declared no memory_max
  auto r = e.reconfigure({smaller, cpuBudgeted});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "it would strand live leases: "
            "pool cpu's new memory_budget counts each lease's memory_max, and lease c1 declares "
            "none; "
            "pool shared's capacity 1 is below its 2 live leases; "
            "pool shared's gpu_memory_budget 12.0 GiB is below what its live leases declare, "
            "16.0 GiB; "
            "pool shared's per_user_gpu_memory_budget 8.0 GiB is below what uid 1000's live "
            "leases hold, 16.0 GiB");
  // Nothing changed: the old limits still rule.
  EXPECT_EQ(e.pools()[0].capacity, 4u);
  EXPECT_EQ(*e.pools()[0].gpuMemoryBudget, 64 * GiB);

  auto removed = e.reconfigure({sharedPool()});
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().message,
            "it would strand live leases: pool cpu is removed but 1 lease is live in it (c1)");
}

TEST(Admission, AReloadAppliesNewLimitsAndDropsOnlyTheWaitersTheyCanNeverGrant) {
  Engine e(pools());
  e.enqueue(req("g1", {"gpu"}, 8 * GiB, 40 * GiB));
  e.enqueue(req("o1", {"one"}));
  e.enqueue(req("o2", {"one"}));                     // waits on capacity
  e.enqueue(req("g2", {"gpu"}, 8 * GiB, 60 * GiB));  // waits: 100 GiB > 96 GiB
  ASSERT_EQ(e.grant({}), (std::vector<std::string>{"g1", "o1"}));
  ASSERT_EQ(e.queued(), 2u);

  config::Pool gpu = pools()[0];
  gpu.gpuMemoryBudget = 50 * GiB;  // g1's 40 GiB still fits; g2's 60 GiB never can
  config::Pool one = pools()[2];
  one.capacity = 2;  // o2 fits now
  auto r = e.reconfigure({gpu, pools()[1], one});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, "g2");
  EXPECT_EQ((*r)[0].why,
            "--gpu-memory-max 60.0 GiB is larger than pool gpu's whole GPU memory budget 50.0 GiB");
  EXPECT_FALSE(e.waiting("g2"));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"o2"}));
  EXPECT_EQ(*e.pools()[0].gpuMemoryBudget, 50 * GiB);

  // A pool nobody holds may go, and a new one comes.
  config::Pool fresh{"fresh", 1, std::nullopt, std::nullopt, {}};
  ASSERT_TRUE(e.release("o1") && e.release("o2"));
  auto r2 = e.reconfigure({gpu, pools()[1], fresh});
  ASSERT_TRUE(r2) << r2.error().message;
  e.enqueue(req("f1", {"fresh"}));
  EXPECT_EQ(e.grant({}), (std::vector<std::string>{"f1"}));
  EXPECT_FALSE(e.check(req("x", {"one"})));
}

// A pool recovery already found over its limits (the config changed while
// the daemon was down) does not block a reload that leaves it as it is or
// raises it; one that lowers it further is refused.
TEST(Admission, AReloadIsNotBlamedForWhatRecoveryFoundOver) {
  Engine e(pools());
  EXPECT_TRUE(e.hold(req("o1", {"one"})));
  EXPECT_FALSE(e.hold(req("o2", {"one"})));  // over capacity 1 already
  EXPECT_TRUE(e.reconfigure(pools()));
  config::Pool zero = pools()[2];
  zero.capacity = 0;
  EXPECT_FALSE(e.reconfigure({pools()[0], pools()[1], zero}));
}

TEST(AdmissionProperty, RandomSequencesKeepEveryInvariant) {
  const std::vector<std::string> names = {"gpu", "cpu", "one", "shared"};
  for (unsigned seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](std::uint64_t n) { return static_cast<std::size_t>(rng() % n); };
    auto configured = pools();
    configured.push_back(sharedPool());
    Engine e(configured);
    std::map<std::string, std::uint64_t> arrival;
    std::set<std::string> holders;
    std::uint64_t next = 0, now = 0;
    bool tightHeadroom = false;
    auto headroom = [&](const config::Pool&) {
      return tightHeadroom ? admission::Headroom{16 * GiB, 24 * GiB} : admission::Headroom{};
    };
    // Whether the owner's own leases fill the owner's share of a pool `w` names.
    auto atShare = [&](const Request& w) {
      if (w.placed || w.owner == 0) return false;
      for (const auto& name : w.pools) {
        const auto* p = &*std::find_if(configured.begin(), configured.end(),
                                       [&](const config::Pool& c) { return c.name == name; });
        auto mine = e.usage(name).users.find(w.owner);
        if (mine == e.usage(name).users.end()) continue;
        if ((p->perUserCapacity && mine->second.leases >= *p->perUserCapacity) ||
            (p->perUserGpuMemoryBudget &&
             mine->second.gpuMemoryDeclared.over(w.declaration.gpuMemoryMax.value_or(0),
                                                 *p->perUserGpuMemoryBudget)))
          return true;
      }
      return false;
    };
    // At its share, or behind an earlier request of its owner, on a pool
    // they share, that is (what holds it is its owner's own leases).
    std::function<bool(const Request&)> heldByShare = [&](const Request& w) {
      if (atShare(w)) return true;
      for (const Request* v : e.queue()) {
        if (v == &w || v->id == w.id) break;
        bool common = std::any_of(v->pools.begin(), v->pools.end(), [&](const std::string& p) {
          return std::find(w.pools.begin(), w.pools.end(), p) != w.pools.end();
        });
        if (common && v->owner == w.owner && heldByShare(*v)) return true;
      }
      return false;
    };
    auto check = [&](const std::vector<std::string>& granted) {
      for (const auto& p : e.pools()) {
        const auto& u = e.usage(p.name);
        ASSERT_LE(u.holders.size(), p.capacity) << "seed " << seed;
        ASSERT_LE(u.memoryDeclared.value(), p.memoryBudget.value_or(UINT64_MAX)) << "seed " << seed;
        ASSERT_LE(u.gpuMemoryDeclared.value(), p.gpuMemoryBudget.value_or(UINT64_MAX))
            << "seed " << seed;
        for (const auto& [owner, mine] : u.users) {
          ASSERT_LE(mine.leases, p.perUserCapacity.value_or(UINT64_MAX)) << "seed " << seed;
          ASSERT_LE(mine.gpuMemoryDeclared.value(), p.perUserGpuMemoryBudget.value_or(UINT64_MAX))
              << "seed " << seed;
        }
      }
      for (const auto& id : granted) {
        const Request* r = e.request(id);
        ASSERT_NE(r, nullptr);
        for (const auto& p : r->pools) {
          const auto& h = e.usage(p).holders;
          ASSERT_NE(std::find(h.begin(), h.end(), id), h.end()) << "half-granted " << id;
        }
        if (tightHeadroom && r->declaration.gpuMemoryMax) {
          ASSERT_LE(*r->declaration.gpuMemoryMax, 24 * GiB) << "headroom exceeded";
        }
        for (const Request* w : e.queue()) {
          bool shares = std::any_of(w->pools.begin(), w->pools.end(), [&](const std::string& p) {
            return std::find(r->pools.begin(), r->pools.end(), p) != r->pools.end();
          });
          bool earlier = w->priority > r->priority ||
                         (w->priority == r->priority && arrival[w->id] < arrival[id]);
          // One user at their share holds back no other user: a waiter its
          // owner's own leases hold (waiting on the share, or behind its
          // owner's request that does) may be overtaken by another user.
          if (w->owner != r->owner && heldByShare(*w)) continue;
          ASSERT_FALSE(shares && earlier)
              << id << " overtook " << w->id << " (seed " << seed << ") waiting as "
              << (e.waitReason(w->id) ? admission::waitName(*e.waitReason(w->id)) : "-")
              << " owners " << w->owner << "/" << r->owner << " pools " << w->pools.size() << ":"
              << w->pools[0] << " vs " << r->pools[0] << " placed " << r->placed << w->placed;
        }
        holders.insert(id);
      }
    };
    for (int step = 0; step < 200; ++step) {
      ++now;
      switch (pick(6)) {
        case 0:
        case 1: {
          Request r;
          r.id = "r" + std::to_string(next);
          arrival[r.id] = next++;
          std::set<std::string> ps;
          for (std::size_t k = 0, n = 1 + pick(2); k < n; ++k) ps.insert(names[pick(names.size())]);
          r.pools.assign(ps.begin(), ps.end());
          if (ps.count("gpu") || ps.count("shared")) {
            r.declaration.memoryMax = (1 + pick(32)) * GiB;
            r.declaration.gpuMemoryMax = (1 + pick(ps.count("shared") ? 24 : 64)) * GiB;
          }
          r.owner = pick(5) == 0 ? 0 : 1000 + static_cast<std::uint32_t>(pick(3));
          r.priority = static_cast<int>(pick(3)) - 1;
          if (pick(4) == 0) r.deadlineUs = now + 1 + pick(20);
          ASSERT_TRUE(e.check(r)) << e.check(r).error().message;
          // After an arrival, the daemon's fast path must decide exactly as
          // a full pass would (same headroom): run both on copies and compare.
          check(e.grant(headroom));
          Engine full = e;
          full.enqueue(r);
          auto byFull = full.grant(headroom);
          e.enqueue(r);
          auto byArrival = e.grantArrival(r.id, headroom);
          ASSERT_EQ(byArrival, byFull) << "seed " << seed << " step " << step;
          ASSERT_EQ(e.queued(), full.queued());
          ASSERT_EQ(e.waitReason(r.id), full.waitReason(r.id))
              << "seed " << seed << " step " << step;
          check(byArrival);
          break;
        }
        case 2:
        case 3:
          if (!holders.empty()) {
            auto it = holders.begin();
            std::advance(it, static_cast<long>(pick(holders.size())));
            ASSERT_TRUE(e.release(*it));
            holders.erase(it);
          }
          break;
        case 4:
          if (e.queued()) {
            std::string id = e.queue()[pick(e.queued())]->id;
            ASSERT_TRUE(e.cancel(id));
          }
          break;
        case 5:
          tightHeadroom = !tightHeadroom;
          (void)e.expire(now);
          break;
      }
      check(e.grant(headroom));
    }
    // Everyone leaves; every waiting request must then be granted in turn.
    tightHeadroom = false;
    for (int round = 0; round < 1000 && (e.queued() || !holders.empty()); ++round) {
      for (const auto& h : holders) e.release(h);
      holders.clear();
      check(e.grant(headroom));
    }
    ASSERT_EQ(e.queued(), 0u) << "a request starved (seed " << seed << ")";
  }
}

}  // namespace
}  // namespace tally
