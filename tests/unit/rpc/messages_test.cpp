// The daemon's replies and events, typed both ways: what the daemon encodes
// a client decodes to the same values; what is missing or mistyped is an
// error naming the field, never a guess.
#include "rpc/messages.h"

#include <gtest/gtest.h>

#include "coverage/handover.h"
#include "enforce/plan.h"
#include "rpc/client.h"

namespace tally::rpc::api {
namespace {

// A run lease's client plans its run from the grant (LeaseReply::kernelState)
// with the same function the daemon planned the lease with: for every
// hand-over and declaration, both plans give the same MemoryMax and bound.
TEST(RpcMessages, ARunIsPlannedAsTheDaemonPlannedItsLease) {
  constexpr std::uint64_t G = 1ULL << 30;
  for (auto cov : {coverage::Coverage::HostOnly, coverage::Coverage::HostAndGtt}) {
    for (bool keep : {false, true}) {
      for (auto memoryMax : {std::optional<std::uint64_t>{}, std::optional{8 * G}}) {
        for (auto gpuMax : {std::optional<std::uint64_t>{}, std::optional{40 * G}}) {
          SCOPED_TRACE(::testing::Message()
                       << coverage::coverageName(cov) << " keep=" << keep
                       << " memory_max=" << memoryMax.value_or(0) << " gpu=" << gpuMax.value_or(0));
          enforce::Bounds b;
          b.memoryMax = memoryMax;
          b.gpu.max = gpuMax;
          const coverage::Handover handover{cov, keep};
          const enforce::Plan daemon = enforce::plan(b, nullptr, handover.kernelState(true));
          LeaseReply granted;  // as daemon::Views::leaseReply fills it
          granted.lease = "0123456789ab";
          granted.name = "llama";
          granted.kind = "run";
          granted.state = "granted";
          if (daemon.memoryMaxWithGpu) granted.memoryMaxEffective = daemon.memoryMax;
          granted.coverage = coverage::coverageName(cov);
          granted.gpuBoundAdvisory = daemon.advisory;
          if (daemon.bound.any())
            granted.view = {{"gpu_bound", {{"action", enforce::actionName(daemon.bound.action)}}}};
          auto back = decodeLeaseReply(encode(granted));
          ASSERT_TRUE(back) << back.error().message;
          const enforce::Plan client = enforce::plan(b, nullptr, back->kernelState());
          EXPECT_EQ(client.memoryMax, daemon.memoryMax);
          EXPECT_EQ(client.memoryMaxWithGpu, daemon.memoryMaxWithGpu);
          EXPECT_EQ(client.memoryMax,
                    back->memoryMaxEffective.has_value() ? back->memoryMaxEffective : memoryMax);
          EXPECT_EQ(client.bound.max, daemon.bound.max);
          EXPECT_EQ(client.bound.action, daemon.bound.action);
          EXPECT_EQ(client.advisory, daemon.advisory);
          EXPECT_FALSE(client.kernelLimit) << "the in-kernel refusal is the daemon's";
        }
      }
    }
  }
}

TEST(RpcMessages, RepliesRoundTrip) {
  auto hello = decodeHelloReply(encode(HelloReply{1, 4242, 1000, "/var/lib/tally"}));
  ASSERT_TRUE(hello) << hello.error().message;
  EXPECT_EQ(hello->protocol, 1);
  EXPECT_EQ(hello->daemonPid, 4242);
  EXPECT_EQ(hello->uid, 1000u);
  EXPECT_EQ(hello->stateDir, "/var/lib/tally");

  LeaseReply l;
  l.lease = "0123456789ab";
  l.name = "llama";
  l.kind = "run";
  l.state = "granted";
  l.pools = {"gpu"};
  l.memoryMaxEffective = 48u << 30;
  l.coverage = "host+gtt";
  l.gpuBoundAdvisory = true;
  l.view = {{"priority", 3}, {"gpu_bound", {{"action", "report"}}}};
  json wire = encode(l);
  EXPECT_EQ(wire["priority"], 3) << "the view rides along";
  auto back = decodeLeaseReply(wire);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->lease, l.lease);
  EXPECT_EQ(back->state, "granted");
  EXPECT_EQ(back->pools, l.pools);
  EXPECT_EQ(back->memoryMaxEffective, l.memoryMaxEffective);
  EXPECT_EQ(back->coverage, "host+gtt");
  EXPECT_TRUE(back->gpuBoundAdvisory);
  EXPECT_FALSE(back->cgroup);

  auto rel = decodeReleaseReply(encode(ReleaseReply{"abc", "stopping"}));
  ASSERT_TRUE(rel);
  EXPECT_EQ(rel->state, "stopping");
  auto done = decodeCompleteReply(encode(CompleteReply{"abc", 17, "9f3a", std::nullopt}));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->seq, 17);
  EXPECT_FALSE(done->kernelCharge) << "a lease the kernel did not charge";
  auto charged = decodeCompleteReply(
      encode(CompleteReply{"abc", 18, "9f3b", bpf::LeaseCharge{0, 64 << 20, 0, 2, 64 << 20}}));
  ASSERT_TRUE(charged);
  ASSERT_TRUE(charged->kernelCharge);
  EXPECT_EQ(charged->kernelCharge->peakBytes, 64u << 20);
  EXPECT_EQ(charged->kernelCharge->refused, 2u);
  EXPECT_EQ(charged->kernelCharge->refusedBytes, 64u << 20);
  EXPECT_TRUE(decodeBoundReply(encode(BoundReply{true}))->recorded);
  EXPECT_EQ(decodeSubscribeReply(encode(SubscribeReply{{"lease", "gpu-bound"}}))->events,
            (std::vector<std::string>{"lease", "gpu-bound"}));
  auto replay = decodeSubscribeReply(encode(SubscribeReply{{"lease"}, true}));
  ASSERT_TRUE(replay);
  EXPECT_TRUE(replay->replaying);
  EXPECT_FALSE(decodeSubscribeReply(json{{"subscribed", {"lease"}}})->replaying);
  EXPECT_FALSE(decodeSubscribeReply(json{{"subscribed", {"lease"}}, {"replaying", 1}}));
  auto end = decodeReplayedEvent(encode(ReplayedEvent{7, true, "disk I/O error"}));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->rows, 7u);
  EXPECT_TRUE(end->truncated);
  EXPECT_EQ(end->error, "disk I/O error");
  EXPECT_FALSE(decodeReplayedEvent(encode(ReplayedEvent{}))->error);
  EXPECT_FALSE(decodeReplayedEvent(json{{"rows", 10001}}));
  EXPECT_FALSE(decodeReplayedEvent(json{{"rows", -1}}));
  EXPECT_EQ(decodeMetricsReply(encode(MetricsReply{"# HELP x\n"}))->text, "# HELP x\n");
}

TEST(RpcMessages, AMalformedReplyIsAnErrorNamingTheField) {
  EXPECT_EQ(decodeLeaseReply(json{{"state", "granted"}}).error().message, "\"lease\" is required");
  EXPECT_EQ(decodeLeaseReply(json{{"lease", "a"}, {"state", "x"}, {"memory_max_effective", -1}})
                .error()
                .message,
            "\"memory_max_effective\" must be a non-negative integer");
  EXPECT_EQ(decodeLeaseReply(json{{"lease", "a"}, {"state", "x"}, {"pools", {1}}}).error().message,
            "\"pools\" must be an array of strings");
  EXPECT_EQ(decodeLeaseReply(json::array()).error().message,
            "the daemon's lease reply is not a JSON object");
  EXPECT_EQ(decodeCompleteReply(json{{"lease", "a"}, {"hash", "h"}}).error().message,
            "\"seq\" is required");
  EXPECT_EQ(decodeCompleteReply(json{{"lease", "a"},
                                     {"hash", "h"},
                                     {"seq", 1},
                                     {"kernel_charge", {{"bytes", 0}, {"peak_bytes", -1}}}})
                .error()
                .message,
            "\"kernel_charge.peak_bytes\" must be a non-negative integer");
  EXPECT_EQ(decodeCompleteReply(
                json{{"lease", "a"}, {"hash", "h"}, {"seq", 1}, {"kernel_charge", "2 refused"}})
                .error()
                .message,
            "\"kernel_charge\" must be an object");
  EXPECT_EQ(decodeMetricsReply(json::object()).error().message,
            "\"text\" is required (is the daemon an older tally?)");
  EXPECT_EQ(decodeDocument(json{{"pools", json::array()}}, "leases").error().message,
            "the daemon's reply has no \"leases\" (is it an older tally?)");
  EXPECT_EQ(decodeHelloReply(json{{"protocol", "1"}}).error().message,
            "\"protocol\" must be an integer in 0..1048576");
}

// A lease's end is its terminal ledger row (outcome, lost, withdrawn); a
// "released" row asks for the end and is not it (the Slurm plugin waits for
// the end, not the request).
TEST(RpcMessages, LeaseEventsAndWhichAreTheEnd) {
  LeaseEvent e{"abc", "outcome", "llama", {"gpu"}, "lease abc (llama): exited 0", "exited", 1000};
  auto back = decodeLeaseEvent(encode(e));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->outcome, "exited");
  EXPECT_EQ(back->owner, 1000u);
  // Root's lease names root (uid 0 is an owner, not an absence).
  e.owner = 0;
  EXPECT_EQ(decodeLeaseEvent(encode(e))->owner, 0u);
  e.owner = std::nullopt;
  EXPECT_FALSE(decodeLeaseEvent(encode(e))->owner);
  EXPECT_FALSE(decodeLeaseEvent(json{{"lease", "a"}, {"kind", "outcome"}, {"owner_uid", -1}}));
  EXPECT_EQ(back->message, e.message);
  for (const char* kind : {"outcome", "lost", "withdrawn"}) {
    e.kind = kind;
    EXPECT_TRUE(e.terminal()) << kind;
  }
  for (const char* kind : {"released", "granted", "started", "queued", "readopted"}) {
    e.kind = kind;
    EXPECT_FALSE(e.terminal()) << kind;
  }
  EXPECT_EQ(decodeLeaseEvent(json{{"kind", "outcome"}}).error().message, "\"lease\" is required");
}

TEST(RpcMessages, GpuBoundEventsCarryTheBoundsEvent) {
  enforce::BoundEvent b;
  b.atNs = 77;
  b.kind = enforce::Verdict::Kill;
  b.bytes = 5u << 30;
  b.limit = 4u << 30;
  b.summary = "killed by tally: ...";
  auto back = decodeGpuBoundEvent(encode(GpuBoundEvent{"abc", "hog", "drm-fdinfo", b, 1001}));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->lease, "abc");
  EXPECT_EQ(back->owner, 1001u);
  EXPECT_EQ(back->event.kind, enforce::Verdict::Kill);
  EXPECT_EQ(back->event.bytes, b.bytes);
  EXPECT_EQ(back->event.summary, b.summary);
  EXPECT_EQ(back->source, "drm-fdinfo");
}

// Each request's params carry their method: the typed call cannot send them
// under another name.
TEST(RpcMessages, ParamsCarryTheirMethod) {
  EXPECT_STREQ(methodName(Acquire::kMethod), "acquire");
  EXPECT_STREQ(methodName(Attach::kMethod), "attach");
  EXPECT_STREQ(methodName(Release::kMethod), "release");
  EXPECT_STREQ(methodName(Cancel::kMethod), "cancel");
  EXPECT_STREQ(methodName(Resume::kMethod), "resume");
  EXPECT_STREQ(methodName(LeaseQuery::kMethod), "lease");
  EXPECT_STREQ(methodName(Overview::kMethod), "overview");
  EXPECT_EQ(encode(Hello{}), json::object());
  EXPECT_EQ(encode(Release{{"abc"}}), (json{{"lease", "abc"}}));
}

}  // namespace
}  // namespace tally::rpc::api
