// The lease service's GPU bound and the hand-over: attached leases killed
// over gpu_memory_max through the seams, coverage recorded per start, the
// bound advisory once the kernel charges GTT.
#include "daemon/service_fixture.h"
#include "support/transcript.h"
#include "util/sha256.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST_F(ServiceBoundTest,
       AnAttachedLeaseOverItsGpuMemoryMaxIsKilledAfterTwoSamplesAndNothingElseIs) {
  gpuWorkload("/machine.slice/hog.scope", 5001, 11, 4);
  gpuWorkload("/machine.slice/sibling.scope", 5002, 12, 4);
  EXPECT_TRUE(call(9, 1000, "subscribe", json::object())["ok"]);
  json hog = call(1, 0, "attach",
                  {{"pools", {"gpu"}},
                   {"cgroup", "/machine.slice/hog.scope"},
                   {"gpu_memory_max", 3 * GiB},
                   {"gpu_memory_high", 2 * GiB},
                   {"name", "hog"},
                   {"force", true}});  // already over: attached only because the operator insists
  ASSERT_TRUE(hog["ok"]) << hog;
  json sib = call(2, 0, "attach",
                  {{"pools", {"gpu"}},
                   {"cgroup", "/machine.slice/sibling.scope"},
                   {"gpu_memory_max", 8 * GiB}});
  ASSERT_TRUE(sib["ok"]) << sib;
  std::string id = hog["result"]["lease"];
  service->sample();  // first sample over: not yet
  EXPECT_FALSE(killed("/machine.slice/hog.scope"));
  // gpu_memory_high crossed on that first sample: an event, no kill.
  ASSERT_FALSE(outbox.sent[9].empty());
  EXPECT_EQ(outbox.last(9)["event"], "gpu-bound");
  EXPECT_EQ(outbox.last(9)["kind"], "gpu-memory-high");
  service->sample();
  EXPECT_EQ(readFile(host.cgroupRoot() + "/machine.slice/hog.scope/cgroup.kill"), "1");
  EXPECT_FALSE(killed("/machine.slice/sibling.scope"));
  EXPECT_TRUE(units.kills.empty());  // a plain cgroup: cgroup.kill, not systemd
  json ev = outbox.last(9);
  EXPECT_EQ(ev["kind"], "gpu-memory-kill");
  EXPECT_EQ(ev["lease"], id);
  EXPECT_EQ(ev["bytes"], 4 * GiB);
  EXPECT_EQ(ev["limit"], 3 * GiB);
  std::string summary =
      "killed by tally: GPU memory 4.0 GiB over gpu_memory_max 3.0 GiB (drm-fdinfo, 2 samples at "
      "1s)";
  EXPECT_EQ(ev["summary"], summary);
  ASSERT_FALSE(journal.notes.empty());
  EXPECT_EQ(journal.notes.back().priority, 4);
  EXPECT_NE(journal.notes.back().message.find(summary), std::string::npos);
  EXPECT_EQ(journal.notes.back().fields[0], std::make_pair(std::string("TALLY_LEASE"), id));
  // A third sample does not kill again.
  writeFile(host.cgroupRoot() + "/machine.slice/hog.scope/cgroup.kill", "");
  service->sample();
  EXPECT_FALSE(killed("/machine.slice/hog.scope"));
  // The cgroup empties: the outcome names the kill.
  writeFile(host.cgroupRoot() + "/machine.slice/hog.scope/memory.events", "oom 1\noom_kill 1\n");
  writeFile(host.cgroupRoot() + "/machine.slice/hog.scope/cgroup.events",
            "populated 0\nfrozen 0\n");
  service->cgroupChanged(id);
  EXPECT_EQ(kinds(id),
            (std::vector<std::string>{"granted", "adopted", "gpu-bound", "gpu-bound", "outcome"}));
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["outcome"]["class"], "killed-by-tally");
  EXPECT_EQ(outcome["outcome"]["summary"].get<std::string>().rfind(summary, 0), 0u);
  EXPECT_EQ(outcome["gpu"]["bound"]["events"].size(), 2u);
  EXPECT_EQ(outcome["gpu"]["bound"]["action"], "refuse") << "the default";
  EXPECT_EQ(service->liveLeases(), 1u);  // the sibling runs on
}

TEST_F(ServiceBoundTest, AUnitIsKilledThroughSystemdAndReportModeNeverKills) {
  gpuWorkload("/system.slice/llama.service", 5003, 13, 4);
  units.cgroups["llama.service"] = "/system.slice/llama.service";
  gpuWorkload("/machine.slice/watch.scope", 5004, 14, 4);
  json unit = call(1, 0, "attach",
                   {{"pools", {"gpu"}},
                    {"unit", "llama.service"},
                    {"gpu_memory_max", GiB},
                    {"gpu_over_samples", 1},
                    {"force", true}});
  ASSERT_TRUE(unit["ok"]) << unit;
  json rep = call(2, 0, "attach",
                  {{"pools", {"gpu"}},
                   {"cgroup", "/machine.slice/watch.scope"},
                   {"gpu_memory_max", GiB},
                   {"gpu_memory_action", "report"}});
  ASSERT_TRUE(rep["ok"]) << rep;
  for (int i = 0; i < 4; ++i) service->sample();
  ASSERT_EQ(units.kills.size(), 1u);
  EXPECT_EQ(units.kills[0], std::make_pair(std::string("llama.service"), SIGKILL));
  EXPECT_FALSE(killed("/system.slice/llama.service"));
  EXPECT_FALSE(killed("/machine.slice/watch.scope"));
  std::string repId = rep["result"]["lease"];
  EXPECT_EQ(kinds(repId), (std::vector<std::string>{"granted", "adopted", "gpu-bound"}));
  json row = json::parse(rows(repId).back().body);
  EXPECT_EQ(row["kind"], "gpu-memory-max-exceeded");
  EXPECT_EQ(row["samples"], 2);
  EXPECT_EQ(call(3, 0, "attach",
                 {{"pools", {"gpu"}},
                  {"cgroup", "/machine.slice/x"},
                  {"gpu_memory_max", GiB},
                  {"gpu_memory_action", "explode"}})["error"]["code"],
            "invalid-params");
}

TEST_F(ServiceBoundTest, ARunLeasesClientReportsItsBoundEvents) {
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string id = a["result"]["lease"];
  json ev = {{"kind", "gpu-memory-kill"},
             {"bytes", 2 * GiB},
             {"limit", GiB},
             {"samples", 2},
             {"summary", "killed by tally: ..."}};
  // Not running yet: nothing to report about.
  EXPECT_EQ(call(1, 1000, "bound", {{"lease", id}, {"event", ev}})["error"]["code"], "conflict");
  std::string scope = "/tally-" + id + ".scope";
  workloadCgroup(scope, true, 1000);
  ASSERT_TRUE(call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  EXPECT_EQ(call(2, 1001, "bound", {{"lease", id}, {"event", ev}})["error"]["code"], "forbidden");
  EXPECT_EQ(
      call(1, 1000, "bound", {{"lease", id}, {"event", {{"kind", "nonsense"}}}})["error"]["code"],
      "invalid-params");
  // A client's failed kill is not taken: the daemon says its own, and a
  // user's word must not raise the operators' TallyGpuKillFailed.
  json failed = ev;
  failed["kind"] = "gpu-memory-kill-failed";
  EXPECT_EQ(call(1, 1000, "bound", {{"lease", id}, {"event", failed}})["error"]["code"],
            "invalid-params");
  EXPECT_TRUE(call(1, 1000, "bound", {{"lease", id}, {"event", ev}})["ok"]);
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "gpu-bound"}));
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

// A run lease's bound is the daemon's too: a client that enforces nothing and
// reports a tidy outcome still gets its workload killed over its
// gpu_memory_max, and the outcome's figures are what the daemon measured.
TEST_F(ServiceBoundTest, ARunLeaseOverItsGpuMemoryMaxIsKilledByTheDaemonWhateverItsClientSays) {
  json a =
      call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"name", "quiet"}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string id = a["result"]["lease"];
  std::string scope = "/tally.slice/tally-" + id + ".scope";
  gpuWorkload(scope, 5020, 31, 4);  // 4 GiB of GTT against 1 GiB declared
  ASSERT_EQ(::chown((host.cgroupRoot() + scope).c_str(), 1000, 1000), 0);
  ASSERT_TRUE(call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  service->sample();  // over once: not yet
  EXPECT_FALSE(killed(scope));
  service->sample();  // twice in a row: killed by the daemon (no systemd unit: cgroup.kill)
  EXPECT_TRUE(killed(scope));
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "gpu-bound"}));
  // The client reports its own kill of the same crossing: a row, not a second
  // journal line.
  json ev = {{"kind", "gpu-memory-kill"},
             {"bytes", 4 * GiB},
             {"limit", GiB},
             {"samples", 2},
             {"summary", "killed by tally: client's words"}};
  ASSERT_TRUE(call(1, 1000, "bound", {{"lease", id}, {"event", ev}})["ok"]);
  int killLines = 0;
  for (const auto& n : journal.notes) {
    for (const auto& [k, v] : n.fields) killLines += k == "TALLY_EVENT" && v == "gpu-memory-kill";
  }
  EXPECT_EQ(killLines, 1);
  // The client claims a clean exit and no GPU memory at all.
  json claimed = {{"schema", 1},
                  {"lease", {{"id", id}, {"command", {"llama-server"}}}},
                  {"declared", {{"memory_high", 1 << 20}, {"oom_policy", "continue"}}},
                  {"gpu", {{"peak_bytes", 0}, {"samples", 9}}},
                  {"outcome", {{"class", "exited"}, {"exit_code", 0}, {"summary", "exited"}}}};
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", id}, {"record", claimed}})["ok"]);
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["outcome"]["class"], "killed-by-tally");
  EXPECT_EQ(stored["outcome"]["summary"].get<std::string>().rfind(
                "killed by tally: GPU memory 4.0 GiB over gpu_memory_max 1.0 GiB", 0),
            0u)
      << stored["outcome"];
  EXPECT_NE(stored["outcome"]["summary"].get<std::string>().find("its client reported: exited"),
            std::string::npos);
  EXPECT_EQ(stored["outcome"]["wait_status_from"], "client");
  EXPECT_EQ(stored["gpu"]["peak_bytes"], 4 * GiB);  // the daemon's samples, not the claim
  EXPECT_GE(stored["gpu"]["samples"].get<int>(), 2);
  EXPECT_EQ(stored["memory"]["peak_bytes"], 2 * GiB);  // the cgroup's memory.peak
  EXPECT_EQ(stored["declared"]["gpu_memory_max"], GiB);
  EXPECT_EQ(stored["declared"]["memory_high"], 1 << 20);  // declared by the client alone
  EXPECT_EQ(stored["declared"]["oom_policy"], "continue");
  EXPECT_EQ(stored["lease"]["command"], json({"llama-server"}));
  // The client's word as a bounded digest: its hash, its size, the fields read.
  EXPECT_EQ(stored["client"]["sha256"], sha256::hex(claimed.dump()));
  EXPECT_EQ(stored["client"]["bytes"], claimed.dump().size());
  EXPECT_EQ(stored["client"]["outcome"], claimed["outcome"]);
  EXPECT_EQ(stored["client"]["declared"], claimed["declared"]);
  EXPECT_FALSE(stored["client"].contains("gpu")) << "only the fields readers use";
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

// A client's record of 128 KiB once cost the ledger 128 KiB a lease (24 MB
// a minute per user): the outcome row keeps a digest and a bounded command.
TEST_F(ServiceBoundTest, AClientsLargeRecordCostsTheLedgerABoundedRow) {
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string id = a["result"]["lease"];
  std::string scope = "/tally.slice/tally-" + id + ".scope";
  workloadCgroup(scope, true, 1000);
  ASSERT_TRUE(call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  // 40 arguments of 100 bytes, then 20,000 empty ones, and a declared field
  // holding 50 KB where a word belongs: none of it reaches the row whole.
  json command = json::array();
  for (int i = 0; i < 40; ++i) command.push_back(std::string(100, 'x'));
  for (int i = 0; i < 20'000; ++i) command.push_back("");
  json claimed = {{"lease", {{"id", id}, {"command", command}}},
                  {"declared", {{"oom_policy", std::string(50'000, 'p')}, {"memory_high", 4096}}},
                  {"outcome", {{"class", "exited"}, {"exit_code", 3}, {"summary", "exited 3"}}}};
  ASSERT_GT(claimed.dump().size(), 110'000u);
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", id}, {"record", claimed}})["ok"]);
  auto row = rows(id).back();
  EXPECT_LT(row.body.size(), 8'192u) << "a bounded row whatever the client sends";
  json stored = json::parse(row.body);
  EXPECT_EQ(stored["lease"]["command"].size(), 37u);  // 37 x (100 + 8) bytes within 4 KiB
  EXPECT_EQ(stored["lease"]["command_omitted"], 3 + 20'000);
  EXPECT_EQ(stored["client"]["sha256"], sha256::hex(claimed.dump()));
  EXPECT_EQ(stored["client"]["outcome"]["exit_code"], 3);
  EXPECT_EQ(stored["client"]["declared"], json({{"memory_high", 4096}}))
      << "a word that is not a policy is not kept";
  EXPECT_EQ(stored["outcome"]["exit_code"], 3);
}

// A client's word alone never makes an ending "killed by tally": the daemon
// saw nothing over the limit it claims to have killed at.
TEST_F(ServiceBoundTest, AClientsKillTheDaemonNeverSawIsKeptAsTheClientsWordOnly) {
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string id = a["result"]["lease"];
  std::string scope = "/tally.slice/tally-" + id + ".scope";
  workloadCgroup(scope, true, 1000);  // no DRM client: 0 B of GPU memory
  ASSERT_TRUE(call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  json ev = {{"kind", "gpu-memory-kill"},
             {"bytes", 2 * GiB},
             {"limit", GiB},
             {"samples", 2},
             {"summary", "killed by tally: GPU memory 2.0 GiB over gpu_memory_max 1.0 GiB"}};
  ASSERT_TRUE(call(1, 1000, "bound", {{"lease", id}, {"event", ev}})["ok"]);
  json claimed = {{"lease", {{"id", id}}},
                  {"outcome", {{"class", "killed-by-tally"}, {"signal", 9}, {"summary", "x"}}}};
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", id}, {"record", claimed}})["ok"]);
  json stored = json::parse(rows(id).back().body);
  // SIGKILL, and the cgroup's memory.events has oom_kill 1: the kernel's
  // OOM killer is the evidence the daemon has.
  EXPECT_EQ(stored["outcome"]["class"], "oom-killed") << stored["outcome"];
  EXPECT_EQ(stored["client"]["outcome"]["class"], "killed-by-tally");
  EXPECT_NE(stored["outcome"]["summary"].get<std::string>().find(
                "; its client reports killing it (killed by tally: GPU memory 2.0 GiB over "
                "gpu_memory_max 1.0 GiB), over a limit the daemon's samples never saw it cross"),
            std::string::npos)
      << stored["outcome"];
  EXPECT_FALSE(killed(scope));
}

coverage::Assessment assessment(coverage::Coverage c, const std::string& kernel) {
  coverage::Assessment a;
  a.kernel = kernel;
  a.verdict.coverage = c;
  a.verdict.line =
      c == coverage::Coverage::HostAndGtt
          ? "A lease's MemoryMax covers: host memory + GTT (verified by active probe on " + kernel +
                ")"
          : "A lease's MemoryMax covers: host memory only";
  return a;
}

TEST_F(ServiceBoundTest, CoverageIsRecordedAndAChangeBetweenStartsIsSaid) {
  service->setCoverage(assessment(coverage::Coverage::HostOnly, "6.12.9"));
  reopen();
  service->setCoverage(assessment(coverage::Coverage::HostOnly, "6.12.9"));
  EXPECT_TRUE(journal.notes.empty());  // nothing changed: nothing said
  reopen();
  service->setCoverage(assessment(coverage::Coverage::HostAndGtt, "7.3.0"));
  auto hostRows = rows("");
  ASSERT_EQ(hostRows.size(), 3u);
  for (const auto& e : hostRows) EXPECT_EQ(e.kind, "coverage");
  json last = json::parse(hostRows.back().body);
  EXPECT_EQ(last["coverage"], "host+gtt");
  EXPECT_EQ(last["changed_from"]["coverage"], "host");
  EXPECT_EQ(last["changed_from"]["kernel"], "6.12.9");
  ASSERT_EQ(journal.notes.size(), 1u);
  EXPECT_NE(journal.notes[0].message.find(
                "GTT coverage changed from host (kernel 6.12.9) to host+gtt (kernel 7.3.0)"),
            std::string::npos)
      << journal.notes[0].message;
  EXPECT_NE(journal.notes[0].message.find("gpu_memory_max is advisory"), std::string::npos);
  // docs/coverage.md quotes this journal message whole.
  for (const auto& d : pageDifferences("docs/coverage.md",
                                       "tests/unit/daemon/service_bound_test.cpp#coverage-changed",
                                       journal.notes[0].message + "\n"))
    ADD_FAILURE() << d;
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

// Where the kernel charges GTT, a run lease's MemoryMax holds both
// declarations (memory_max_effective): that is what the daemon reads back.
TEST_F(ServiceBoundTest, ARunLeasesMemoryMaxIsReadBackAsTheKernelCountsIt) {
  service->setCoverage(assessment(coverage::Coverage::HostAndGtt, "7.3.0"));
  json a = call(1, 1000, "acquire",
                {{"pools", {"gpu"}}, {"memory_max", 64 << 20}, {"gpu_memory_max", 64 << 20}});
  ASSERT_TRUE(a["ok"]) << a;
  EXPECT_EQ(a["result"]["memory_max_effective"], 128 << 20);
  std::string id = a["result"]["lease"];
  std::string scope = "/tally.slice/tally-" + id + ".scope";
  workloadCgroup(scope, true, 1000);
  writeFile(host.cgroupRoot() + scope + "/memory.max", "67108864\n");  // memory_max alone
  json r = call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}});
  EXPECT_EQ(r["error"]["code"], "refused") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find("declared memory_max 134217728"),
            std::string::npos)
      << r;
  writeFile(host.cgroupRoot() + scope + "/memory.max", "134217728\n");
  EXPECT_TRUE(call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
}

TEST_F(ServiceBoundTest, WithGttChargedTheBoundIsAdvisoryAndNoByteCountsTwice) {
  service->setCoverage(assessment(coverage::Coverage::HostAndGtt, "7.3.0"));
  gpuWorkload("/machine.slice/charged.scope", 5005, 15, 4);
  // memory.current 5 GiB of which 4 GiB is the GTT the kernel charged.
  writeFile(host.cgroupRoot() + "/machine.slice/charged.scope/memory.current",
            std::to_string(5 * GiB) + "\n");
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", "/machine.slice/charged.scope"},
                 {"gpu_memory_max", 3 * GiB},
                 {"memory_max", 2 * GiB},
                 {"force", true}});  // memory.current 5 GiB is over memory_max 2 GiB
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["coverage"], "host+gtt");
  EXPECT_EQ(r["result"]["budget_figures"]["host_bytes"], GiB);
  EXPECT_EQ(r["result"]["budget_figures"]["gpu_bytes"], 4 * GiB);
  EXPECT_EQ(r["result"]["budget_figures"]["total_bytes"], 5 * GiB);  // memory.current, not 5 + 4
  EXPECT_EQ(r["result"]["gpu_bound"]["advisory"], true);
  EXPECT_EQ(r["result"]["memory_max_effective"], 5 * GiB);
  std::string id = r["result"]["lease"];
  for (int i = 0; i < 3; ++i) service->sample();
  EXPECT_FALSE(killed("/machine.slice/charged.scope"));
  EXPECT_EQ(json::parse(rows(id).back().body)["kind"], "gpu-memory-max-exceeded");
  // Headroom takes the holder's unused host declaration from its host-only use: 2 - 1 GiB.
  json pools = call(4, 0, "pools", json::object());
  EXPECT_EQ(pools["result"]["pools"][0]["headroom"]["host_bytes"], 100 * GiB - GiB);
}

TEST_F(ServiceBoundTest, OperatorMayKeepGpuMemoryMaxEnforcedAfterTheHandOver) {
  cfg.daemon.keepGpuMemoryMax = true;
  reopen();
  service->setCoverage(assessment(coverage::Coverage::HostAndGtt, "7.3.0"));
  gpuWorkload("/machine.slice/kept.scope", 5006, 16, 4);
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", "/machine.slice/kept.scope"},
                 {"gpu_memory_max", 3 * GiB},
                 {"force", true}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["gpu_bound"]["advisory"], false);
  service->sample();
  service->sample();
  EXPECT_TRUE(killed("/machine.slice/kept.scope"));
}

// Measure before granting: a workload already over a declared limit would be
// killed on arrival (tally's GPU bound after K samples, the kernel under a
// MemoryMax below memory.current). The attach is refused with the figures,
// nothing is written or queued, and --force (or a report-only bound) attaches.
TEST_F(ServiceBoundTest, AnAttachAlreadyOverItsLimitsIsRefusedWithTheFiguresUnlessForced) {
  gpuWorkload("/machine.slice/big.scope", 5007, 17, 4);
  writeFile(host.cgroupRoot() + "/machine.slice/big.scope/memory.current",
            std::to_string(6 * GiB) + "\n");
  json gpu = call(
      1, 0, "attach",
      {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/big.scope"}, {"gpu_memory_max", 3 * GiB}});
  ASSERT_FALSE(gpu["ok"]) << gpu;
  EXPECT_EQ(gpu["error"]["code"], "invalid-params");
  EXPECT_EQ(gpu["error"]["message"],
            "cgroup /machine.slice/big.scope uses GPU memory 4.0 GiB now (DRM fdinfo), over "
            "--gpu-memory-max 3.0 GiB: attaching would kill it on arrival. Declare limits above "
            "what it uses, or pass --force to attach anyway (it is then killed if it stays over)");
  json mem = call(2, 0, "attach",
                  {{"pools", {"gpu"}},
                   {"cgroup", "/machine.slice/big.scope"},
                   {"memory_max", 2 * GiB},
                   {"gpu_memory_max", 8 * GiB}});
  ASSERT_FALSE(mem["ok"]) << mem;
  EXPECT_NE(mem["error"]["message"].get<std::string>().find(
                "memory 6.0 GiB now (memory.current), over --memory-max 2.0 GiB"),
            std::string::npos)
      << mem;
  EXPECT_EQ(service->liveLeases(), 0u);
  EXPECT_TRUE(ledgerDb->events()->empty());  // refused before anything was recorded
  EXPECT_EQ(readFile(host.cgroupRoot() + "/machine.slice/big.scope/memory.max"), "max\n");

  // A report-only bound cannot kill: nothing to refuse.
  json report = call(3, 0, "attach",
                     {{"pools", {"gpu"}},
                      {"cgroup", "/machine.slice/big.scope"},
                      {"gpu_memory_max", 3 * GiB},
                      {"gpu_memory_action", "report"}});
  ASSERT_TRUE(report["ok"]) << report;
  EXPECT_EQ(call(4, 0, "release", {{"lease", report["result"]["lease"]}})["ok"], true);

  // Under its limits: attached.
  json fits = call(5, 0, "attach",
                   {{"pools", {"gpu"}},
                    {"cgroup", "/machine.slice/big.scope"},
                    {"memory_max", 8 * GiB},
                    {"gpu_memory_max", 5 * GiB}});
  ASSERT_TRUE(fits["ok"]) << fits;
  EXPECT_EQ(call(6, 0, "release", {{"lease", fits["result"]["lease"]}})["ok"], true);

  // --force: attached, and killed once it stays over.
  json forced = call(7, 0, "attach",
                     {{"pools", {"gpu"}},
                      {"cgroup", "/machine.slice/big.scope"},
                      {"gpu_memory_max", 3 * GiB},
                      {"force", true}});
  ASSERT_TRUE(forced["ok"]) << forced;
  service->sample();
  service->sample();
  EXPECT_TRUE(killed("/machine.slice/big.scope"));
  EXPECT_EQ(call(8, 0, "attach",
                 {{"pools", {"gpu"}},
                  {"cgroup", "/machine.slice/x"},
                  {"force", "yes"}})["error"]["message"],
            "\"force\" must be true or false");
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// The cadence (enforce/cadence.h) in the daemon: a lease near its bound is
// sampled every near_bound_interval, one far from it every sample_interval;
// stored sample rows keep sample_interval's resolution; the kill names the
// spacing its samples really had.
TEST_F(ServiceBoundTest, ALeaseNearItsBoundIsSampledFasterAndOnlyIt) {
  gpuWorkload("/machine.slice/near.scope", 710, 71, 38);  // 38 of 40 GiB: within 10 %
  gpuWorkload("/machine.slice/far.scope", 711, 72, 4);    // 4 of 40 GiB
  clockStep = 0;                                          // this test moves the clock itself
  struct Restore {
    ~Restore() { ServiceTest::clockStep = 1'000'000; }
  } restore;
  for (auto [cg, name] : {std::pair{"/machine.slice/near.scope", "near"},
                          std::pair{"/machine.slice/far.scope", "far"}}) {
    json r =
        call(2, 0, "attach",
             {{"pools", {"gpu"}}, {"cgroup", cg}, {"gpu_memory_max", 40 * GiB}, {"name", name}});
    ASSERT_TRUE(r["ok"]) << r;
  }
  auto samples = [&](const std::string& name) {
    json l = call(2, 0, "leases", json::object());
    for (const auto& e : l["result"]["leases"])
      if (e["name"] == name) return e["gpu"]["samples"].get<std::uint64_t>();
    return std::uint64_t{0};
  };
  // Both were sampled once at attach. 50 ms later only the near one is due.
  EXPECT_EQ(service->nextSampleDelayUs(), 50'000u);
  clockUs += 50'000;
  service->sample();
  EXPECT_EQ(samples("near"), 2u);
  EXPECT_EQ(samples("far"), 1u) << "a lease far from its bound is sampled at sample_interval";
  // It goes over: two more fast samples, the second kills, 50 ms apart.
  writeFile(host.procRoot() + "/710/fdinfo/3",
            amdgpuFdinfo(71, "0000:c6:00.0", 41 * 1024 * 1024, 0));
  clockUs += 50'000;
  service->sample();
  EXPECT_FALSE(killed("/machine.slice/near.scope"));
  clockUs += 50'000;
  service->sample();
  EXPECT_TRUE(killed("/machine.slice/near.scope")) << "killed 100 ms after it crossed";
  ASSERT_FALSE(journal.notes.empty());
  EXPECT_NE(journal.notes.back().message.find(
                "killed by tally: GPU memory 41.0 GiB over gpu_memory_max 40.0 GiB (drm-fdinfo, 2 "
                "samples at 50ms)"),
            std::string::npos)
      << journal.notes.back().message;
  EXPECT_FALSE(killed("/machine.slice/far.scope"));
  EXPECT_EQ(samples("far"), 1u);
  // A full interval on: the far lease is due again.
  clockUs += 1'000'000;
  service->sample();
  EXPECT_EQ(samples("far"), 2u);
}

// Many leases near their bounds at once cost a bounded amount per round: at
// most 16 are sampled early; the others keep sample_interval, never less.
TEST_F(ServiceBoundTest, EarlySamplesAreCappedPerRoundAndNoLeaseFallsBelowItsInterval) {
  clockStep = 0;
  struct Restore {
    ~Restore() { ServiceTest::clockStep = 1'000'000; }
  } restore;
  cfg.pools = {config::Pool{"gpu", 40, std::nullopt, std::nullopt, {}}};
  reopen();
  for (int i = 0; i < 20; ++i) {
    std::string cg = fmt::format("/machine.slice/near{:02}.scope", i);
    gpuWorkload(cg, 800 + i, static_cast<std::uint64_t>(80 + i), 38);  // 38 of 40 GiB
    json r =
        call(2, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", cg}, {"gpu_memory_max", 40 * GiB}});
    ASSERT_TRUE(r["ok"]) << r;
  }
  auto sampledTwice = [&] {
    int n = 0;
    json leases = call(2, 0, "leases", json::object());
    for (const auto& e : leases["result"]["leases"])
      n += e["gpu"]["samples"].get<std::uint64_t>() >= 2;
    return n;
  };
  clockUs += 50'000;
  service->sample();
  EXPECT_EQ(sampledTwice(), 16);
  // The four left out are due at their normal interval, and are sampled then.
  clockUs += 950'000;
  service->sample();
  EXPECT_EQ(sampledTwice(), 20);
}

// Fast sampling is there to kill sooner: a lease at or over a bound that
// will not kill (report-only here) is sampled at sample_interval, not every
// near_bound_interval for as long as it stays there.
TEST_F(ServiceBoundTest, ALeaseOverABoundThatWillNotKillIsNotSampledFast) {
  gpuWorkload("/machine.slice/report.scope", 720, 73, 41);  // over its 40 GiB from the start
  clockStep = 0;
  struct Restore {
    ~Restore() { ServiceTest::clockStep = 1'000'000; }
  } restore;
  json r = call(2, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", "/machine.slice/report.scope"},
                 {"gpu_memory_max", 40 * GiB},
                 {"gpu_memory_action", "report"},
                 {"name", "report"}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(service->nextSampleDelayUs(), 1'000'000u);
  clockUs += 1'000'000;
  service->sample();
  clockUs += 1'000'000;
  service->sample();  // the report fires at its second sample over
  EXPECT_EQ(service->nextSampleDelayUs(), 1'000'000u);
  EXPECT_FALSE(killed("/machine.slice/report.scope"));
}

// ROCm on the fixture's APU (carve-out 512 MiB < GTT 120 GiB: ROCm's
// VRAM-flagged memory lands in GTT): 30 GiB of hipMalloc shows as 30 GiB of
// fdinfo gtt and as KFD's vram_<gpuid> 30 GiB. Attached under a 40 GiB
// gpu_memory_max it is metered at 30 GiB and never killed; the rule that
// added the two (60 GiB) would have killed it at half its declaration.
TEST_F(ServiceBoundTest, RocmOnAnApuIsMeteredOnceAndNotKilledUnderItsBound) {
  gpuWorkload("/machine.slice/rocm.scope", 5101, 31, 30);
  host.addKfd(5101, 44257, "0000:c6:00.0", 30 * GiB);
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", "/machine.slice/rocm.scope"},
                 {"gpu_memory_max", 40 * GiB},
                 {"name", "rocm"}});
  ASSERT_TRUE(r["ok"]) << r;
  for (int i = 0; i < 4; ++i) service->sample();
  EXPECT_FALSE(killed("/machine.slice/rocm.scope"));
  json seats = call(2, 0, "seats", json::object());
  ASSERT_TRUE(seats["ok"]) << seats;
  EXPECT_EQ(seats["result"]["seats"][0]["gpu"]["current_bytes"], 30 * GiB) << seats;
}

// A pool of every device on a host with a nouveau card: a lease declaring
// gpu_memory_max is refused before it waits or adopts anything, the device
// named; a pool naming only the APU, or a lease without the bound, is not.
TEST_F(ServiceBoundTest, AGpuBoundWhereADriverPrintsNoFiguresIsRefusedAtStart) {
  host.addDevice({"0000:01:00.0", "nouveau", {2, 130}, {}, true});
  cfg.pools.push_back(config::Pool{"apu", 4, std::nullopt, 96 * GiB, {"0000:c6:00.0"}});
  reopen();
  gpuWorkload("/machine.slice/a.scope", 5201, 41, 1);
  json r =
      call(1, 0, "attach",
           {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/a.scope"}, {"gpu_memory_max", GiB}});
  ASSERT_FALSE(r["ok"]) << r;
  EXPECT_EQ(r["error"]["code"], "refused");
  EXPECT_EQ(r["error"]["message"],
            "gpu_memory_max cannot be checked on 0000:01:00.0 (nouveau): the driver prints no "
            "memory figure in fdinfo, so the lease's GPU memory there would be unknown and its "
            "bound would never fire. Run it in a pool whose devices = [...] leave it out, or "
            "declare no gpu_memory_max");
  json apu =
      call(2, 0, "attach",
           {{"pools", {"apu"}}, {"cgroup", "/machine.slice/a.scope"}, {"gpu_memory_max", 2 * GiB}});
  EXPECT_TRUE(apu["ok"]) << apu;
  gpuWorkload("/machine.slice/b.scope", 5202, 42, 1);
  json plain = call(3, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/machine.slice/b.scope"}});
  EXPECT_TRUE(plain["ok"]) << plain;
}

}  // namespace
}  // namespace tally
