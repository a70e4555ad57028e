// The pure parts behind seats, metrics, top and the journal: attributes,
// freshness, the exposition format, the top screen, lifecycle journal
// entries, the loopback listen address and the atomic textfile.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "journal/journal.h"
#include "daemon/metrics_publisher.h"
#include "fs/root.h"
#include "fs/secure_dir.h"
#include "lease/attributes.h"
#include "metrics/exposition.h"
#include "metrics/tally_metrics.h"
#include "seats/seat.h"
#include "support/fake_host.h"
#include "top/view.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST(Attributes, ShapeIsCheckedNotMeaning) {
  auto ok = lease::parseAttribute("context_window=32768");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first, "context_window");
  EXPECT_EQ(ok->second, "32768");
  EXPECT_TRUE(lease::parseAttribute("model="));             // an empty value is a value
  EXPECT_TRUE(lease::parseAttribute("note=a=b"));           // only the first '=' splits
  EXPECT_FALSE(lease::parseAttribute("model"));             // no '='
  EXPECT_FALSE(lease::parseAttribute("=x"));                // no key
  EXPECT_FALSE(lease::parseAttribute("9lives=x"));          // starts with a digit
  EXPECT_FALSE(lease::parseAttribute("Model=x"));           // upper case
  EXPECT_FALSE(lease::parseAttribute("a-b=x"));             // '-' is not a label character
  EXPECT_FALSE(lease::parseAttribute(std::string(33, 'k') + "=x"));
  EXPECT_TRUE(lease::parseAttribute(std::string(32, 'k') + "=x"));
  EXPECT_FALSE(lease::parseAttribute("m=" + std::string(257, 'v')));
  EXPECT_TRUE(lease::parseAttribute("m=" + std::string(256, 'v')));
  EXPECT_FALSE(lease::parseAttribute(std::string("m=a\0b", 5)));  // NUL
  EXPECT_FALSE(lease::parseAttribute("m=a\x1b[2Jb"));              // an escape sequence for a terminal
  EXPECT_TRUE(lease::parseAttribute("m=Qwen3 32B \xc3\xa9"));      // UTF-8 passes
  EXPECT_FALSE(lease::attributesFromJson(json::array()));
  EXPECT_FALSE(lease::attributesFromJson(json{{"model", 7}}));
  EXPECT_TRUE(lease::attributesFromJson(json()));
}

TEST(Seat, FreshIsWithinTwoIntervalsAndNeverInTheFuture) {
  const std::uint64_t t = 1'000'000'000'000ULL;
  EXPECT_TRUE(seats::isFresh(t, t, 500'000));
  EXPECT_TRUE(seats::isFresh(t, t + 1'000'000'000ULL, 500'000));
  EXPECT_FALSE(seats::isFresh(t, t + 1'000'000'001ULL, 500'000));
  EXPECT_FALSE(seats::isFresh(t + 1, t, 500'000));
  EXPECT_FALSE(seats::isFresh(std::nullopt, t, 500'000));
}

TEST(Seat, ARowWithAnUnreadableFigureSaysWhy) {
  seats::SeatFacts f;
  f.lease = "0123456789ab";
  f.state = "running";
  f.cgroup = "/tally.slice/x.scope";
  f.populatedUnknown = "cgroup.events: Permission denied";
  f.observedAtNs = 100;
  f.hostCurrent = seats::Figure::of(std::nullopt, "memory.current: No such file or directory");
  f.hostPeak = {GiB, {}};
  f.gpuCurrent = seats::Figure::of(std::nullopt, "a client printed no resident figure");
  json r = seats::seatRow(f, 100, 1'000'000);
  EXPECT_TRUE(r["running"].is_null());
  EXPECT_EQ(r["running_unknown"], "cgroup.events: Permission denied");
  EXPECT_TRUE(r["host"]["current_bytes"].is_null());
  EXPECT_EQ(r["host"]["current_bytes_unknown"], "memory.current: No such file or directory");
  EXPECT_EQ(r["host"]["peak_bytes"], GiB);
  EXPECT_FALSE(r["host"].contains("peak_bytes_unknown"));
  EXPECT_TRUE(r["gpu"]["current_bytes"].is_null());
  EXPECT_EQ(r["gpu"]["current_bytes_unknown"], "a client printed no resident figure");
  EXPECT_EQ(r["gpu"]["limit_unknown"], "no gpu_memory_max declared");
}

TEST(Exposition, NamesEscapesAndValues) {
  EXPECT_TRUE(metrics::validMetricName("tally_lease_memory_bytes"));
  EXPECT_TRUE(metrics::validMetricName("a:b"));
  EXPECT_FALSE(metrics::validMetricName("9x"));
  EXPECT_FALSE(metrics::validMetricName("a-b"));
  EXPECT_FALSE(metrics::validLabelName("a:b"));
  EXPECT_FALSE(metrics::validLabelName("__reserved"));
  EXPECT_EQ(metrics::escapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  std::vector<metrics::Family> f = {
      {"x_bytes", "help with \\ and\nnewline", metrics::Type::Gauge, {{{{"l", "v\"q"}}, std::uint64_t{18446744073709551615ULL}}}},
      {"y_total", "count", metrics::Type::Counter, {{{}, std::uint64_t{0}}}},
      {"z_seconds", "time", metrics::Type::Gauge, {{{}, 1.5}}},
      {"empty_bytes", "declared, no sample", metrics::Type::Gauge, {}}};
  EXPECT_EQ(metrics::render(f),
            "# HELP x_bytes help with \\\\ and\\nnewline\n# TYPE x_bytes gauge\nx_bytes{l=\"v\\\"q\"} 18446744073709551615\n"
            "# HELP y_total count\n# TYPE y_total counter\ny_total 0\n"
            "# HELP z_seconds time\n# TYPE z_seconds gauge\nz_seconds 1.5\n"
            "# HELP empty_bytes declared, no sample\n# TYPE empty_bytes gauge\n");
}

json overviewWith(json seat) {
  return {{"seats", json::array({seat})},
          {"pools", json::array({{{"pool", "gpu"}, {"capacity", 4}, {"holders", {"a"}}, {"queue", json::array()}, {"memory_budget", nullptr},
                                  {"memory_declared", 0}, {"gpu_memory_budget", 96 * GiB}, {"gpu_memory_declared", 8 * GiB},
                                  {"devices", json::array()}, {"headroom", {{"host_bytes", 64 * GiB}, {"gpu_bytes", nullptr}}}}})},
          {"devices", json::array({{{"device", "0000:c6:00.0"}, {"driver", "amdgpu"},
                                    {"regions", {{"gtt", {{"used_bytes", 20 * GiB}, {"total_bytes", 120 * GiB}}}}}}})},
          {"outside_leases", {{"gtt", {{"bytes", 16 * GiB}}}, {"vram", {{"bytes", nullptr}, {"unknown", "no device exports mem_info_vram_used"}}}}},
          {"host", {{"mem_available_bytes", 90 * GiB}}},
          {"coverage", {{"state", "host"}, {"kernel", "6.12.0"}}},
          {"enforcement", {{"gpu_bound_events", {{"gpu-memory-kill", 2}}}, {"outcomes", {{"exited", 5}}}}},
          {"daemon", {{"started_at_ns", 1'700'000'000'000'000'000ULL}, {"leases_live", 1}, {"queued", 0}}},
          {"observed_at_ns", 1'700'000'100'000'000'000ULL},
          {"sample_interval_us", 1'000'000}};
}

json freshSeat() {
  return {{"lease", "0123456789ab"}, {"name", "llama"}, {"kind", "attach"}, {"state", "running"}, {"pools", {"gpu"}},
          {"workload", {{"unit", "llama.service"}, {"cgroup", "/system.slice/llama.service"}}}, {"running", true}, {"fresh", true},
          {"observed_at_ns", 1'700'000'100'000'000'000ULL},
          {"declared", {{"memory_max", nullptr}, {"gpu_memory_max", 48 * GiB}, {"gpu_memory_high", nullptr},
                        {"attributes", {{"model", "qwen3 \"32b\""}}}}},
          {"host", {{"current_bytes", 3 * GiB}, {"peak_bytes", 4 * GiB}, {"max_bytes", nullptr}}},
          {"gpu", {{"regions", {{"gtt", {{"current_bytes", 41 * GiB}, {"peak_bytes", 42 * GiB}}}}}, {"current_bytes", 41 * GiB},
                   {"peak_bytes", 42 * GiB}, {"limit_bytes", 48 * GiB}, {"source", "drm-fdinfo"}}}};
}

TEST(Metrics, AFreshLeaseExportsItsFiguresAStaleOneOnlyWhatIsDeclared) {
  std::string text = metrics::renderOverview(overviewWith(freshSeat()));
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("tally_lease_info{lease=\"0123456789ab\",name=\"llama\",kind=\"attach\",state=\"running\",pools=\"gpu\","
                  "unit=\"llama.service\",cgroup=\"/system.slice/llama.service\",container=\"\"} 1")) << text;
  EXPECT_TRUE(has("tally_lease_declared_info{lease=\"0123456789ab\",key=\"model\",value=\"qwen3 \\\"32b\\\"\"} 1"));
  EXPECT_TRUE(has("tally_lease_memory_bytes{lease=\"0123456789ab\"} 3221225472"));
  EXPECT_TRUE(has("tally_lease_gpu_memory_peak_bytes{lease=\"0123456789ab\",region=\"gtt\",source=\"drm-fdinfo\"} 45097156608"));
  EXPECT_TRUE(has("tally_lease_running{lease=\"0123456789ab\"} 1"));
  EXPECT_TRUE(has("tally_lease_observed_timestamp_seconds{lease=\"0123456789ab\"} 1700000100"));
  EXPECT_TRUE(has("tally_pool_queued{pool=\"gpu\"} 0"));
  EXPECT_TRUE(has("tally_pool_headroom_host_bytes{pool=\"gpu\"} 68719476736"));
  EXPECT_TRUE(has("tally_gpu_bound_events_total{kind=\"gpu-memory-kill\"} 2"));
  EXPECT_TRUE(has("tally_lease_outcomes_total{outcome=\"exited\"} 5"));
  EXPECT_TRUE(has("tally_sample_interval_seconds 1"));
  EXPECT_EQ(text.find("tally_lease_memory_max_bytes{"), std::string::npos);          // absent: no sample
  EXPECT_EQ(text.find("tally_pool_headroom_gpu_bytes{"), std::string::npos);         // absent: no sample
  EXPECT_EQ(text.find("tally_gpu_memory_outside_leases_bytes{region=\"vram\"}"), std::string::npos);

  json stale = freshSeat();
  stale["fresh"] = false;
  text = metrics::renderOverview(overviewWith(stale));
  EXPECT_TRUE(has("tally_lease_fresh{lease=\"0123456789ab\"} 0"));
  EXPECT_TRUE(has("tally_lease_declared_gpu_memory_max_bytes{lease=\"0123456789ab\"} 51539607552"));
  for (const char* measured : {"tally_lease_memory_bytes{", "tally_lease_gpu_memory_bytes{", "tally_lease_gpu_memory_counted_bytes{",
                               "tally_lease_observed_timestamp_seconds{"}) {
    EXPECT_EQ(text.find(measured), std::string::npos) << measured;
  }
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

TEST(TopView, TheScreenFitsTheTerminalAndSaysWhatItLeftOut) {
  json o = overviewWith(freshSeat());
  top::ViewOptions v;
  v.width = 80;
  for (const auto& l : top::render(o, v)) EXPECT_EQ(l.size(), 80u) << l;
  v.width = 170;
  auto lines = top::render(o, v);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("coverage: MemoryMax covers host"), std::string::npos) << all;
  EXPECT_NE(all.find("llama"), std::string::npos);
  EXPECT_NE(all.find("41.0 GiB/48.0 GiB  85%"), std::string::npos) << all;
  EXPECT_NE(all.find("0000:c6:00.0"), std::string::npos);
  EXPECT_NE(all.find("gtt 16.0 GiB"), std::string::npos);
  EXPECT_NE(all.find("vram - (no device exports mem_info_vram_used)"), std::string::npos);
  // Twenty leases on a 20-line terminal: the lease table is cut, and says so.
  json many = json::array();
  for (int i = 0; i < 20; ++i) {
    json s = freshSeat();
    s["lease"] = fmt::format("{:012x}", i);
    many.push_back(s);
  }
  o["seats"] = many;
  v.height = 20;
  lines = top::render(o, v);
  EXPECT_EQ(lines.size(), 20u);
  all.clear();
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("more lease(s)"), std::string::npos) << all;
  EXPECT_NE(all.find("POOL"), std::string::npos);  // pools and devices stay on screen
  // A stale lease shows no figures.
  json stale = freshSeat();
  stale["fresh"] = false;
  auto rows = top::seatTable(json::array({stale}), 200);
  EXPECT_NE(rows[1].find("stale"), std::string::npos);
  EXPECT_EQ(rows[1].find("41.0 GiB"), std::string::npos) << rows[1];
  // A UTF-8 character is never split by the cut.
  EXPECT_EQ(top::fit("ab\xc3\xa9z", 3), "ab\xc3\xa9");
  EXPECT_EQ(top::fit("ab", 4), "ab  ");
  // A broken overview (an older daemon, garbage) draws, with '-' and '?'.
  EXPECT_FALSE(top::render(json::array(), v).empty());
  EXPECT_FALSE(top::render(json{{"seats", 7}, {"pools", "x"}, {"devices", json::array({1, 2})}}, v).empty());
}

TEST(LifecycleJournal, AnOutcomeCarriesItsFiguresAndLeavesOutWhatItLacks) {
  json record = {{"lease", {{"id", "0123456789ab"}, {"unit", "tally-0123456789ab.scope"}, {"cgroup", "/tally.slice/x.scope"}}},
                 {"outcome", {{"class", "oom-killed"}, {"exit_code", 137}, {"oom_kill", 1}, {"summary", "the kernel OOM-killed it"}}},
                 {"memory", {{"peak_bytes", 4 * GiB}}},
                 {"gpu", {{"samples", 3}}}};
  auto e = journal::lifecycleEntry("outcome", "0123456789ab", "train", {"gpu", "big"}, record);
  EXPECT_EQ(e.priority, 4);
  EXPECT_EQ(e.message, "lease 0123456789ab (train): oom-killed: the kernel OOM-killed it");
  std::map<std::string, std::string> f(e.fields.begin(), e.fields.end());
  EXPECT_EQ(f["TALLY_EVENT"], "lease-outcome");
  EXPECT_EQ(f["TALLY_POOL"], "gpu,big");
  EXPECT_EQ(f["TALLY_OUTCOME"], "oom-killed");
  EXPECT_EQ(f["TALLY_EXIT_CODE"], "137");
  EXPECT_EQ(f["TALLY_OOM_KILLS"], "1");
  EXPECT_EQ(f["TALLY_MEMORY_PEAK_BYTES"], "4294967296");
  EXPECT_EQ(f["TALLY_UNIT"], "tally-0123456789ab.scope");
  EXPECT_EQ(f.count("TALLY_GPU_PEAK_BYTES"), 0u);  // the record has no GPU peak: no field, not 0
  EXPECT_EQ(f.count("TALLY_MEMORY_PEAK_SAMPLED_BYTES"), 0u);  // the kernel's peak was read

  // The cgroup was gone before memory.peak could be read: the samples' peak, under its own name.
  json gone = record;
  gone["memory"] = {{"peak_unknown", "memory.peak: No such file or directory"}, {"sampled", {{"peak_current_bytes", 3 * GiB}}}};
  auto goneEntry = journal::lifecycleEntry("outcome", "0123456789ab", "train", {}, gone);
  std::map<std::string, std::string> gf(goneEntry.fields.begin(), goneEntry.fields.end());
  EXPECT_EQ(gf.count("TALLY_MEMORY_PEAK_BYTES"), 0u);
  EXPECT_EQ(gf["TALLY_MEMORY_PEAK_SAMPLED_BYTES"], "3221225472");

  record["outcome"] = {{"class", "exited"}, {"exit_code", 0}};
  EXPECT_EQ(journal::lifecycleEntry("outcome", "0123456789ab", "train", {}, record).priority, 6);
  record["outcome"]["exit_code"] = 3;
  EXPECT_EQ(journal::lifecycleEntry("outcome", "0123456789ab", "train", {}, record).priority, 5);
  auto granted = journal::lifecycleEntry("granted", "0123456789ab", "train", {}, json::object());
  std::map<std::string, std::string> g(granted.fields.begin(), granted.fields.end());
  EXPECT_EQ(g.count("TALLY_POOL"), 0u);  // a standalone lease has no pool
  EXPECT_EQ(g.count("TALLY_OUTCOME"), 0u);
  auto lost = journal::lifecycleEntry("lost", "0123456789ab", "train", {"gpu"}, json{{"outcome", "not an object"}});
  std::map<std::string, std::string> l(lost.fields.begin(), lost.fields.end());
  EXPECT_EQ(l["TALLY_OUTCOME"], "lost");
  EXPECT_EQ(journal::lifecycleEntry("outcome", "x", "y", {}, json("garbage")).message, "lease x (y): unknown");
}

TEST(MetricsListen, LoopbackOnly) {
  auto v4 = daemon::parseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  auto v6 = daemon::parseListenAddress("[::1]:9464");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(daemon::parseListenAddress("localhost:0")->host, "127.0.0.1");
  EXPECT_TRUE(daemon::parseListenAddress("127.1.2.3:1"));
  auto open = daemon::parseListenAddress("0.0.0.0:9464");
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("loopback only"), std::string::npos) << open.error().message;
  EXPECT_FALSE(daemon::parseListenAddress("192.168.1.5:9464"));
  EXPECT_FALSE(daemon::parseListenAddress("[::]:9464"));
  EXPECT_FALSE(daemon::parseListenAddress("127.0.0.1"));
  EXPECT_FALSE(daemon::parseListenAddress("127.0.0.1:65536"));
  EXPECT_FALSE(daemon::parseListenAddress("127.0.0.1:99999999999999999999"));
  EXPECT_FALSE(daemon::parseListenAddress("127.0.0.1:-1"));
  EXPECT_FALSE(daemon::parseListenAddress("example.com:80"));
  EXPECT_FALSE(daemon::parseListenAddress("[::1:80"));
}

TEST(MetricsTextfile, ReplacedWholeAndErrorsNameTheFile) {
  TempDir dir;
  std::string path = dir.path() + "/tally.prom";
  auto t = daemon::Textfile::open(path);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(t->write("a 1\n"));
  ASSERT_TRUE(t->write("b 2\n"));
  EXPECT_EQ(readFile(path), "b 2\n");
  struct stat st{};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  auto names = fs::Root::open(dir.path())->list("");
  EXPECT_EQ(*names, std::vector<std::string>{"tally.prom"});  // no temporary left behind
  auto bad = daemon::Textfile::open(dir.path() + "/missing/tally.prom");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("missing"), std::string::npos) << bad.error().message;
}

// Why 5: a user who can write the textfile's directory plants the names the
// daemon writes as symlinks to a victim file. The victim is never written.
TEST(MetricsTextfile, NeverWritesThroughAPlantedSymlink) {
  TempDir dir;
  std::string victim = dir.path() + "/victim";
  writeFile(victim, "precious\n");
  std::string textDir = dir.path() + "/textfile";
  ASSERT_EQ(::mkdir(textDir.c_str(), 01777), 0);  // sticky and world-writable, like a shared collector dir
  ASSERT_EQ(::chmod(textDir.c_str(), 01777), 0);
  std::string path = textDir + "/tally.prom";
  for (const char* planted : {"/tally.prom.tmp", "/.tally.prom.tmp"}) ASSERT_EQ(::symlink(victim.c_str(), (textDir + planted).c_str()), 0);
  auto t = daemon::Textfile::open(path);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(t->write("tally_up 1\n"));
  EXPECT_EQ(readFile(victim), "precious\n");
  EXPECT_EQ(readFile(path), "tally_up 1\n");
  // The final name planted as a symlink is replaced (rename swaps the name), not followed.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);
  ASSERT_TRUE(t->write("tally_up 2\n"));
  EXPECT_EQ(readFile(victim), "precious\n");
  struct stat st{};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(MetricsTextfile, ADirectoryOthersCanRewriteIsRefused) {
  TempDir dir;
  std::string open = dir.path() + "/open";
  ASSERT_EQ(::mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);  // writable by all, no sticky bit
  auto t = daemon::Textfile::open(open + "/tally.prom");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("writable by everyone"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("sticky"), std::string::npos) << t.error().message;
  std::string theirs = dir.path() + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 4242, 4242), 0);
  auto u = daemon::Textfile::open(theirs + "/tally.prom");
  ASSERT_FALSE(u);
  EXPECT_NE(u.error().message.find("owned by uid 4242"), std::string::npos) << u.error().message;
}

TEST(TrustedDir, StateDirsAreRootsOrTheDaemonsAlone) {
  TempDir dir;
  std::string sticky = dir.path() + "/sticky";
  ASSERT_EQ(::mkdir(sticky.c_str(), 01777), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  EXPECT_TRUE(fs::checkTrustedDir(sticky, "socket dir", fs::DirUse::SharedSticky));
  // The ledger's directory must not be writable by others even when sticky.
  auto state = fs::checkTrustedDir(sticky, "[daemon] state_dir", fs::DirUse::Private);
  ASSERT_FALSE(state);
  EXPECT_NE(state.error().message.find("[daemon] state_dir"), std::string::npos);
  // Below a sticky /tmp-like directory, a private one is fine.
  std::string inside = sticky + "/state";
  ASSERT_EQ(::mkdir(inside.c_str(), 0700), 0);
  EXPECT_TRUE(fs::checkTrustedDir(inside, "[daemon] state_dir", fs::DirUse::Private));
  // An ancestor owned by another user could swap the whole path.
  std::string theirs = dir.path() + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((theirs + "/state").c_str(), 0700), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 4242, 4242), 0);
  auto anc = fs::checkTrustedDir(theirs + "/state", "[daemon] state_dir", fs::DirUse::Private);
  ASSERT_FALSE(anc);
  EXPECT_NE(anc.error().message.find("owned by uid 4242"), std::string::npos) << anc.error().message;
}

}  // namespace
}  // namespace tally
