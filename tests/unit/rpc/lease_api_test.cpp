// The typed requests: what the CLI encodes, the daemon decodes to the same
// values; every field's type, size and range is checked and named.
#include "rpc/lease_api.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using json = nlohmann::json;
namespace api = rpc::api;

TEST(LeaseApi, WhatIsEncodedDecodesToTheSameRequest) {
  api::Attach a;
  a.declared.pools = {"gpu", "batch"};
  a.declared.declaration.name = "llama";
  a.declared.declaration.memoryMax = 8ULL << 30;
  a.declared.declaration.gpuMemoryMax = 48ULL << 30;
  a.declared.declaration.gpuMemoryHigh = 40ULL << 30;
  a.declared.declaration.gpuAction = enforce::Action::Report;
  a.declared.declaration.gpuOverSamples = 3;
  a.declared.timeoutUs = 30'000'000;
  a.declared.priority = -7;
  a.declared.declaration.attributes = {{"model", "qwen3-32b"}};
  a.target.cgroup = "/machine.slice/x.scope";
  a.declared.noWait = true;
  a.declared.placed = true;
  auto back = api::decodeAttach(api::encode(a));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->declared.noWait);
  EXPECT_TRUE(back->declared.placed);
  EXPECT_EQ(back->declared.pools, a.declared.pools);
  EXPECT_EQ(back->declared.declaration.name, a.declared.declaration.name);
  EXPECT_EQ(back->declared.declaration.memoryMax, a.declared.declaration.memoryMax);
  EXPECT_EQ(back->declared.declaration.gpuMemoryMax, a.declared.declaration.gpuMemoryMax);
  EXPECT_EQ(back->declared.declaration.gpuMemoryHigh, a.declared.declaration.gpuMemoryHigh);
  EXPECT_EQ(back->declared.declaration.gpuAction, enforce::Action::Report);
  EXPECT_EQ(back->declared.declaration.gpuOverSamples, 3u);
  EXPECT_EQ(back->declared.timeoutUs, a.declared.timeoutUs);
  EXPECT_EQ(back->declared.priority, -7);
  EXPECT_EQ(back->declared.declaration.attributes, a.declared.declaration.attributes);
  EXPECT_EQ(back->target.cgroup, a.target.cgroup);

  api::Started s{"0123456789ab", "tally-0123456789ab.scope",
                 "/tally.slice/tally-0123456789ab.slice/tally-0123456789ab.scope",
                 "/tally.slice/tally-0123456789ab.slice"};
  auto sb = api::decodeStarted(api::encode(s));
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ(sb->cgroup, s.cgroup);
  EXPECT_EQ(sb->countersCgroup, s.countersCgroup);

  enforce::BoundEvent e{5, enforce::Verdict::Kill, 2, 1, 2, 3, "killed by tally"};
  auto bb = api::decodeBound(api::encode(api::Bound{"0123456789ab", e}));
  ASSERT_TRUE(bb) << bb.error().message;
  EXPECT_EQ(bb->event.kind, enforce::Verdict::Kill);
  EXPECT_EQ(bb->event.summary, "killed by tally");
}

TEST(LeaseApi, ARequestsPathsAreCanonicalBeforeAnyRule) {
  auto a = api::decodeAttach({{"pools", {"gpu"}}, {"cgroup", "//system.slice/./x.service/"}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->target.cgroup, "/system.slice/x.service");
  EXPECT_NE(api::decodeAttach({{"pools", {"gpu"}}, {"cgroup", "/a/../b"}})
                .error()
                .message.find("\"cgroup\""),
            std::string::npos);
}

TEST(LeaseApi, EveryRefusalNamesItsField) {
  struct Case {
    json params;
    const char* field;
  } cases[] = {
      {{{"pools", {"gpu"}}, {"memory_max", "8G"}}, "\"memory_max\""},
      {{{"pools", {"gpu"}}, {"priority", 101}}, "\"priority\""},
      {{{"pools", {"gpu"}}, {"gpu_over_samples", 0}}, "\"gpu_over_samples\""},
      {{{"pools", {"gpu"}}, {"gpu_memory_action", "explode"}}, "\"gpu_memory_action\""},
      {{{"pools", {"gpu"}}, {"timeout_us", 1e30}}, "\"timeout_us\""},
      {{{"pools", json::array()}}, "\"pools\""},
      {{{"pools", {"gpu"}}, {"colour", 1}}, "unknown field \"colour\""},
      {{{"pools", {"gpu"}}, {"attributes", {{"Model", "x"}}}}, "\"attributes\""},
      {{{"pools", {"gpu"}}, {"placed", 1}}, "\"placed\""},
      // A placed lease is never queued: it must say no_wait.
      {{{"pools", {"gpu"}}, {"placed", true}}, "\"placed\" needs \"no_wait\": true"},
  };
  for (const auto& c : cases) {
    auto r = api::decodeAcquire(c.params);
    ASSERT_FALSE(r) << c.params;
    EXPECT_NE(r.error().message.find(c.field), std::string::npos)
        << c.params << " -> " << r.error().message;
  }
  EXPECT_NE(api::decodeLeaseRef({{"lease", "a b"}}).error().message.find("\"lease\""),
            std::string::npos);
  // lease: `live` is a boolean, absent from what asks for the whole view
  // (a daemon from before it refuses an unknown field).
  EXPECT_NE(
      api::decodeLeaseQuery({{"lease", "ab"}, {"live", "yes"}}).error().message.find("\"live\""),
      std::string::npos);
  EXPECT_FALSE(api::decodeLeaseQuery({{"lease", "ab"}, {"rows", false}}));
  auto live = api::decodeLeaseQuery({{"lease", "ab"}, {"live", true}});
  ASSERT_TRUE(live);
  EXPECT_EQ(live->lease, "ab");
  EXPECT_TRUE(live->live);
  EXPECT_FALSE(api::decodeLeaseQuery({{"lease", "ab"}})->live);
  EXPECT_EQ(api::encode(api::LeaseQuery{"ab", false}), json({{"lease", "ab"}}));
  EXPECT_EQ(api::encode(api::LeaseQuery{"ab", true}), json({{"lease", "ab"}, {"live", true}}));
  EXPECT_FALSE(api::decodeEmpty({{"x", 1}}));
  EXPECT_TRUE(api::decodeEmpty(json::object()));
  auto rec = api::decodeComplete(
      {{"lease", "ab"},
       {"record", {{"lease", {{"id", "ab"}}}, {"outcome", {{"class", "exploded"}}}}}});
  EXPECT_NE(rec.error().message.find("record.outcome.class"), std::string::npos);
}

TEST(LeaseApi, MethodsAreNamedOnce) {
  for (const char* m :
       {"hello", "acquire", "attach", "started", "complete", "resume", "release", "cancel",
        "leases", "lease", "pools", "bound", "subscribe", "seats", "overview", "metrics"}) {
    auto parsed = api::parseMethod(m);
    ASSERT_TRUE(parsed) << m;
    EXPECT_STREQ(api::methodName(*parsed), m);
  }
  EXPECT_FALSE(api::parseMethod("frobnicate"));
}

// --container travels as the engine's answer: the init pid plus the
// engine, its 64-hex id and its name, each checked.
TEST(LeaseApi, AContainerTravelsWithItsPidAndIsChecked) {
  const std::string id(64, 'c');
  api::Attach a;
  a.declared.pools = {"gpu"};
  a.target.pid = 5010;
  a.target.container = lease::Container{"docker", id, "ollama"};
  auto back = api::decodeAttach(api::encode(a));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE(back->target.container);
  EXPECT_EQ(back->target.container->engine, "docker");
  EXPECT_EQ(back->target.container->id, id);
  EXPECT_EQ(back->target.container->name, "ollama");
  EXPECT_EQ(back->target.pid, 5010);
  auto bad = [&](nlohmann::json container, nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json p = {{"pools", {"gpu"}}, {"pid", 5010}, {"container", container}};
    p.update(extra);
    auto r = api::decodeAttach(p);
    return r ? std::string() : r.error().message;
  };
  EXPECT_EQ(bad({{"engine", "lxc"}, {"id", id}, {"name", "x"}}),
            "\"container.engine\" must be podman or docker");
  EXPECT_EQ(bad({{"engine", "podman"}, {"id", "3f2a"}, {"name", "x"}}),
            "\"container.id\" must be the container's 64-hex id");
  EXPECT_EQ(bad({{"engine", "podman"}, {"id", id}, {"name", "../x"}}),
            "\"container.name\" must be a container name ([A-Za-z0-9][A-Za-z0-9_.-]*)");
  EXPECT_EQ(bad({{"engine", "podman"}, {"id", id}, {"name", "x"}, {"extra", 1}}),
            "unknown field \"container.extra\"");
  EXPECT_EQ(bad("podman:x"), "\"container\" must be {\"engine\", \"id\", \"name\"}");
  EXPECT_EQ(api::decodeAttach({{"pools", {"gpu"}},
                               {"cgroup", "/x.scope"},
                               {"container", {{"engine", "podman"}, {"id", id}, {"name", "x"}}}})
                .error()
                .message,
            "\"container\" names a container by its \"pid\": give both");
}

}  // namespace
}  // namespace tally

namespace tally::rpc::api {
namespace {

// exited: exactly one of an exit code and a signal, each in its range.
TEST(LeaseApi, AnExitReportCarriesExactlyOneStatus) {
  auto code = decodeExited({{"lease", "0123456789ab"}, {"exit_code", 3}});
  ASSERT_TRUE(code) << code.error().message;
  EXPECT_EQ(code->exitCode, 3);
  EXPECT_EQ(code->signal, std::nullopt);
  auto sig = decodeExited(encode(Exited{"0123456789ab", std::nullopt, 9}));
  ASSERT_TRUE(sig) << sig.error().message;
  EXPECT_EQ(sig->signal, 9);
  for (const char* bad :
       {R"({"lease": "0123456789ab"})", R"({"lease": "0123456789ab", "exit_code": 0, "signal": 9})",
        R"({"lease": "0123456789ab", "exit_code": 256})",
        R"({"lease": "0123456789ab", "signal": 0})", R"({"lease": "0123456789ab", "signal": 65})",
        R"({"lease": "0123456789ab", "exit_code": -1})",
        R"({"lease": "0123456789ab", "exit_code": 0, "extra": 1})", R"({"exit_code": 0})"}) {
    EXPECT_FALSE(decodeExited(json::parse(bad))) << bad;
  }
  EXPECT_EQ(parseMethod("exited"), Method::Exited);
}

// A child lease names its parent and no pool; join names the cgroup it joins.
TEST(LeaseApi, AChildLeaseNamesItsParentAndNoPool) {
  auto child = decodeAttach(
      {{"cgroup", "/job_7/step_0/user"}, {"parent", "0123456789ab"}, {"gpu_memory_max", 1024u}});
  ASSERT_TRUE(child) << child.error().message;
  EXPECT_EQ(child->parent, "0123456789ab");
  EXPECT_TRUE(child->declared.pools.empty());
  auto back = decodeAttach(encode(*child));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->parent, "0123456789ab");
  EXPECT_FALSE(encode(*child).contains("pools")) << "none to send";
  auto join = decodeAttach({{"cgroup", "/job_7"}, {"pools", {"slurm"}}, {"join", true}});
  ASSERT_TRUE(join) << join.error().message;
  EXPECT_TRUE(join->join);
  EXPECT_TRUE(decodeAttach(encode(*join))->join);
  auto kept = decodeAttach({{"cgroup", "/job_7/step_extern/user"},
                            {"parent", "0123456789ab"},
                            {"keep_when_empty", true}});
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_TRUE(kept->keepWhenEmpty);
  EXPECT_TRUE(decodeAttach(encode(*kept))->keepWhenEmpty);
  EXPECT_FALSE(child->keepWhenEmpty);
  EXPECT_FALSE(encode(*child).contains("keep_when_empty"));
  for (const char* bad : {
           R"({"cgroup": "/a", "pools": ["gpu"], "keep_when_empty": true})",
           R"({"pid": 7, "parent": "0123456789ab", "keep_when_empty": true})",
           R"({"cgroup": "/a/b", "parent": "0123456789ab", "keep_when_empty": 1})",
           R"({"cgroup": "/a/b", "parent": "0123456789ab", "pools": ["gpu"]})",
           R"({"cgroup": "/a/b", "parent": "../x"})",
           R"({"cgroup": "/a/b", "parent": 7})",
           R"({"cgroup": "/a/b"})",
           R"({"pid": 7, "pools": ["gpu"], "join": true})",
           R"({"cgroup": "/a", "pools": ["gpu"], "join": "yes"})",
       }) {
    auto r = decodeAttach(json::parse(bad));
    EXPECT_FALSE(r) << bad;
  }
  auto named = decodeAttach(
      json::parse(R"({"cgroup": "/a/b", "parent": "0123456789ab", "pools": ["gpu"]})"));
  ASSERT_FALSE(named);
  EXPECT_NE(named.error().message.find("a child holds none"), std::string::npos)
      << named.error().message;
}

}  // namespace
}  // namespace tally::rpc::api

namespace tally {
namespace {

namespace api = rpc::api;

// subscribe: from now on, or the ledger's rows since a time or after a row
// first; anything else is refused by name.
TEST(LeaseApi, SubscribeTakesASinceTimeOrALastRowAndNothingElse) {
  auto none = api::decodeSubscribe(nlohmann::json::object());
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->sinceNs);
  EXPECT_FALSE(none->afterSeq);
  api::Subscribe s;
  s.sinceNs = 1764687001123000000ull;
  s.afterSeq = 42;
  auto back = api::decodeSubscribe(api::encode(s));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->sinceNs, s.sinceNs);
  EXPECT_EQ(back->afterSeq, 42);
  EXPECT_EQ(api::encode(api::Subscribe{}), nlohmann::json::object());
  for (const char* bad : {R"({"since_ns": -1})", R"({"since_ns": "10m"})",
                          R"({"after_seq": 9223372036854775808})", R"({"follow": true})"}) {
    auto r = api::decodeSubscribe(nlohmann::json::parse(bad));
    EXPECT_FALSE(r) << bad;
  }
}

}  // namespace
}  // namespace tally
