// Seats, metrics and tally top against the real daemon binary over a
// synthetic host: the Prometheus text checked by promtool (the CLI's, the
// textfile's and GET /metrics'), and tally top driven in tmux (send-keys,
// resize-window, capture-pane) and through a pipe.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <sstream>

#include "support/daemon.h"
#include "support/fake_host.h"
#include "support/process.h"
#include "support/raw_client.h"
#include "support/transcript.h"
#include "util/text.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

class ObservabilityLive : public ::testing::Test {
 protected:
  void SetUp() override {
    host.setMemAvailable(64 * GiB);
    FakeDevice apu;
    apu.memInfo = {{"gtt_total", 96 * GiB},
                   {"gtt_used", 40 * GiB},
                   {"vram_total", 512ULL << 20},
                   {"vram_used", 300ULL << 20}};
    host.addDevice(apu);
    makeDirs(host.cgroupRoot());
    textfile = dir.path() + "/tally.prom";
    daemon = std::make_unique<DaemonUnderTest>(
        dir.path(),
        fmt::format("sample_interval = \"100ms\"\nmetrics_textfile = \"{}\"\nmetrics_listen = "
                    "\"127.0.0.1:0\"\n"
                    "[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"96GiB\"\n",
                    textfile),
        std::vector<std::string>{"--proc-root", host.procRoot(), "--sys-root", host.sysRoot(),
                                 "--cgroup-root", host.cgroupRoot()});
    ASSERT_TRUE(daemon->start());
    // A llama.cpp server: one process, one DRM client holding 36 GiB of GTT.
    const std::string cg = "/system.slice/llama-server.service";
    std::string d = host.cgroupRoot() + cg;
    writeFile(d + "/cgroup.events", "populated 1\nfrozen 0\n");
    writeFile(d + "/memory.current", "3221225472\n");
    writeFile(d + "/memory.peak", "4294967296\n");
    writeFile(d + "/memory.events", "oom 0\noom_kill 0\n");
    writeFile(d + "/memory.max", "8589934592\n");
    FakeProcess p;
    p.pid = 4242;
    p.comm = "llama-server";
    p.cgroup = cg;
    FakeFd fd;
    fd.drmMinor = 128;
    fd.fdinfo = amdgpuFdinfo(7, "0000:c6:00.0", 36ULL * 1024 * 1024, 0);
    p.fds = {fd};
    host.addProcess(p);
    host.addCgroup(cg, {4242});
    auto a =
        tally({"attach", "--cgroup", cg, "--pool", "gpu", "--gpu-memory-max", "48GiB", "--name",
               "llama", "--attr", "model=qwen3-32b", "--attr", "context_window=32768"});
    ASSERT_EQ(a.exitCode(), 0) << a.err << "\ndaemon:\n" << daemon->log();
    lease = std::string(text::trim(a.out));
    // The barrier: the lease has been sampled and the textfile shows it.
    ASSERT_TRUE(eventually([&] {
      auto shown = tally({"lease", "show", lease, "--json"});
      json j = json::parse(shown.out, nullptr, false);
      return j.is_object() && j.contains("gpu") && j["gpu"].value("samples", 0) >= 2 &&
             readFile(textfile).find("lease=\"" + lease + "\"") != std::string::npos;
    })) << daemon->log();
  }
  ProgramResult tally(std::vector<std::string> args) {
    args.insert(args.begin(), TALLY_BINARY);
    return runProgram(args, {"TALLY_SOCKET=" + daemon->socket()});
  }
  // promtool's verdict on a metrics text: "" when it accepts it.
  std::string promtool(const std::string& text) {
    std::string file = dir.path() + "/check.prom";
    writeFile(file, text);
    auto r = runProgram({"/bin/sh", "-c", "promtool check metrics < \"$0\"", file});
    return r.exitCode() == 0 ? ""
                             : fmt::format("promtool exit {}: {}{}", r.exitCode(), r.out, r.err);
  }
  int httpPort() {
    std::smatch m;
    std::string log = daemon->log();
    static const std::regex re("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics");
    return std::regex_search(log, m, re) ? std::stoi(m[1]) : -1;
  }

  FakeHost host;
  TempDir dir;
  std::string textfile, lease;
  std::unique_ptr<DaemonUnderTest> daemon;
};

TEST_F(ObservabilityLive, SeatRowsShowTheLaneAsMeasuredAndDeclared) {
  auto r = tally({"seats", "--json"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  json s = json::parse(r.out);
  ASSERT_EQ(s["seats"].size(), 1u);
  json row = s["seats"][0];
  EXPECT_EQ(row["lease"], lease);
  EXPECT_EQ(row["running"], true);
  EXPECT_EQ(row["fresh"], true);
  EXPECT_EQ(row["sample_interval_us"], 100'000);
  EXPECT_EQ(row["host"]["current_bytes"], 3 * GiB);
  EXPECT_EQ(row["host"]["peak_bytes"], 4 * GiB);
  EXPECT_EQ(row["host"]["max_bytes"], 8 * GiB);
  EXPECT_EQ(row["gpu"]["regions"]["gtt"]["current_bytes"], 36 * GiB);
  EXPECT_EQ(row["gpu"]["limit_bytes"], 48 * GiB);
  EXPECT_EQ(row["devices"], json({"0000:c6:00.0"}));
  EXPECT_EQ(row["declared"]["attributes"],
            json({{"context_window", "32768"}, {"model", "qwen3-32b"}}));
  auto table = tally({"seats"});
  ASSERT_EQ(table.exitCode(), 0) << table.err;
  EXPECT_NE(table.out.find("llama"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("36.0G/48.0G  75%"), std::string::npos) << table.out;
  EXPECT_NE(
      table.out.find("/system.slice/llama-server.service  [context_window=32768 model=qwen3-32b]"),
      std::string::npos)
      << table.out;
  // The lifecycle goes to journald where it listens, to the daemon's stderr
  // where it does not. The host has no journald; scripts/test.sh runs this
  // suite again in the VM, where TALLY_TEST_JOURNALD=required makes sure the
  // journald branch is the one taken.
  if (const char* want = std::getenv("TALLY_TEST_JOURNALD");
      want && std::string(want) == "required") {
    ASSERT_EQ(::access("/run/systemd/journal/socket", W_OK), 0)
        << "TALLY_TEST_JOURNALD=required, yet journald does not listen";
  }
  const std::string granted = fmt::format("tally daemon: lease {} (llama): granted in gpu", lease);
  const std::string adopted = fmt::format(
      "tally daemon: lease {} (llama): adopted in /system.slice/llama-server.service", lease);
  if (::access("/run/systemd/journal/socket", W_OK) != 0) {
    EXPECT_NE(daemon->log().find(granted), std::string::npos) << daemon->log();
    EXPECT_NE(daemon->log().find(adopted), std::string::npos) << daemon->log();
  } else {
    std::string journal;
    EXPECT_TRUE(eventually([&] {
      journal = runProgram({"journalctl", "--no-pager", "-o", "cat", "-t", "tally",
                            "TALLY_LEASE=" + lease})
                    .out;
      return journal.find(adopted) != std::string::npos;
    })) << journal;
    EXPECT_NE(journal.find(granted), std::string::npos) << journal;
    EXPECT_EQ(daemon->log().find(granted), std::string::npos)
        << "journald listens, yet the lifecycle went to stderr";
    // An operator's journal carries no build paths (no CODE_FILE of the source tree).
    std::string fields = runProgram({"journalctl", "--no-pager", "-o", "export", "-t", "tally",
                                     "TALLY_LEASE=" + lease})
                             .out;
    EXPECT_EQ(fields.find("CODE_FILE="), std::string::npos) << fields;
    EXPECT_EQ(fields.find("CODE_FUNC="), std::string::npos) << fields;
  }
  // A bad --attr is a usage error before anything reaches the daemon.
  auto bad = tally({"attach", "--cgroup", "/x", "--pool", "gpu", "--attr", "Model=x"});
  EXPECT_EQ(bad.exitCode(), 2);
  EXPECT_NE(bad.err.find("--attr: attribute key 'Model'"), std::string::npos) << bad.err;
}

TEST_F(ObservabilityLive, PromtoolAcceptsTheCliTheTextfileAndHttpAndTheyAgree) {
  auto m = tally({"metrics"});
  ASSERT_EQ(m.exitCode(), 0) << m.err;
  EXPECT_EQ(promtool(m.out), "");
  std::string gtt = fmt::format(
      "tally_lease_gpu_memory_bytes{{lease=\"{}\",region=\"gtt\",source=\"drm-fdinfo\"}} {}\n",
      lease, 36 * GiB);
  EXPECT_NE(m.out.find(gtt), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("tally_gpu_memory_outside_leases_bytes{region=\"gtt\"} 4294967296\n"),
            std::string::npos);  // 40 - 36 GiB

  std::string file = readFile(textfile);
  EXPECT_EQ(promtool(file), "");
  EXPECT_NE(file.find(gtt), std::string::npos) << file;

  int port = httpPort();
  ASSERT_GT(port, 0) << daemon->log();
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(promtool(res->body), "");
  EXPECT_NE(res->body.find(gtt), std::string::npos);
  EXPECT_EQ(http.Get("/nothing")->status, 404);

  // The lane ends: its series disappear from all three, its outcome is counted.
  writeFile(host.cgroupRoot() + "/system.slice/llama-server.service/cgroup.events",
            "populated 0\nfrozen 0\n");
  std::string after;
  const std::string ended = "tally_lease_outcomes_total{outcome=\"ended\"} 1\n";
  ASSERT_TRUE(eventually([&] {
    after = tally({"metrics"}).out;
    // The textfile and the HTTP snapshot follow at the next sample round.
    return after.find(ended) != std::string::npos &&
           readFile(textfile).find(ended) != std::string::npos;
  })) << after;
  EXPECT_EQ(after.find("lease=\"" + lease + "\""), std::string::npos) << after;
  EXPECT_NE(after.find("tally_lease_outcomes_total{outcome=\"ended\"} 1\n"), std::string::npos)
      << after;
  EXPECT_EQ(readFile(textfile).find("lease=\"" + lease + "\""), std::string::npos);
  EXPECT_NE(http.Get("/metrics")->body.find("tally_lease_outcomes_total{outcome=\"ended\"} 1\n"),
            std::string::npos);
}

// Beyond loopback only when the config says so in so many words; then the
// daemon serves there and its log says what that exposes.
TEST_F(ObservabilityLive, MetricsListenRefusesANonLoopbackAddressUnlessTheConfigSaysSo) {
  TempDir other;
  DaemonUnderTest open(other.path(),
                       "metrics_listen = \"0.0.0.0:9464\"\n[pools.gpu]\ncapacity = 1\n",
                       {"--proc-root", host.procRoot(), "--sys-root", host.sysRoot(),
                        "--cgroup-root", host.cgroupRoot()});
  auto r = runProgram({TALLY_BINARY, "--proc-root", host.procRoot(), "--sys-root", host.sysRoot(),
                       "--cgroup-root", host.cgroupRoot(), "daemon", "--config", open.config()});
  // Refused when the config is read, like every other config problem (exit 1), naming the key.
  EXPECT_EQ(r.exitCode(), 1);
  EXPECT_NE(r.err.find("daemon.metrics_listen '0.0.0.0:9464': tally serves metrics on loopback "
                       "unless daemon.metrics_beyond_loopback = true"),
            std::string::npos)
      << r.err;
  auto check = runProgram({TALLY_BINARY, "config", "check", open.config()});
  EXPECT_EQ(check.exitCode(), 1);
  EXPECT_NE(check.err.find("daemon.metrics_listen '0.0.0.0:9464'"), std::string::npos) << check.err;
  // From the flag, the flag is named (a usage error, exit 2).
  TempDir third;
  DaemonUnderTest plain(third.path(), "[pools.gpu]\ncapacity = 1\n", {});
  auto flag = runProgram({TALLY_BINARY, "--proc-root", host.procRoot(), "--sys-root",
                          host.sysRoot(), "--cgroup-root", host.cgroupRoot(), "daemon", "--config",
                          plain.config(), "--metrics-listen", "192.168.1.5:9464"});
  EXPECT_EQ(flag.exitCode(), 2);
  EXPECT_NE(flag.err.find("--metrics-listen '192.168.1.5:9464': tally serves metrics on loopback"),
            std::string::npos)
      << flag.err;
  // Said in the config: served on every address (an ephemeral port here), and said so.
  TempDir fourth;
  DaemonUnderTest fleet(fourth.path(),
                        "metrics_listen = \"0.0.0.0:0\"\nmetrics_beyond_loopback = true\n"
                        "[pools.gpu]\ncapacity = 1\n",
                        {"--proc-root", host.procRoot(), "--sys-root", host.sysRoot(),
                         "--cgroup-root", host.cgroupRoot()});
  ASSERT_TRUE(fleet.start()) << fleet.log();
  EXPECT_TRUE(eventually([&] {
    return fleet.log().find("metrics on http://0.0.0.0:") != std::string::npos &&
           fleet.log().find(
               "(beyond loopback, as daemon.metrics_beyond_loopback allows: anyone "
               "who reaches this port reads every lease's name") != std::string::npos;
  })) << fleet.log();
}

TEST_F(ObservabilityLive, TopIsAPlainListingThroughAPipe) {
  auto r = tally({"top"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  for (const char* want :
       {"tally top", "llama", "POOL", "gpu", "0000:c6:00.0", "GPU memory outside leases"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  EXPECT_EQ(r.out.find("\x1b"), std::string::npos);  // no escape sequence in a pipe
  auto none = runProgram({TALLY_BINARY, "top", "--socket", dir.path() + "/nowhere.sock"});
  EXPECT_EQ(none.exitCode(), 3);
  EXPECT_NE(none.err.find("is the daemon running?"), std::string::npos) << none.err;
  EXPECT_EQ(tally({"top", "--interval", "1ms"}).exitCode(), 2);
}

// tally top on a real terminal: tmux gives it one (a pty, TERM, SIGWINCH).
class Tmux {
 public:
  explicit Tmux(std::string socket) : socket_(std::move(socket)) {}
  ~Tmux() { run({"kill-server"}); }
  ProgramResult run(std::vector<std::string> args) {
    args.insert(args.begin(), {"tmux", "-S", socket_});
    return runProgram(args);
  }
  std::string capture() { return run({"capture-pane", "-p", "-t", "top"}).out; }
  // Waits for the pane to show `text` (a bound on the event, not a speed: 30 s).
  bool waitFor(const std::string& text) {
    for (int i = 0; i < 600; ++i) {
      if (capture().find(text) != std::string::npos) return true;
      ::usleep(50'000);
    }
    return false;
  }

 private:
  std::string socket_;
};

// The captures docs/guide/observability.md quotes ("Captures from the test
// suite") are this test's frames, compared once the clock and the lease id
// (new each run) read as the page's. TALLY_UPDATE_DOCS=1 writes them there.
const std::string kGuide = std::string(TALLY_SOURCE_DIR) + "/docs/guide/observability.md";

std::string asQuoted(const std::string& screen) {
  std::string s =
      std::regex_replace(screen, std::regex("[0-2][0-9]:[0-5][0-9]:[0-5][0-9]"), "22:11:04");
  s = std::regex_replace(s, std::regex("\\b[0-9a-f]{12}\\b"), "bde1280e4dbf");
  std::string out;
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  while (out.size() >= 2 && out.compare(out.size() - 2, 2, "\n\n") == 0) out.pop_back();
  return out;
}

// Where the page's n-th quoted capture (0: 120 columns, 1: 80) sits: the
// offset and length of the text between its fences.
std::pair<std::size_t, std::size_t> quotedBlock(const std::string& page, int n) {
  std::size_t at = page.find("Captures from the test suite");
  if (at == std::string::npos) return {std::string::npos, 0};
  for (int i = 0; i <= n; ++i) {
    at = page.find("\n```\n", at);
    if (at == std::string::npos) return {std::string::npos, 0};
    at += 5;
    std::size_t end = page.find("```\n", at);
    if (i == n) return {at, end - at};
    at = end + 3;
  }
  return {std::string::npos, 0};
}

TEST_F(ObservabilityLive, TopDrawsResizesAndQuitsUnderTmux) {
  Tmux tmux(dir.path() + "/tmux.sock");
  std::string cmd =
      fmt::format("env TALLY_SOCKET={} {} top --interval 200ms; echo TOP-EXIT=$?; sleep 60",
                  daemon->socket(), TALLY_BINARY);
  auto started = tmux.run({"new-session", "-d", "-s", "top", "-x", "170", "-y", "30", cmd});
  ASSERT_EQ(started.exitCode(), 0) << started.err;
  ASSERT_TRUE(tmux.waitFor("llama")) << tmux.capture();
  std::string screen = tmux.capture();
  std::cout << "---- tally top in tmux, 170x30 ----\n" << screen << "----\n";
  EXPECT_NE(screen.find("36.0G/48.0G  75%"), std::string::npos) << screen;
  EXPECT_NE(screen.find("POOL"), std::string::npos);
  EXPECT_NE(screen.find("0000:c6:00.0"), std::string::npos);
  // The workload, then its declared attributes (cut at the edge at 170).
  EXPECT_NE(screen.find("/system.slice/llama-server.service  [context_window=32768"),
            std::string::npos)
      << screen;

  // 120 and 80 columns: the next frame fits the new width (SIGWINCH redraws at
  // once), and the columns that matter stay: lease, name, state, memory and GPU
  // against their limits with the share; less important ones go first.
  std::string frames;  // what the page's region is checked against, below
  for (int width : {120, 80}) {
    ASSERT_EQ(tmux.run({"resize-window", "-t", "top", "-x", std::to_string(width), "-y", "30"})
                  .exitCode(),
              0);
    // The frame drawn for this width: at 120 every seat column fits; at 80 peak,
    // GTT, VRAM, RUN and the workload went first, and whose lease it is stays.
    auto headerOf = [](const std::string& text) {
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("LEASE ", 0) == 0) {
          while (!line.empty() && line.back() == ' ') line.pop_back();
          return line;
        }
      }
      return std::string();
    };
    std::string want = width == 120 ? "VRAM RUN WORKLOAD" : "GPU NOW/MAX";
    ASSERT_TRUE(eventually(
        [&] {
          screen = tmux.capture();
          std::string h = headerOf(screen);
          return h.size() >= want.size() &&
                 h.compare(h.size() - want.size(), want.size(), want) == 0;
        },
        std::chrono::seconds(5)))
        << width << "\n"
        << screen;
    std::istringstream lines(screen);
    for (std::string line; std::getline(lines, line);) {
      std::size_t columns = 0;
      for (char c : line) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      EXPECT_LE(columns, static_cast<std::size_t>(width)) << line;
    }
    std::cout << "---- tally top in tmux, " << width << "x30 ----\n" << screen << "----\n";
    // The page quotes this frame as the binary draws it.
    std::string page = readFile(kGuide);
    auto [at, length] = quotedBlock(page, width == 120 ? 0 : 1);
    ASSERT_NE(at, std::string::npos) << kGuide << " has no capture for " << width;
    if (const char* update = std::getenv("TALLY_UPDATE_DOCS"); update && *update == '1') {
      writeFile(kGuide, page.replace(at, length, asQuoted(screen)));
      frames += asQuoted(screen);
    } else {
      // A frame of the old width cut by tmux, or one drawn while a loaded
      // host let a sample go stale, is not the one quoted: the next refresh
      // (200 ms) is.
      std::string quoted = page.substr(at, length), frame;
      bool same = eventually(
          [&] {
            frame = asQuoted(tmux.capture());
            return frame == quoted;
          },
          std::chrono::seconds(10));
      frames += frame;
      EXPECT_TRUE(same) << kGuide << " quotes another frame at " << width
                        << " columns than the binary draws:\n"
                        << frame << "run this test with TALLY_UPDATE_DOCS=1 to write the binary's";
    }
    for (const char* cell : {"llama", "running", "3.0G/8.0G  37%", "36.0G/48.0G  75%"})
      EXPECT_NE(screen.find(cell), std::string::npos) << width << ": " << cell << "\n" << screen;
  }

  // The page's region names this test: the gate (Docs.EveryQuotedCommands…)
  // counts the frames as checked, and the shared comparison agrees.
  for (const auto& d :
       pageDifferences("docs/guide/observability.md", "tests/live/observability_test.cpp", frames))
    ADD_FAILURE() << d;

  // The lane's GPU memory grows; the next refresh shows it.
  writeFile(host.procRoot() + "/4242/fdinfo/3",
            amdgpuFdinfo(7, "0000:c6:00.0", 40ULL * 1024 * 1024, 0));
  ASSERT_EQ(tmux.run({"resize-window", "-t", "top", "-x", "170", "-y", "30"}).exitCode(), 0);
  EXPECT_TRUE(tmux.waitFor("40.0G/48.0G  83%")) << tmux.capture();

  // 'q' quits, exit status 0, and the shell's screen is back (alternate screen left).
  ASSERT_EQ(tmux.run({"send-keys", "-t", "top", "q"}).exitCode(), 0);
  EXPECT_TRUE(tmux.waitFor("TOP-EXIT=0")) << tmux.capture();
  EXPECT_EQ(tmux.capture().find("POOL"), std::string::npos) << tmux.capture();
}

}  // namespace
}  // namespace tally
