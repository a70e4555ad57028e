// `tally events`' lines and filters on the daemon's own event JSON.
#include "views/event_line.h"

#include <gtest/gtest.h>

namespace tally::views {
namespace {

using json = nlohmann::json;

const json kGranted = {{"event", "lease"},
                       {"lease", "1f0c2a9b3e7d"},
                       {"kind", "granted"},
                       {"name", "llama"},
                       {"pools", {"gpu"}},
                       {"message", "lease 1f0c2a9b3e7d (llama): granted in gpu"},
                       {"at_ns", 1764687001123456789ull},
                       {"seq", 12}};

TEST(EventLine, SaysWhenAndWhatInOneLine) {
  EXPECT_EQ(eventLine(kGranted, true),
            "2025-12-02 14:50:01.123  lease 1f0c2a9b3e7d (llama): granted in gpu");
  json kill = {{"event", "gpu-bound"},
               {"lease", "1f0c2a9b3e7d"},
               {"name", "llama"},
               {"source", "drm-fdinfo"},
               {"kind", "gpu-memory-kill"},
               {"bytes", 2u << 30},
               {"limit", 1u << 30},
               {"summary", "killed by tally: GPU memory 2.0 GiB over 1.0 GiB"},
               {"at_ns", 1764687002000000000ull}};
  EXPECT_EQ(eventLine(kill, true),
            "2025-12-02 14:50:02.000  gpu-memory-kill lease 1f0c2a9b3e7d (llama): killed by tally: "
            "GPU memory 2.0 GiB over 1.0 GiB");
  json coverage = {{"event", "coverage"},
                   {"kernel", "6.12.117"},
                   {"coverage", "host"},
                   {"tally_does", "meters and bounds GTT itself"},
                   {"at_ns", 1764687003000000000ull}};
  EXPECT_EQ(eventLine(coverage, true),
            "2025-12-02 14:50:03.000  coverage: host on kernel 6.12.117: meters and bounds GTT "
            "itself");
  // An older daemon's event carries no time: "-", never a made-up one.
  json old = kGranted;
  old.erase("at_ns");
  EXPECT_EQ(eventLine(old, true), "-  lease 1f0c2a9b3e7d (llama): granted in gpu");
  // Something this tally does not know is shown raw, never dropped.
  EXPECT_EQ(eventLine(json{{"event", "new-thing"}, {"x", 1}}, true),
            "-  new-thing: {\"event\":\"new-thing\",\"x\":1}");
}

TEST(EventLine, FiltersByLeaseIdOrNamePoolAndKind) {
  EXPECT_TRUE(matches({}, kGranted));
  EXPECT_TRUE(matches({{"1f0c"}, {}, {}}, kGranted));   // the id's first characters
  EXPECT_TRUE(matches({{"llama"}, {}, {}}, kGranted));  // the name, whole
  EXPECT_FALSE(matches({{"llam"}, {}, {}}, kGranted));
  EXPECT_FALSE(matches({{"2a"}, {}, {}}, kGranted));
  EXPECT_TRUE(matches({{"nope", "llama"}, {}, {}}, kGranted));  // any of a list
  EXPECT_TRUE(matches({{}, {"gpu"}, {}}, kGranted));
  EXPECT_FALSE(matches({{}, {"cpu"}, {}}, kGranted));
  EXPECT_TRUE(matches({{}, {}, {"granted", "outcome"}}, kGranted));
  EXPECT_FALSE(matches({{}, {}, {"outcome"}}, kGranted));
  EXPECT_FALSE(matches({{"llama"}, {}, {"outcome"}}, kGranted));  // every filter given must match
  json coverage = {{"event", "coverage"}, {"coverage", "host"}};
  EXPECT_EQ(eventKind(coverage), "coverage");
  EXPECT_TRUE(matches({{}, {}, {"coverage"}}, coverage));
  EXPECT_FALSE(matches({{}, {"gpu"}, {}}, coverage)) << "names no pool";
  // --user: the event's owner; an event that names none never matches.
  json owned = kGranted;
  owned["owner_uid"] = 1000;
  EXPECT_TRUE(matches({{}, {}, {}, 1000u}, owned));
  EXPECT_FALSE(matches({{}, {}, {}, 1001u}, owned));
  EXPECT_TRUE(matches({{}, {}, {}, 0u}, json{{"event", "lease"}, {"owner_uid", 0}}));
  EXPECT_FALSE(matches({{}, {}, {}, 1000u}, kGranted)) << "names no owner";
  EXPECT_FALSE(matches({{}, {}, {}, 1000u}, coverage));
}

TEST(EventLine, AnUnknownKindIsRefusedWithTheList) {
  EXPECT_TRUE(checkFilter({{}, {}, {"gpu-memory-kill", "refused"}}));
  auto bad = checkFilter({{}, {}, {"kill"}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message.rfind("--kind kill: not a kind of event; the kinds are queued, "
                                      "queue-timeout, cancelled, refused-by-reload, granted, ",
                                      0),
            0u)
      << bad.error().message;
}

// The kinds come from their definitions (rpc::kQueuedKind, ledger/kinds.h,
// enforce::verdictName): this is the list operators type after --kind.
TEST(EventLine, TheKindsAreTheQueueTheLedgersLifecycleTheBoundAndCoverage) {
  EXPECT_EQ(eventKinds(),
            (std::vector<std::string>{
                "queued", "queue-timeout", "cancelled", "refused-by-reload", "granted", "started",
                "adopted", "readopted", "released", "outcome", "lost", "withdrawn",
                "gpu-memory-high", "gpu-memory-high-cleared", "gpu-memory-kill",
                "gpu-memory-max-exceeded", "gpu-memory-kill-failed", "refused", "coverage"}));
}

}  // namespace
}  // namespace tally::views
