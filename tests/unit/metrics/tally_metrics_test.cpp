// tally's metric families: a fresh lease's figures, a stale one's declarations
// only; every dashboard query names a family tally exports; hostile text shown,
// never obeyed.
#include "metrics/tally_metrics.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <regex>
#include <set>

#include "support/fake_host.h"
#include "support/overview_sample.h"
#include "support/process.h"
#include "views/top.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;

TEST(Metrics, AFreshLeaseExportsItsFiguresAStaleOneOnlyWhatIsDeclared) {
  std::string text = metrics::renderOverview(overviewWith(freshSeat()));
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(
      has("tally_lease_info{lease=\"0123456789ab\",name=\"llama\",kind=\"attach\",state="
          "\"running\",pools=\"gpu\","
          "unit=\"llama.service\",cgroup=\"/system.slice/"
          "llama.service\",container=\"\",parent=\"\"} 1"))
      << text;
  EXPECT_TRUE(
      has("tally_lease_declared_info{lease=\"0123456789ab\",key=\"model\",value=\"qwen3 "
          "\\\"32b\\\"\"} 1"));
  EXPECT_TRUE(has("tally_lease_memory_bytes{lease=\"0123456789ab\"} 3221225472"));
  EXPECT_TRUE(has("tally_build_info{version=\"0.9.0\",commit=\"0effe31abcde\"} 1")) << text;
  EXPECT_TRUE(
      has("tally_lease_gpu_memory_peak_bytes{lease=\"0123456789ab\",region=\"gtt\",source=\"drm-"
          "fdinfo\"} 45097156608"));
  EXPECT_TRUE(has("tally_lease_running{lease=\"0123456789ab\"} 1"));
  EXPECT_TRUE(has("tally_lease_observed_timestamp_seconds{lease=\"0123456789ab\"} 1700000100"));
  EXPECT_TRUE(has("tally_pool_queued{pool=\"gpu\"} 0"));
  EXPECT_TRUE(has("tally_pool_headroom_host_bytes{pool=\"gpu\"} 68719476736"));
  EXPECT_TRUE(has("tally_gpu_bound_events_total{kind=\"gpu-memory-kill\"} 2"));
  EXPECT_TRUE(has("tally_lease_outcomes_total{outcome=\"exited\"} 5"));
  EXPECT_TRUE(has("tally_queue_ended_total{reason=\"queue-timeout\"} 3"));
  EXPECT_TRUE(has("tally_containment_possible 1"));
  EXPECT_TRUE(has("tally_queue_ended_total{reason=\"cancelled\"} 0"));
  EXPECT_TRUE(has("tally_sample_interval_seconds 1"));
  EXPECT_TRUE(has("tally_observed_timestamp_seconds 1700000100"));
  EXPECT_TRUE(has("tally_ledger_writes 1"));
  EXPECT_EQ(text.find("tally_lease_memory_max_bytes{"), std::string::npos);   // absent: no sample
  EXPECT_EQ(text.find("tally_pool_headroom_gpu_bytes{"), std::string::npos);  // absent: no sample
  EXPECT_EQ(text.find("tally_gpu_memory_outside_leases_bytes{region=\"vram\"}"), std::string::npos);

  json stale = freshSeat();
  stale["fresh"] = false;
  text = metrics::renderOverview(overviewWith(stale));
  EXPECT_TRUE(has("tally_lease_fresh{lease=\"0123456789ab\"} 0"));
  EXPECT_TRUE(has("tally_lease_declared_gpu_memory_max_bytes{lease=\"0123456789ab\"} 51539607552"));
  for (const char* measured :
       {"tally_lease_memory_bytes{", "tally_lease_gpu_memory_bytes{",
        "tally_lease_gpu_memory_counted_bytes{", "tally_lease_observed_timestamp_seconds{"}) {
    EXPECT_EQ(text.find(measured), std::string::npos) << measured;
  }
  // A ledger that cannot write says 0; a view without the ledger's state has no sample.
  json failing = overviewWith(freshSeat());
  failing["ledger"] = {{"writes", false}, {"failure", "disk I/O error"}};
  text = metrics::renderOverview(failing);
  EXPECT_TRUE(has("tally_ledger_writes 0"));
  failing.erase("ledger");
  text = metrics::renderOverview(failing);
  EXPECT_EQ(text.find("\ntally_ledger_writes "), std::string::npos);
  // Every family is declared even with no lease at all.
  text = metrics::renderOverview(json::object());
  EXPECT_TRUE(has("# TYPE tally_lease_memory_bytes gauge"));
  EXPECT_TRUE(has("# TYPE tally_lease_outcomes_total counter"));
  for (const auto& f : metrics::fromOverview(overviewWith(freshSeat()))) {
    EXPECT_TRUE(metrics::validMetricName(f.name)) << f.name;
    for (const auto& s : f.samples) {
      for (const auto& [k, v] : s.labels) EXPECT_TRUE(metrics::validLabelName(k)) << k;
    }
  }
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// The shipped Grafana dashboard (dist/grafana/tally.json) asks only for what
// tally exports: every tally_* name in every query is a family `tally metrics`
// writes, and promtool parses every query as PromQL.
TEST(GrafanaDashboard, EveryQueryNamesAMetricTallyExportsAndParses) {
  auto dash =
      nlohmann::json::parse(readFile(std::string(TALLY_SOURCE_DIR) + "/dist/grafana/tally.json"));
  std::string text = metrics::renderOverview(overviewWith(freshSeat()));
  std::vector<std::string> queries;
  for (const auto& p : dash["panels"])
    for (const auto& t : p["targets"]) queries.push_back(t["expr"].get<std::string>());
  for (const auto& v : dash["templating"]["list"])
    if (v.value("type", "") == "query") queries.push_back(v["query"].get<std::string>());
  ASSERT_GE(queries.size(), 10u);
  std::set<std::string> used;
  std::regex name("tally_[a-z_]+");
  for (const auto& q : queries)
    for (auto it = std::sregex_iterator(q.begin(), q.end(), name); it != std::sregex_iterator();
         ++it)
      used.insert(it->str());
  for (const auto& n : used)
    EXPECT_NE(text.find("# TYPE " + n + " "), std::string::npos) << n << " is not exported";
  // Lease memory, pools, devices, outside leases, outcomes and bound events are all there.
  for (const char* want : {"tally_lease_memory_bytes", "tally_lease_gpu_memory_counted_bytes",
                           "tally_pool_gpu_memory_budget_bytes", "tally_device_memory_used_bytes",
                           "tally_gpu_memory_outside_leases_bytes", "tally_lease_outcomes_total",
                           "tally_gpu_bound_events_total"})
    EXPECT_TRUE(used.count(want)) << want;
  // PromQL: promtool checks each as a recording rule's expression.
  TempDir dir;
  std::string rules = "groups:\n- name: tally_dashboard\n  rules:\n";
  int i = 0;
  for (auto q : queries) {
    if (q.rfind("label_values(", 0) == 0) continue;  // Grafana's own function, not PromQL
    std::string escaped;
    for (char c : q) escaped += c == '\'' ? std::string("''") : std::string(1, c);
    // Grafana's variables, as Grafana substitutes them.
    for (std::size_t at; (at = escaped.find("$instance")) != std::string::npos;)
      escaped.replace(at, 9, ".*");
    rules += fmt::format("  - record: tally_dashboard_{}\n    expr: '{}'\n", i++, escaped);
  }
  writeFile(dir.path() + "/rules.yml", rules);
  auto check = runProgram({"promtool", "check", "rules", dir.path() + "/rules.yml"});
  EXPECT_EQ(check.exitCode(), 0) << check.out << check.err << rules;
}

// Every dashboard query that names leases evaluates, in promtool, against a
// node scraped twice (job tally and job node, a lease whose name changed state
// between scrapes) and a second node with the same lease id: one sample per
// lease per node, named by its own node's tally_lease_info. `on(lease)` alone
// fails here with many-to-many.
TEST(GrafanaDashboard, LeaseJoinsSurviveADoubleScrapeAndLeaseIdsSharedAcrossNodes) {
  auto dash =
      nlohmann::json::parse(readFile(std::string(TALLY_SOURCE_DIR) + "/dist/grafana/tally.json"));
  std::string tests =
      "evaluation_interval: 1m\ntests:\n- interval: 1m\n  input_series:\n"
      "  - {series: 'tally_lease_info{instance=\"n1\",job=\"tally\",lease=\"aaaa\",name=\"llama\","
      "state=\"running\"}', values: '1x10'}\n"
      "  - {series: 'tally_lease_info{instance=\"n1\",job=\"tally\",lease=\"aaaa\",name=\"llama\","
      "state=\"granted\"}', values: '1x10'}\n"
      "  - {series: 'tally_lease_info{instance=\"n1\",job=\"node\",lease=\"aaaa\",name=\"llama\","
      "state=\"running\"}', values: '1x10'}\n"
      "  - {series: 'tally_lease_info{instance=\"n2\",job=\"tally\",lease=\"aaaa\",name=\"batch\","
      "state=\"running\"}', values: '1x10'}\n";
  std::set<std::string> names;
  std::vector<std::string> joins;
  std::regex leaseFamily("tally_lease_[a-z_]+");
  for (const auto& p : dash["panels"]) {
    for (const auto& t : p["targets"]) {
      std::string q = t["expr"].get<std::string>();
      if (q.find("tally_lease_info") == std::string::npos) continue;
      for (std::size_t at; (at = q.find("$instance")) != std::string::npos;) q.replace(at, 9, ".*");
      joins.push_back(q);
      for (auto it = std::sregex_iterator(q.begin(), q.end(), leaseFamily);
           it != std::sregex_iterator(); ++it)
        if (it->str() != "tally_lease_info") names.insert(it->str());
    }
  }
  ASSERT_GE(joins.size(), 4u);
  for (const auto& n : names)
    for (const char* where : {"instance=\"n1\",job=\"tally\"", "instance=\"n1\",job=\"node\"",
                              "instance=\"n2\",job=\"tally\""})
      tests += fmt::format("  - {{series: '{}{{{},lease=\"aaaa\"}}', values: '5x10'}}\n", n, where);
  tests += "  promql_expr_test:\n";
  for (const auto& q : joins) {
    // A gauge reads 5; the increase of a counter that stayed at 5 is 0.
    int value = q.find("increase(") != std::string::npos ? 0 : 5;
    std::string escaped;
    for (char c : q) escaped += c == '\'' ? std::string("''") : std::string(1, c);
    tests += fmt::format(
        "  - expr: '{}'\n    eval_time: 5m\n    exp_samples:\n"
        "    - {{labels: '{{instance=\"n1\",lease=\"aaaa\",name=\"llama\"}}', value: {}}}\n"
        "    - {{labels: '{{instance=\"n2\",lease=\"aaaa\",name=\"batch\"}}', value: {}}}\n",
        escaped, value, value);
  }
  TempDir dir;
  writeFile(dir.path() + "/joins.test.yml", tests);
  auto run = runProgram({"promtool", "test", "rules", dir.path() + "/joins.test.yml"});
  EXPECT_EQ(run.exitCode(), 0) << run.out << run.err << tests;
}

// The alert rules tally ships (dist/prometheus/tally.rules.yml): promtool
// checks them and runs their tests (tests/fixtures/prometheus: a node scraped
// twice alerts once, each alert fires when it should and not before), every
// alert has a test where it fires, and every tally_* name they read is a
// family tally exports.
TEST(AlertRules, PromtoolChecksThemEachFiresInItsTestAndTheyReadOnlyWhatTallyExports) {
  std::string rulesPath = std::string(TALLY_SOURCE_DIR) + "/dist/prometheus/tally.rules.yml";
  std::string testsPath =
      std::string(TALLY_SOURCE_DIR) + "/tests/fixtures/prometheus/tally.rules.test.yml";
  auto check = runProgram({"promtool", "check", "rules", rulesPath});
  EXPECT_EQ(check.exitCode(), 0) << check.out << check.err;
  auto run = runProgram({"promtool", "test", "rules", testsPath});
  EXPECT_EQ(run.exitCode(), 0) << run.out << run.err;

  std::string rules = readFile(rulesPath), tests = readFile(testsPath);
  std::regex alert("- alert: ([A-Za-z]+)");
  std::set<std::string> alerts;
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), alert);
       it != std::sregex_iterator(); ++it)
    alerts.insert((*it)[1].str());
  for (const char* want : {"TallyLeaseOverGpuBound", "TallyLeaseNearGpuBound",
                           "TallyGpuAllocationsRefused", "TallyDaemonDown", "TallyDaemonStale",
                           "TallyGpuMemoryOutsideLeasesHigh", "TallyLedgerFailing"})
    EXPECT_TRUE(alerts.count(want)) << want;
  for (const auto& a : alerts) {
    std::regex fires("alertname: " + a + "\\n\\s+exp_alerts:\\n\\s+- exp_labels");
    EXPECT_TRUE(std::regex_search(tests, fires)) << a << " has no test where it fires";
  }
  std::string exported = metrics::renderOverview(overviewWith(freshSeat()));
  std::regex name("tally_[a-z_]+");
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), name);
       it != std::sregex_iterator(); ++it)
    EXPECT_NE(exported.find("# TYPE " + it->str() + " "), std::string::npos)
        << it->str() << " is not exported";
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

using namespace tally::testing;

// What a client or the kernel names (a cgroup is any bytes a user mkdir'ed)
// never breaks what others read: ESC, CSI, OSC, C1, bidi overrides and bytes
// that are not UTF-8 are shown, never obeyed, and promtool takes the whole
// exposition; tally top's lines carry none of them.
TEST(HostileText, EveryOutputShowsItAndNothingObeysIt) {
  const std::string esc = "\x1b]0;ALL GPU LEASES HEALTHY\x07\x1b[2J";
  json seat = freshSeat();
  seat["name"] = "llama" + esc;
  seat["workload"]["unit"] =
      "evil\xe2\x80\xae"
      "ecivres.service";
  seat["workload"]["cgroup"] =
      "/user.slice/\xff\xfe\xc2\x9b"
      "31m";
  seat["declared"]["attributes"]["model"] = "q\x1b[31mred";
  std::string text = metrics::renderOverview(overviewWith(seat));
  auto clean = [](const std::string& out) {
    return out.find('\x1b') == std::string::npos && out.find('\x07') == std::string::npos &&
           out.find('\xff') == std::string::npos && out.find("\xc2\x9b") == std::string::npos &&
           out.find("\xe2\x80\xae") == std::string::npos;
  };
  EXPECT_TRUE(clean(text));
  EXPECT_NE(text.find("/user.slice/\\\\xff\\\\xfe\\\\u{009B}31m"), std::string::npos) << text;
  TempDir dir;
  writeFile(dir.path() + "/tally.prom", text);
  auto check =
      runProgram({"sh", "-c", "promtool check metrics < \"$0\"", dir.path() + "/tally.prom"});
  EXPECT_EQ(check.exitCode(), 0) << check.out << check.err;

  views::ViewOptions view;
  view.width = 400;
  for (const auto& line : views::render(overviewWith(seat), view)) {
    EXPECT_TRUE(clean(line)) << line;
  }
  std::string all;
  for (const auto& line : views::render(overviewWith(seat), view)) all += line + "\n";
  EXPECT_NE(all.find(" llama\\u{001… "), std::string::npos) << all;  // NAME is 12 columns
  EXPECT_NE(all.find("evil\\u{202E}ecivres.service  [model=q\\u{001B}[31mred]"), std::string::npos)
      << all;
}

}  // namespace
}  // namespace tally
