// Who a client is and what it may claim: a refusal names the real cause, a
// job unit or a Slurm step's identity is the daemon's to verify, a limit is
// read back, and an exception is the request's own.
#include <map>

#include "daemon/hostile_service_fixture.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

// A cgroup without the memory controller has no memory.max: the refusal
// says so and how to enable it, never that the file is someone else's.
TEST_F(HostileServiceTest, NoMemoryControllerIsNamedNotBlamedOnOwnership) {
  workloadCgroup("/work/nomem", true, 1000);
  host.addCgroup("/work/nomem", {4444});
  ASSERT_EQ(::unlink((host.cgroupRoot() + "/work/nomem/memory.max").c_str()), 0);
  json r =
      call(1, 1000, "attach", {{"pools", {"one"}}, {"cgroup", "/work/nomem"}, {"memory_max", GiB}});
  EXPECT_EQ(r["error"]["code"], "refused") << r;
  std::string why = r["error"]["message"];
  EXPECT_NE(why.find("the memory controller is not enabled for cgroup /work/nomem"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("not yours"), std::string::npos) << why;
}

// Why 2 (the service side): every exception is the request's own. A seam
// that throws is answered "internal" and the next request is served.
struct ThrowingUnits : daemon::Units {
  Result<std::string> controlGroup(const std::string&) override {
    throw std::runtime_error("boom");
  }
  Status setMemoryMax(const std::string&, std::uint64_t) override { return Ok{}; }
  Status killUnit(const std::string&, int) override { return Ok{}; }
  Status stopUnit(const std::string&) override { return Ok{}; }
  Result<daemon::UnitRun> run(const std::string&) override { throw std::runtime_error("boom"); }
  Status watchUnit(const std::string&) override { return Ok{}; }
};

// `tally logs` runs journalctl on a lease's job_unit: a user who names
// another's detached job in her lease would show its log to whoever reads
// hers. The daemon takes the key only from a client inside that service.
TEST_F(HostileServiceTest, AJobUnitIsTakenOnlyFromInsideThatJob) {
  const std::string unit = "tally-job-0123456789ab.service";
  FakeProcess asker;
  asker.pid = 1000;  // every call's peer (ServiceTest::call)
  asker.cgroup = "/user.slice/user-1000.slice/session-2.scope";
  host.addProcess(asker);
  json r =
      call(1, 1000, "acquire",
           {{"pools", {"one"}}, {"attributes", {{"job_unit", unit}, {"job_manager", "system"}}}});
  EXPECT_EQ(r["error"]["code"], "forbidden") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find("is not in that service"),
            std::string::npos)
      << r;
  r = call(1, 0, "acquire", {{"pools", {"one"}}, {"attributes", {{"job_unit", unit}}}});
  EXPECT_EQ(r["error"]["code"], "forbidden") << r << " (root's client is checked too)";

  // From inside the job's service, as tally run --detach asks: granted.
  writeFile(host.procRoot() + "/1000/cgroup", "0::/system.slice/" + unit + "\n");
  r = call(2, 1000, "acquire",
           {{"pools", {"one"}}, {"attributes", {{"job_unit", unit}, {"job_manager", "system"}}}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["attributes"]["job_unit"], unit) << r;
}

// Provenance is the daemon's: a user's lease cannot pose as a Slurm step
// (its name or the slurm_* attributes the plugin sets, as root, from the job
// it verified), and a user's outcome is journalled under the unit and cgroup
// the daemon verified, whatever the record claims.
TEST_F(HostileServiceTest, AUsersLeaseCannotPoseAsAnotherOrAsSlurm) {
  json r = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "slurm-4242.0"}});
  EXPECT_EQ(r["error"]["code"], "forbidden") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find("is a Slurm step's"), std::string::npos);
  r = call(1, 1000, "acquire", {{"pools", {"one"}}, {"attributes", {{"slurm_user", "bob"}}}});
  EXPECT_EQ(r["error"]["code"], "forbidden") << r;
  EXPECT_TRUE(call(2, 0, "acquire",
                   {{"pools", {"one"}},
                    {"name", "slurm-4242.0"},
                    {"attributes", {{"slurm_job_id", "4242"}}}})["ok"]);  // the plugin, as root

  // Its scope claimed as someone else's unit: refused.
  json g = call(4, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  std::string posing = g["result"]["lease"];
  std::string scope = "/tally.slice/tally-" + posing + ".scope";
  workloadCgroup(scope, true, 1000);
  json st = call(4, 1000, "started",
                 {{"lease", posing}, {"cgroup", scope}, {"unit", "llama-server.service"}});
  EXPECT_EQ(st["error"]["code"], "forbidden") << st;
  EXPECT_NE(st["error"]["message"].get<std::string>().find(
                "unit llama-server.service is not the unit of cgroup " + scope),
            std::string::npos)
      << st;

  std::string id = runningLease(3, 1000, "gpu");
  json record = {{"lease", {{"id", id}, {"unit", "llama-server.service"}, {"cgroup", "/x"}}},
                 {"outcome", {{"class", "exited"}, {"exit_code", 0}, {"summary", "exited 0"}}}};
  ASSERT_TRUE(call(3, 1000, "complete", {{"lease", id}, {"record", record}})["ok"]);
  const auto& end = journal.notes.back();
  std::map<std::string, std::string> f(end.fields.begin(), end.fields.end());
  EXPECT_EQ(f.count("TALLY_UNIT"), 0u);  // no unit claimed: none journalled, not the record's
  EXPECT_EQ(f["TALLY_CGROUP"], "/tally.slice/tally-" + id + ".slice/tally-" + id + ".scope");
}

// A run lease's memory_max is the daemon's own reading, not the client's
// word: a scope that does not hold it is no start.
TEST_F(HostileServiceTest, ARunLeasesMemoryMaxIsReadBackBeforeItStarts) {
  json a = call(1, 1000, "acquire", {{"pools", {"one"}}, {"memory_max", 64 << 20}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string id = a["result"]["lease"];
  std::string scope = "/tally.slice/tally-" + id + ".scope";
  workloadCgroup(scope, true, 1000);  // memory.max "max": the client never applied it
  json r = call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}});
  EXPECT_EQ(r["error"]["code"], "refused") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find(
                "declared memory_max 67108864 but its cgroup " + scope + " does not hold it"),
            std::string::npos)
      << r;
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted"}));
  writeFile(host.cgroupRoot() + scope + "/memory.max", "67108864\n");
  r = call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}});
  EXPECT_TRUE(r["ok"]) << r;
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started"}));
}

TEST_F(HostileServiceTest, AnExceptionIsAnsweredInternalAndTheDaemonGoesOn) {
  ThrowingUnits throwing;
  daemon::ServiceEnv env{*proc, *sys, &*cgroup, outbox, watches, &throwing, 4096, &journal};
  daemon::Service s(cfg, *ledgerDb, env);
  daemon::Dispatcher dispatcher(s, outbox);
  dispatcher.line(
      5, daemon::Peer{1, 0, 0},
      {R"({"v":1,"id":9,"method":"attach","params":{"pools":["one"],"unit":"x.service"}})", false});
  EXPECT_EQ(outbox.last(5)["error"]["code"], "internal");
  EXPECT_EQ(outbox.last(5)["id"], 9);
  EXPECT_EQ(dispatcher.internalErrors(), 1u);
  dispatcher.line(5, daemon::Peer{1, 0, 0}, {R"({"v":1,"id":10,"method":"hello"})", false});
  EXPECT_TRUE(outbox.last(5)["ok"]);
  // Deep nesting is refused before any parser recursion.
  std::string deep = R"({"v":1,"id":)" + std::string(80000, '[');
  dispatcher.line(5, daemon::Peer{1, 0, 0}, {deep, false});
  EXPECT_EQ(outbox.last(5)["error"]["code"], "too-deep");
}

}  // namespace
}  // namespace tally
