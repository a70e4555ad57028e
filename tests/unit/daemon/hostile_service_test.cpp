// The attacks of "the daemon survives every client" that reach the service,
// each answered with an error naming the field or the state, never a crash.
// Here malformed fields, cgroup paths, limits, lost leases, deep trees and
// unclean text; one user's budgets: hostile_service_budget_test.cpp; who a
// client is and what it may claim: hostile_service_identity_test.cpp.
#include <fcntl.h>

#include "daemon/hostile_service_fixture.h"
#include "util/clean_text.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST_F(HostileServiceTest, WrongTypesAreInvalidParamsNamingTheField) {
  std::string id = runningLease(1, 1000);
  json r = call(1, 1000, "bound", {{"lease", id}, {"event", {{"kind", 5}}}});
  EXPECT_EQ(r["error"]["code"], "invalid-params");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("\"event.kind\""), std::string::npos)
      << r;
  r = call(1, 1000, "complete", {{"lease", id}, {"record", {{"lease", {{"id", 7}}}}}});
  EXPECT_EQ(r["error"]["code"], "invalid-params");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("record.lease.id"), std::string::npos)
      << r;
  r = call(1, 1000, "bound",
           {{"lease", id},
            {"event",
             {{"kind", "gpu-memory-high"}, {"bytes", "lots"}, {"limit", 1}, {"summary", "x"}}}});
  EXPECT_NE(r["error"]["message"].get<std::string>().find("\"event.bytes\""), std::string::npos)
      << r;
  r = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"colour", "blue"}});
  EXPECT_EQ(r["error"]["code"], "invalid-params");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("unknown field \"colour\""),
            std::string::npos)
      << r;
  r = call(1, 1000, "acquire", {{"pools", {"gpu", 3}}, {"gpu_memory_max", GiB}});
  EXPECT_NE(r["error"]["message"].get<std::string>().find("\"pools\"[1]"), std::string::npos) << r;
  // A summary of 511 'a' and one two-byte character is cut before the
  // character, not through it, and the row is valid UTF-8 JSON.
  std::string summary = std::string(511, 'a') + "\xc3\xa9";
  r = call(
      1, 1000, "bound",
      {{"lease", id},
       {"event",
        {{"kind", "gpu-memory-high"}, {"bytes", 2 * GiB}, {"limit", GiB}, {"summary", summary}}}});
  ASSERT_TRUE(r["ok"]) << r;
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["summary"], std::string(511, 'a'));
  // And the service still answers.
  EXPECT_TRUE(call(2, 0, "hello", json::object())["ok"]);
}

// Why 8: one cgroup has one spelling; aliases neither dodge the rules nor hold three slots.
TEST_F(HostileServiceTest, PathAliasesAreOneCgroupAndCrossNoPrivilegeLine) {
  // uid 1002's delegated user manager cgroup: the directory is theirs, its
  // own memory.max is root's (systemd delegates the inside, not the limit).
  std::string user = "/user.slice/user-1002.slice/user@1002.service";
  workloadCgroup(user, true, 1002);
  for (const char* alias : {"/.", "//", "/./"}) {
    std::string path = user + alias;
    json r = call(
        1, 1002, "attach",
        {{"pools", {"gpu"}}, {"cgroup", path}, {"memory_max", 8 * GiB}, {"gpu_memory_max", GiB}});
    EXPECT_EQ(r["error"]["code"], "forbidden") << path << " " << r;
  }
  EXPECT_EQ(readFile(host.cgroupRoot() + user + "/memory.max"), "max\n");  // never written
  EXPECT_EQ(
      call(
          1, 1002, "attach",
          {{"pools", {"gpu"}}, {"cgroup", user + "/.."}, {"gpu_memory_max", GiB}})["error"]["code"],
      "invalid-params");
  // /x, /x/. and //x are one cgroup: the second and third are conflicts.
  workloadCgroup("/system.slice/x.service", true);
  json first =
      call(1, 0, "attach",
           {{"pools", {"gpu"}}, {"cgroup", "/system.slice/x.service"}, {"gpu_memory_max", GiB}});
  ASSERT_TRUE(first["ok"]) << first;
  for (const char* alias :
       {"/system.slice/x.service/.", "//system.slice//x.service", "/system.slice/./x.service/"}) {
    json r = call(1, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", alias}, {"gpu_memory_max", GiB}});
    EXPECT_EQ(r["error"]["code"], "conflict") << alias << " " << r;
  }
  // A symlink in a fixture tree is not a way in either.
  ASSERT_EQ(::symlink((host.cgroupRoot() + "/system.slice").c_str(),
                      (host.cgroupRoot() + "/link").c_str()),
            0);
  json viaLink = call(1, 0, "attach",
                      {{"pools", {"gpu"}}, {"cgroup", "/link/x.service"}, {"gpu_memory_max", GiB}});
  EXPECT_EQ(viaLink["error"]["code"], "not-found") << viaLink;
  EXPECT_NE(viaLink["error"]["message"].get<std::string>().find("symlink"), std::string::npos)
      << viaLink;
}

TEST_F(HostileServiceTest, CountersCgroupIsTheLeasesOwn) {
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  std::string id = a["result"]["lease"];
  std::string slice = "/tally.slice/tally-" + id + ".slice";
  std::string scope = slice + "/tally-" + id + ".scope";
  workloadCgroup(slice, true, 1000);
  workloadCgroup(scope, true, 1000);
  workloadCgroup("/system.slice", true, 1000);  // even one the caller owns
  json r = call(1, 1000, "started",
                {{"lease", id}, {"cgroup", scope}, {"counters_cgroup", "/system.slice"}});
  EXPECT_EQ(r["error"]["code"], "forbidden") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find("counters_cgroup"), std::string::npos)
      << r;
  EXPECT_TRUE(call(1, 1000, "started",
                   {{"lease", id}, {"cgroup", scope}, {"counters_cgroup", slice}})["ok"]);
}

// Why 9: the state machine does not trust its client.
TEST_F(HostileServiceTest, OutcomesOnlyForRunningLeasesAndBoundEventsAreRateLimited) {
  json a = call(1, 1000, "acquire", {{"pools", {"one"}}});
  std::string granted = a["result"]["lease"];
  call(2, 1000, "acquire", {{"pools", {"one"}}});
  std::string queued = outbox.last(2)["lease"];
  json record = {{"lease", {{"id", queued}}}, {"outcome", {{"class", "exited"}}}};
  json r = call(2, 1000, "complete", {{"lease", queued}, {"record", record}});
  EXPECT_EQ(r["error"]["code"], "conflict") << r;
  EXPECT_TRUE(rows(queued).empty());  // no outcome without a grant
  record["lease"]["id"] = granted;
  r = call(1, 1000, "complete", {{"lease", granted}, {"record", record}});
  EXPECT_EQ(r["error"]["code"], "conflict") << r;  // granted, never started: nothing ran
  EXPECT_EQ(kinds(granted), (std::vector<std::string>{"granted"}));
  // No phantom holder: releasing the grant lets the queued request in.
  EXPECT_TRUE(call(1, 1000, "release", {{"lease", granted}})["ok"]);
  EXPECT_EQ(outbox.last(2)["result"]["lease"], queued);
  EXPECT_EQ(service->queuedRequests(), 0u);

  std::string id = runningLease(3, 1000);
  json ev = {{"kind", "gpu-memory-high"}, {"bytes", 2 * GiB}, {"limit", GiB}, {"summary", "over"}};
  int recorded = 0, limited = 0;
  for (int i = 0; i < 100; ++i) {
    json b = call(3, 1000, "bound", {{"lease", id}, {"event", ev}});
    if (b["ok"] == true)
      ++recorded;
    else if (b["error"]["code"] == "rate-limited")
      ++limited;
  }
  EXPECT_EQ(recorded, 20);  // the burst (Limits::boundBurst); the refill in this loop's time is < 1
  EXPECT_EQ(limited, 80);
  std::size_t boundRows = 0;
  for (const auto& k : kinds(id)) boundRows += k == "gpu-bound";
  EXPECT_EQ(boundRows, 20u);
}

// Why 3: what one connection, and everyone, may keep waiting.
TEST_F(HostileServiceTest, QueuedRequestsAreCappedPerConnectionAndInTotal) {
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);
  for (int i = 0; i < 64; ++i) call(2, 1000, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(service->queuedRequests(), 64u);
  json over = call(2, 1000, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(over["error"]["code"], "busy");
  EXPECT_NE(over["error"]["message"].get<std::string>().find("64"), std::string::npos);
  // Another connection may still queue; the total cap holds for all.
  cfg.daemon.maxQueued = 66;
  service.reset();
  daemon::ServiceEnv env{*proc, *sys, &*cgroup, outbox, watches, &units, 4096, &journal};
  env.limits.maxQueued = 66;
  service = std::make_unique<daemon::Service>(cfg, *ledgerDb, env);
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);
  for (int c = 10; c < 13; ++c) {
    for (int i = 0; i < 22; ++i)
      call(static_cast<std::uint64_t>(c), 1000, "acquire", {{"pools", {"one"}}});
  }
  EXPECT_EQ(service->queuedRequests(), 66u);
  EXPECT_EQ(call(20, 1000, "acquire", {{"pools", {"one"}}})["error"]["code"], "busy");
  // A connection that goes away frees its places.
  service->disconnected(10);
  EXPECT_EQ(service->queuedRequests(), 44u);
  EXPECT_EQ(outbox.last(20)["error"]["code"], "busy");
  call(20, 1000, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(outbox.last(20)["event"], "queued");
}

// Why 12 (and issue 25): limits no workload can live with are refused, in
// the one rule every way in shares (lease/limits_rule.h), and never applied.
TEST_F(HostileServiceTest, LimitsNoWorkloadCanLiveWithAreRefused) {
  workloadCgroup("/system.slice/x.service", true);
  auto attach = [&](json extra) {
    json p = {{"pools", {"one"}}, {"cgroup", "/system.slice/x.service"}};
    p.update(extra);
    return call(1, 0, "attach", p);
  };
  struct Case {
    json params;
    std::string says;
  } cases[] = {
      {{{"memory_max", 0}}, "\"memory_max\" 0 bytes is below 1 MiB"},
      {{{"memory_max", 1}}, "\"memory_max\" 1 bytes is below 1 MiB"},
      {{{"memory_max", (1 << 20) - 1}}, "\"memory_max\" 1048575 bytes is below 1 MiB"},
      {{{"gpu_memory_high", 0}}, "\"gpu_memory_high\" 0 would act"},
      {{{"gpu_memory_max", GiB}, {"gpu_memory_high", 2 * GiB}},
       "\"gpu_memory_high\" 2.0 GiB is above \"gpu_memory_max\" 1.0 GiB"},
  };
  for (const auto& c : cases) {
    json r = attach(c.params);
    EXPECT_EQ(r["error"]["code"], "invalid-params") << r;
    EXPECT_NE(r["error"]["message"].get<std::string>().find(c.says), std::string::npos) << r;
    json acquire = {{"pools", {"one"}}};
    acquire.update(c.params);
    EXPECT_EQ(call(2, 1000, "acquire", acquire)["error"]["code"], "invalid-params") << acquire;
  }
  EXPECT_EQ(readFile(host.cgroupRoot() + "/system.slice/x.service/memory.max"), "max\n");
  EXPECT_EQ(service->liveLeases(), 0u);
  // The floor itself passes the rule (then arrival: it uses more than that now).
  EXPECT_NE(attach({{"memory_max", 1 << 20}})["error"]["message"].get<std::string>().find(
                "attaching would kill it on arrival"),
            std::string::npos);
}

TEST_F(HostileServiceTest, ALostRunLeasesSliceIsStopped) {
  std::string id = runningLease(1, 0, "one");
  std::string scope = "/tally.slice/tally-" + id + ".slice/tally-" + id + ".scope";
  service->disconnected(1);
  writeFile(host.cgroupRoot() + scope + "/cgroup.events", "populated 0\nfrozen 0\n");
  writeFile(host.cgroupRoot() + "/tally.slice/tally-" + id + ".slice/cgroup.events",
            "populated 0\nfrozen 0\n");
  service->tick();  // the grace (0 here) passed without the client
  EXPECT_EQ(kinds(id).back(), "lost");
  EXPECT_EQ(units.stops, std::vector<std::string>{"tally-" + id + ".slice"});
}

// Her own cgroup, 1,500 levels deep (once a SIGSEGV in a recursive walk, at
// every restart): refused at attach with the limit named; a tree that grows
// that deep after attach leaves the lease's GPU figure unknown with the
// reason, and the daemon samples on.
void chain(const std::string& top, int levels) {
  makeDirs(top);
  int back = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_EQ(::chdir(top.c_str()), 0);  // relative mkdirs: no PATH_MAX on the way down
  for (int i = 0; i < levels; ++i) {
    ASSERT_EQ(::mkdir("c", 0755), 0) << i;
    ASSERT_EQ(::chdir("c"), 0);
  }
  ASSERT_EQ(::fchdir(back), 0);
  ::close(back);
}

TEST_F(HostileServiceTest, ATreeTooDeepToWalkIsRefusedAtAttachAndNeverCrashesASample) {
  workloadCgroup("/user.slice/deep.scope", true, 1000);
  host.addCgroup("/user.slice/deep.scope", {4242});
  chain(host.cgroupRoot() + "/user.slice/deep.scope", 1500);
  json r = call(1, 1000, "attach", {{"pools", {"one"}}, {"cgroup", "/user.slice/deep.scope"}});
  ASSERT_FALSE(r["ok"]) << r;
  EXPECT_EQ(r["error"]["code"], "refused");
  EXPECT_EQ(r["error"]["message"],
            "the cgroup tree under /user.slice/deep.scope is deeper than 64 levels; tally does not "
            "walk trees that deep. Attach the cgroup that holds the workload itself, or keep its "
            "tree within 64 levels and 4096 cgroups (max_cgroups_walked_per_uid)");
  EXPECT_EQ(service->liveLeases(), 0u);

  // A lease whose workload deepens its tree afterwards.
  std::string id = runningLease(2, 1000);
  std::string scope = "/tally.slice/tally-" + id + ".slice/tally-" + id + ".scope";
  host.addCgroup(scope, {4243});
  service->sample();
  chain(host.cgroupRoot() + scope, 1500);
  service->sample();
  service->sample();
  json shown = call(3, 1000, "lease", {{"lease", id}});
  ASSERT_TRUE(shown["ok"]) << shown;
  EXPECT_EQ(shown["result"]["state"], "running");
  EXPECT_NE(shown["result"]["gpu"].value("unknown", "").find("deeper than 64 levels"),
            std::string::npos)
      << shown.dump(2);
}

// Text others read is clean on the way in: an attribute, a bound event's
// or an outcome's summary, a unit name with ESC, CSI, OSC, C1 or a bidi
// override is refused naming the field; a cgroup whose path is not clean
// text is refused with the path shown, never obeyed.
TEST_F(HostileServiceTest, TextOthersReadIsRefusedUnlessClean) {
  for (std::string bad : {std::string("\x1b]0;ALL GPU LEASES HEALTHY\x07"), std::string("\x1b[2J"),
                          std::string("c1\xc2\x9b"), std::string("evil\xe2\x80\xaegnp")}) {
    json r = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"attributes", {{"model", bad}}}});
    EXPECT_EQ(r["error"]["code"], "invalid-params") << r;
    EXPECT_NE(r["error"]["message"].get<std::string>().find("attribute 'model' contains a"),
              std::string::npos)
        << r;
    r = call(1, 0, "attach", {{"pools", {"one"}}, {"unit", "x" + bad + ".service"}});
    EXPECT_EQ(r["error"]["code"], "invalid-params") << r;
  }
  std::string id = runningLease(2, 1000);
  json r = call(2, 1000, "bound",
                {{"lease", id},
                 {"event",
                  {{"kind", "gpu-memory-high"},
                   {"bytes", 2 * GiB},
                   {"limit", GiB},
                   {"summary", "over\x1b]0;fine\x07"}}}});
  EXPECT_EQ(r["error"]["code"], "invalid-params") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find("contains a control character (U+001B)"),
            std::string::npos)
      << r;
  json record = {{"lease", {{"id", id}}},
                 {"outcome", {{"class", "exited"}, {"summary", "done\xe2\x80\xae"}}}};
  r = call(2, 1000, "complete", {{"lease", id}, {"record", record}});
  EXPECT_EQ(r["error"]["code"], "invalid-params") << r;
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started"}));  // nothing recorded

  // A cgroup is any bytes its owner chose: its path is shown, not obeyed.
  std::string evil = "/user.slice/x\x1b[2J\xff.scope";
  workloadCgroup(evil, true, 1000);
  r = call(3, 1000, "attach", {{"pools", {"one"}}, {"cgroup", evil}});
  EXPECT_EQ(r["error"]["code"], "refused")
      << r.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string msg = r["error"]["message"];
  EXPECT_NE(msg.find("cgroup /user.slice/x\\u{001B}[2J\\xff.scope has a path that contains a "
                     "control character (U+001B)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(text::cleanTextProblem(msg), std::nullopt);
}

}  // namespace
}  // namespace tally
