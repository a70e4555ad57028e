// tally's commands as an operator meets them: config check, lease show and
// the ledger read without a daemon, a silent or refusing daemon's words and
// exit statuses, help, version, and --detach. The fixture: cli_fixture.h.
#include <fmt/format.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "cli/cmd_client.h"
#include "cli_fixture.h"
#include "ledger/ledger.h"
#include "rpc/protocol.h"
#include "support/fake_host.h"
#include "support/process.h"
#include "support/scenario.h"

namespace tally {
namespace {

using namespace tally::testing;
using namespace tally::clitest;
using json = nlohmann::json;

// The shipped example config is valid, and problems come back line-numbered with exit 1.
TEST(ConfigCheckCli, ShippedExampleIsValidAndProblemsAreLineNumbered) {
  auto ok = runProgram({TALLY_BINARY, "config", "check",
                        std::string(TALLY_SOURCE_DIR) + "/dist/tally.toml", "--json"});
  auto doc = nlohmann::json::parse(ok.out);
  // Its socket_group is the package's (systemd-sysusers makes group tally):
  // valid where that group exists; elsewhere that is its one problem.
  if (::getgrnam("tally")) {
    ASSERT_EQ(ok.exitCode(), 0) << ok.out;
    EXPECT_TRUE(doc["valid"]);
  } else {
    ASSERT_EQ(ok.exitCode(), 1) << ok.out;
    ASSERT_EQ(doc["problems"].size(), 1u) << doc["problems"];
    EXPECT_EQ(doc["problems"][0].get<std::string>().rfind("daemon.socket_group 'tally' does not "
                                                          "exist on this host",
                                                          0),
              0u);
  }
  EXPECT_EQ(doc["pools"][0]["name"], "gpu");
  EXPECT_EQ(doc["pools"][0]["gpu_memory_budget"], 96ULL << 30);
  EXPECT_EQ(doc["daemon"]["sample_interval_us"], 1000000);
  TempDir dir;
  writeFile(dir.path() + "/bad.toml", "[pools.gpu]\ncapacity = 2\ngpu_memory_budgt = \"96GiB\"\n");
  auto bad = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/bad.toml"});
  EXPECT_EQ(bad.exitCode(), 1);
  EXPECT_NE(bad.err.find(dir.path() + "/bad.toml:3: unknown key 'gpu_memory_budgt' in [pools.gpu]"),
            std::string::npos)
      << bad.err;
  auto missing = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/none.toml"});
  EXPECT_EQ(missing.exitCode(), 1);
  auto daemon = runProgram({TALLY_BINARY, "daemon", "--config", dir.path() + "/bad.toml"});
  EXPECT_EQ(daemon.exitCode(), 1);
  EXPECT_NE(daemon.err.find("tally config check"), std::string::npos) << daemon.err;
}

// `config suggest` reads the host it runs on, and what it prints is a
// config `config check` passes on that same host (nothing to edit first).
TEST(ConfigSuggestCli, ItsOutputPassesConfigCheckOnTheSameHost) {
  FakeHost host;
  host.setMemAvailable(100ULL << 30);  // MemTotal 125 GiB
  FakeDevice apu;
  apu.memInfo = {{"gtt_total", 96ULL << 30},
                 {"gtt_used", 1ULL << 30},
                 {"vram_total", 512ULL << 20},
                 {"vram_used", 0}};
  host.addDevice(apu);
  std::vector<std::string> roots = {"--proc-root", host.procRoot(), "--sys-root", host.sysRoot()};
  std::vector<std::string> args = {TALLY_BINARY, "config", "suggest"};
  args.insert(args.end(), roots.begin(), roots.end());
  auto s = runProgram(args);
  ASSERT_EQ(s.exitCode(), 0) << s.err;
  EXPECT_NE(s.out.find("devices = [\"0000:c6:00.0\"]"), std::string::npos) << s.out;
  TempDir dir;
  writeFile(dir.path() + "/suggested.toml", s.out);
  std::vector<std::string> check = {TALLY_BINARY, "config", "check", dir.path() + "/suggested.toml",
                                    "--json"};
  check.insert(check.end(), roots.begin(), roots.end());
  auto c = runProgram(check);
  ASSERT_EQ(c.exitCode(), 0) << c.out << c.err;
  auto doc = nlohmann::json::parse(c.out);
  EXPECT_EQ(doc["warnings"], json::array()) << doc["warnings"];
  EXPECT_EQ(doc["pools"][0]["gpu_memory_budget"], (96ULL << 30) + (512ULL << 20));
  EXPECT_EQ(doc["pools"][0]["memory_budget"], 13ULL << 30);
  // A bad option is a usage error, said as one.
  args.push_back("--reserve");
  args.push_back("lots");
  auto bad = runProgram(args);
  EXPECT_EQ(bad.exitCode(), 2);
  EXPECT_NE(bad.err.find("--reserve lots"), std::string::npos) << bad.err;
}

// A declared lease is listed as the daemon will follow it; its mistakes are
// the attach request's own.
TEST(ConfigCheckCli, DeclaredLeasesAreListedAndTheirMistakesNamed) {
  TempDir dir;
  writeFile(dir.path() + "/t.toml",
            "[pools.gpu]\ncapacity = 2\n\n[leases.llama]\nunit = \"llama-server.service\"\n"
            "pools = [\"gpu\"]\nmemory_max = \"8GiB\"\ngpu_memory_max = \"64GiB\"\n");
  auto ok = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/t.toml"});
  ASSERT_EQ(ok.exitCode(), 0) << ok.err;
  EXPECT_NE(ok.out.find("[leases.llama]  (leased at every run of its unit)\n"
                        "  unit                      llama-server.service\n"
                        "  pools                     gpu\n"
                        "  memory_max                8.0 GiB\n"
                        "  gpu_memory_max            64.0 GiB\n"),
            std::string::npos)
      << ok.out;
  auto asJson = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/t.toml", "--json"});
  auto doc = nlohmann::json::parse(asJson.out);
  EXPECT_EQ(doc["leases"][0]["unit"], "llama-server.service");
  EXPECT_EQ(doc["leases"][0]["gpu_memory_max"], 64ULL << 30);
  writeFile(dir.path() + "/bad.toml",
            "[pools.gpu]\ncapacity = 2\n\n[leases.llama]\nunit = \"llama-server.service\"\n"
            "pools = [\"gpu\"]\ngpu_memory_action = \"explode\"\n");
  auto bad = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/bad.toml"});
  EXPECT_EQ(bad.exitCode(), 1);
  EXPECT_NE(bad.err.find(dir.path() + "/bad.toml:4: leases.llama: "), std::string::npos) << bad.err;
}

// config check is the daemon's gate: what the daemon would refuse at start
// (a socket group that does not exist, a state directory others may write,
// a declared lease its pool could never grant) is found, all in one pass.
TEST(ConfigCheckCli, EveryCheckTheDaemonMakesIsMadeInOnePass) {
  TempDir dir;
  std::string state = dir.path() + "/state";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(state.c_str(), 0777), 0);
  const std::string leaseTable =
      "[leases.llama]\nunit = \"llama-server.service\"\npools = [\"gpu\"]\n";
  writeFile(dir.path() + "/t.toml",
            fmt::format("[daemon]\nsocket_group = \"no-such-group-tally\"\nstate_dir = \"{}\"\n"
                        "[pools.gpu]\ncapacity = 2\ngpu_memory_budget = \"96GiB\"\n{}"
                        "gpu_memory_max = \"100GiB\"\n",
                        state, leaseTable));
  auto bad = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/t.toml"});
  EXPECT_EQ(bad.exitCode(), 1) << bad.err;
  for (const std::string want :
       {"daemon.socket_group 'no-such-group-tally' does not exist on this host (groupadd "
        "no-such-group-tally or remove the key): the daemon would not start",
        "[daemon] state_dir", "the daemon would not start",
        "leases.llama: --gpu-memory-max 100.0 GiB is larger than pool gpu's whole GPU memory "
        "budget 96.0 GiB: the daemon would refuse it at every start of llama-server.service"})
    EXPECT_NE(bad.err.find(want), std::string::npos) << want << "\n" << bad.err;
  // The same config, fixed, passes.
  ASSERT_EQ(::chmod(state.c_str(), 0700), 0);
  writeFile(dir.path() + "/t.toml",
            fmt::format("[daemon]\nstate_dir = \"{}\"\n[pools.gpu]\ncapacity = 2\n"
                        "gpu_memory_budget = \"96GiB\"\n{}gpu_memory_max = \"90GiB\"\n",
                        state, leaseTable));
  auto ok = runProgram({TALLY_BINARY, "config", "check", dir.path() + "/t.toml"});
  EXPECT_EQ(ok.exitCode(), 0) << ok.err;
}

// config check catches what the daemon would refuse on this host (a textfile
// directory that does not exist), warns about what cannot mean what it says
// here (a device not on this host, budgets above what the host or its devices
// hold), and prints every effective setting.
TEST_F(Cli, ConfigCheckJudgesTheConfigAgainstThisHost) {
  TempDir dir;
  std::string file = dir.path() + "/tally.toml";
  writeFile(file,
            fmt::format("[daemon]\nmetrics_textfile = \"{}/missing/tally.prom\"\n"
                        "[pools.gpu]\ncapacity = 2\nmemory_budget = \"200GiB\"\n"
                        "gpu_memory_budget = \"900GiB\"\ndevices = [\"{}\", \"0000:99:00.0\"]\n",
                        dir.path(), kAmdBdf));
  auto check = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{TALLY_BINARY,    "config",         "check",      file,
                                  "--proc-root",   host.procRoot(),  "--sys-root", host.sysRoot(),
                                  "--cgroup-root", host.cgroupRoot()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return runProgram(argv);
  };
  auto bad = check({});
  EXPECT_EQ(bad.exitCode(), 1) << bad.err;
  EXPECT_NE(bad.err.find("daemon.metrics_textfile: the directory " + dir.path() +
                         "/missing does not exist"),
            std::string::npos)
      << bad.err;
  ::mkdir((dir.path() + "/missing").c_str(), 0755);
  auto ok = check({});
  EXPECT_EQ(ok.exitCode(), 0) << ok.err;
  EXPECT_NE(ok.err.find("warning: pools.gpu.devices: 0000:99:00.0 is not a DRM device on this "
                        "host (here: 0000:03:00.0, " +
                        std::string(kAmdBdf) + ")"),
            std::string::npos)
      << ok.err;
  EXPECT_NE(ok.err.find("warning: pools.gpu.memory_budget 200.0 GiB is more than this host's "
                        "memory (MemTotal 125.0 GiB)"),
            std::string::npos)
      << ok.err;
  EXPECT_NE(ok.err.find("warning: pools.gpu.gpu_memory_budget 900.0 GiB is more than the pool's "
                        "devices hold"),
            std::string::npos)
      << ok.err;
  for (const char* key : {"socket", "state_dir", "queue_timeout", "metrics_textfile",
                          "max_connections", "request_timeout", "gtt_ceiling"})
    EXPECT_NE(ok.out.find(key), std::string::npos) << key << "\n" << ok.out;
  auto j = check({"--json"});
  auto doc = json::parse(j.out);
  EXPECT_EQ(doc["valid"], true);
  EXPECT_EQ(doc["warnings"].size(), 3u) << doc.dump(2);
  EXPECT_EQ(doc["daemon"]["queue_timeout_us"], 3'600'000'000u);
  EXPECT_EQ(doc["daemon"]["metrics_textfile"], dir.path() + "/missing/tally.prom");
}

// An ended lease is shown from the ledger when no daemon answers (a
// standalone run's is only there): name, kind, outcome, limits and peaks.
TEST(LeaseShowCli, AnEndedLeaseIsReadFromTheLedgerWithoutADaemon) {
  TempDir dir;
  std::string state = dir.path() + "/state";
  // A refusal is recorded where a ledger exists (it never makes one).
  ASSERT_TRUE(ledger::Ledger::open(state));
  auto run = runProgram({TALLY_BINARY, "run", "--json", "--state-dir", state, "--name", "probe",
                         "--memory-max", "64M", "--cgroupfs", "--cgroup-parent", "/tally-no-such",
                         "--", "true"});
  ASSERT_EQ(run.exitCode(), 125) << run.err;
  std::string id = nlohmann::json::parse(run.out)["lease"]["id"];
  auto r = runProgram({TALLY_BINARY, "lease", "show", id, "--state-dir", state, "--socket",
                       dir.path() + "/no-daemon.sock"});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_NE(r.err.find("read from the ledger at " + state + "/ledger.sqlite"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("lease " + id + " (probe, run): ended"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  outcome containment-refused: the workload never ran"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("MemoryMax=64.0 MiB"), std::string::npos) << r.out;
  auto missing = runProgram({TALLY_BINARY, "lease", "show", "000000000000", "--state-dir", state,
                             "--socket", dir.path() + "/no-daemon.sock"});
  EXPECT_EQ(missing.exitCode(), 3);
  EXPECT_NE(missing.err.find("no lease 000000000000 in the ledger"), std::string::npos)
      << missing.err;
}

// A live lease as the daemon describes it: pools, declared limits, attributes, age.
TEST(LeaseShowCli, ALiveLeaseShowsItsPoolsLimitsAndAttributes) {
  auto lines = cli::leaseShowLines(nlohmann::json::parse(R"({
    "lease": "1f0c2a9b3e7d", "name": "llama", "kind": "attach", "state": "running",
    "pools": ["gpu"], "declared": {"memory_max": 51539607552, "gpu_memory_max": 42949672960},
    "attributes": {"model": "qwen3-32b"}, "started_at_ns": 1,
    "cgroup": "/system.slice/llama.service", "unit": "llama.service",
    "memory": {"current_bytes": 1073741824, "peak_sampled_bytes": 2147483648},
    "gpu": {"current_bytes": 4294967296, "peak_bytes": 4294967296}})"));
  ASSERT_GE(lines.size(), 6u);
  EXPECT_EQ(lines[0], "lease 1f0c2a9b3e7d (llama, attach): running");
  EXPECT_EQ(lines[1].rfind("  pools gpu; MemoryMax=48.0 GiB, gpu_memory_max=40.0 GiB; age ", 0), 0u)
      << lines[1];
  EXPECT_EQ(lines[2], "  attributes model=qwen3-32b");
  EXPECT_EQ(lines[3], "  cgroup /system.slice/llama.service (unit llama.service)");
  EXPECT_EQ(lines[4], "  memory now 1.0 GiB, sampled peak 2.0 GiB (cgroup)");
  EXPECT_EQ(lines[5], "  GPU memory now 4.0 GiB, peak 4.0 GiB (drm-fdinfo)");
  // Where the kernel charges it: the charge is the figure, fdinfo and refusals beside it.
  auto charged = cli::leaseShowLines(nlohmann::json::parse(R"({
    "lease": "1f0c2a9b3e7d", "name": "llama", "kind": "run", "state": "running",
    "gpu": {"current_bytes": 4294967296, "peak_bytes": 6442450944, "source": "kernel-charge",
            "fdinfo_bytes": 1073741824, "allocations_refused": 3, "refused_bytes": 2147483648}})"));
  ASSERT_EQ(charged.size(), 2u);
  EXPECT_EQ(charged[1],
            "  GPU memory now 4.0 GiB, peak 6.0 GiB (kernel-charge); fdinfo 1.0 GiB; "
            "3 allocations refused (2.0 GiB)");
}

// Read-only commands never create state: a missing ledger (or state dir) is
// exit 3 with its path, and neither is created. Once a lease has been
// recorded, the same commands read it.
TEST(LedgerCli, ReadersNeverCreateALedger) {
  TempDir dir;
  std::string state = dir.path() + "/state";
  auto exists = [](const std::string& path) { return ::access(path.c_str(), F_OK) == 0; };
  for (std::vector<std::string> args : {std::vector<std::string>{"ledger"},
                                        {"ledger", "--json"},
                                        {"ledger", "verify"},
                                        {"ledger", "verify", "--json"},
                                        {"ledger", "export"}}) {
    args.insert(args.begin(), TALLY_BINARY);
    args.insert(args.end(), {"--state-dir", state});
    auto r = runProgram(args);
    EXPECT_EQ(r.exitCode(), 3) << args[2] << "\n" << r.err;
    EXPECT_NE(r.err.find("no ledger at " + state + "/ledger.sqlite"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("intact"), std::string::npos) << r.out;
    EXPECT_FALSE(exists(state)) << "tally " << args[1] << " created the state directory";
  }
  ::mkdir(state.c_str(), 0700);  // a directory without a ledger: still nothing to read
  auto empty = runProgram({TALLY_BINARY, "ledger", "verify", "--state-dir", state});
  EXPECT_EQ(empty.exitCode(), 3) << empty.err;
  EXPECT_FALSE(exists(state + "/ledger.sqlite"));

  // A refused run never creates the ledger either (the command never ran);
  // where one exists, it records its outcome there.
  auto refused = [&] {
    return runProgram({TALLY_BINARY, "run", "--state-dir", state, "--cgroupfs", "--cgroup-parent",
                       "/tally-no-such-parent", "--", "true"});
  };
  EXPECT_EQ(refused().exitCode(), 125);
  EXPECT_FALSE(exists(state + "/ledger.sqlite"));
  ASSERT_TRUE(ledger::Ledger::open(state));
  auto run = refused();
  EXPECT_EQ(run.exitCode(), 125) << run.err;
  auto v = runProgram({TALLY_BINARY, "ledger", "verify", "--state-dir", state, "--json"});
  ASSERT_EQ(v.exitCode(), 0) << v.err;
  auto doc = nlohmann::json::parse(v.out);
  EXPECT_TRUE(doc["intact"]);
  EXPECT_EQ(doc["rows"], 1);
  auto e = runProgram({TALLY_BINARY, "ledger", "export", "--json", "--state-dir", state});
  ASSERT_EQ(e.exitCode(), 0);
  EXPECT_EQ(nlohmann::json::parse(e.out).size(), 1u);
}

// An operator's decision on a lost tail: shown without --yes (nothing
// written, exit 1), recorded with it; verify then marks it acknowledged.
TEST(LedgerCli, AcknowledgeShowsTheDamageAndWritesOnlyWithYes) {
  TempDir dir;
  std::string state = dir.path() + "/state";
  auto refusedRun = [&] {
    return runProgram({TALLY_BINARY, "run", "--state-dir", state, "--cgroupfs", "--cgroup-parent",
                       "/tally-no-such-parent", "--", "true"});
  };
  ASSERT_TRUE(ledger::Ledger::open(state));  // refusals are recorded where a ledger exists
  ASSERT_EQ(refusedRun().exitCode(), 125);
  std::filesystem::copy_file(state + "/ledger.sqlite", dir.path() + "/older.sqlite");
  ASSERT_EQ(refusedRun().exitCode(), 125);
  ASSERT_EQ(refusedRun().exitCode(), 125);
  // A crash that lost the WAL: the database as it was after row 1.
  std::filesystem::copy_file(dir.path() + "/older.sqlite", state + "/ledger.sqlite",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(state + "/ledger.sqlite-wal");
  std::filesystem::remove(state + "/ledger.sqlite-shm");

  auto v = runProgram({TALLY_BINARY, "ledger", "verify", "--state-dir", state});
  EXPECT_EQ(v.exitCode(), 1) << v.out << v.err;
  EXPECT_NE(v.out.find("rows 2..3 at the end are missing: the chain ends at row 1"),
            std::string::npos)
      << v.out;
  auto shown = runProgram({TALLY_BINARY, "ledger", "acknowledge", "--state-dir", state});
  EXPECT_EQ(shown.exitCode(), 1) << shown.out << shown.err;
  EXPECT_NE(shown.out.find("1 problem no operator accepted:"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("Nothing written."), std::string::npos) << shown.out;
  auto yes = runProgram({TALLY_BINARY, "ledger", "acknowledge", "--yes", "--state-dir", state});
  EXPECT_EQ(yes.exitCode(), 0) << yes.out << yes.err;
  EXPECT_NE(yes.out.find("acknowledged as row #2 (damage-acknowledged)"), std::string::npos)
      << yes.out;
  auto again = runProgram({TALLY_BINARY, "ledger", "verify", "--state-dir", state, "--json"});
  auto doc = nlohmann::json::parse(again.out);
  EXPECT_EQ(doc["acknowledged"].size(), 1u) << again.out;
  EXPECT_EQ(doc["witness_seq"], 2) << again.out;
  EXPECT_TRUE(doc["problems"].empty()) << again.out;  // the witness names the acknowledgement
  auto nothing = runProgram({TALLY_BINARY, "ledger", "acknowledge", "--state-dir", state});
  EXPECT_EQ(nothing.exitCode(), 0);
  EXPECT_NE(nothing.out.find("nothing to acknowledge: the chain is intact"), std::string::npos)
      << nothing.out;
}

// A daemon that accepts connections and never answers (hung, or stopped with
// SIGSTOP): every client command gives up after --timeout with the socket's
// path, exit 3, instead of hanging the operator's shell.
TEST(ClientCli, EveryCommandGivesUpOnASilentDaemon) {
  TempDir dir;
  std::string path = dir.path() + "/silent.sock";
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 64), 0);  // connections complete in the backlog; none is read
  for (std::vector<std::string> args : {std::vector<std::string>{"leases"},
                                        {"pools"},
                                        {"seats"},
                                        {"metrics"},
                                        {"lease", "show", "abc"},
                                        {"lease", "release", "abc"},
                                        {"attach", "--pool", "gpu", "--pid", "1"}}) {
    args.insert(args.begin(), TALLY_BINARY);
    args.insert(args.end(), {"--socket", path, "--timeout", "300ms"});
    // The client gave up on its own --timeout (it says so), never on the
    // daemon, which never answers: no wall clock needed to know that.
    auto r = runProgram(args);
    EXPECT_EQ(r.exitCode(), 3) << args[1] << "\n" << r.err;
    EXPECT_NE(r.err.find("the daemon at " + path + " did not answer in 300ms"), std::string::npos)
        << r.err;
  }
  // A --user nobody is: exit 2, nothing asked, in each command that takes it.
  for (const char* cmd : {"leases", "events", "ledger"}) {
    auto r = runProgram({TALLY_BINARY, cmd, "--user", "no-such-user-tally", "--socket", path});
    if (std::string_view(cmd) == "ledger")
      r = runProgram({TALLY_BINARY, cmd, "--user", "no-such-user-tally", "--state-dir", "/"});
    EXPECT_EQ(r.exitCode(), 2) << cmd << r.err;
    EXPECT_EQ(r.err, fmt::format("tally {}: --user no-such-user-tally: no such user on this host; "
                                 "give a login name or a numeric uid\n",
                                 cmd))
        << cmd;
  }
  // A bad --name is the command line's mistake: exit 2, nothing asked.
  auto badName = runProgram({TALLY_BINARY, "attach", "--pool", "gpu", "--pid", "1", "--name",
                             "no spaces", "--socket", path});
  EXPECT_EQ(badName.exitCode(), 2) << badName.err;
  EXPECT_EQ(badName.err, "tally attach: --name 'no spaces' must be 1-64 of [A-Za-z0-9._-]\n");
  auto bad = runProgram({TALLY_BINARY, "leases", "--socket", path, "--timeout", "0"});
  EXPECT_EQ(bad.exitCode(), 2) << bad.err;
  EXPECT_NE(bad.err.find("--timeout must be between 1ms and 1h"), std::string::npos) << bad.err;
  auto help = runProgram({TALLY_BINARY, "pools", "--help"});
  EXPECT_NE(help.out.find("--timeout"), std::string::npos);
  EXPECT_NE(help.out.find("10s"), std::string::npos) << help.out;
  ::close(listener);
}

// A daemon that answers every request with one error, as the real one words
// it: each command prints the daemon's sentence (never the RPC code alone) and
// exits as tally --help's table says.
class OneAnswerDaemon {
 public:
  OneAnswerDaemon(std::string path, rpc::RpcError answer) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          ::listen(fd_, 8) == 0;
    thread_ = std::thread([this, answer] {
      // One client at a time; shutdown(2) of the listener ends accept().
      for (int c; (c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ::close(c)) {
        std::string line;
        char ch;
        while (::read(c, &ch, 1) == 1 && ch != '\n') line += ch;
        auto req = nlohmann::json::parse(line, nullptr, false);
        std::string reply = rpc::encodeError(req.is_object() ? req["id"] : json(), answer);
        (void)!::write(c, reply.data(), reply.size());
      }
    });
  }
  ~OneAnswerDaemon() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
  std::thread thread_;
};

TEST(ExitStatusCli, TheDaemonsNoIsASentenceAndOneExitCodeAcrossCommands) {
  struct Case {
    rpc::RpcError answer;
    int exit;
    const char* adds;  // what tally says beyond the daemon's sentence
  };
  const std::string kill =
      "unit llama.service uses GPU memory 64.0 MiB now (DRM fdinfo), over --gpu-memory-max 48.0 "
      "MiB: attaching would kill it on arrival. Declare limits above what it uses, or pass "
      "--force to attach anyway (it is then killed if it stays over)";
  for (const Case& c : {
           Case{{"invalid-params", kill}, 5, ""},
           Case{{"refused", "no pool 'gpux' (configured: gpu)"}, 5, ""},
           Case{{"conflict", "cgroup /a is already leased by 0123456789ab (llama)"}, 5, ""},
           Case{{"not-found", "no lease abc"}, 5, ""},
           Case{{"unavailable", "the ledger cannot write: disk full"}, 5, ""},
           Case{{"unsupported-version", "protocol version 9 is not spoken here"},
                3,
                ". The daemon could not read this client's request (unsupported-version): run "
                "the same tally version on both sides (tally --version here; systemctl status "
                "tally names the daemon's binary)"},
           Case{{"internal", "std::bad_alloc"},
                4,
                ". That is a bug in the daemon: please report it with its journal"},
       }) {
    TempDir dir;
    OneAnswerDaemon daemon(dir.path() + "/d.sock", c.answer);
    ASSERT_TRUE(daemon.ok());
    for (std::vector<std::string> args :
         {std::vector<std::string>{"attach", "--pool", "gpu", "--pid", "1"},
          {"leases"},
          {"lease", "release", "abc"}}) {
      std::string cmd = args[0] == "lease" ? "lease release" : args[0];
      args.insert(args.begin(), TALLY_BINARY);
      args.insert(args.end(), {"--socket", dir.path() + "/d.sock"});
      auto r = runProgram(args);
      EXPECT_EQ(r.exitCode(), c.exit) << c.answer.code << " " << cmd << "\n" << r.err;
      EXPECT_NE(r.err.find("tally " + cmd + ": " + c.answer.message + c.adds + "\n"),
                std::string::npos)
          << c.answer.code << " " << cmd << "\n"
          << r.err;
      // The code alone is never the message (a protocol disagreement names it as a clue).
      if (std::string(c.adds).empty()) {
        EXPECT_EQ(r.err.find("(" + c.answer.code + ")"), std::string::npos) << r.err;
      }
    }
  }
}

// tally(1) as the build writes it: the prose of dist/tally.1.in, the rest
// from the binary's own command-line model.
std::string manPage() {
  auto r = runProgram({TALLY_BINARY, "completion", "man", "--template",
                       std::string(TALLY_SOURCE_DIR) + "/dist/tally.1.in"});
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  return r.out;
}

std::string roffed(std::string s) {
  std::string out;
  for (char c : s) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

// Every command and every option its --help lists is in the man page, which
// is written from the same model (nothing to keep in step by hand).
TEST(ManPageCli, EveryCommandAndOptionItsHelpListsIsInTheManPage) {
  std::string man = manPage();
  EXPECT_EQ(man.find("@TALLY_MAN"), std::string::npos);
  std::regex option("^  (?:-[a-zA-Z],)?(--[a-z][a-z-]+)");
  for (const auto& cmd : commandPaths()) {
    std::string path;
    for (const auto& w : cmd) path += (path.empty() ? "" : " ") + w;
    std::size_t at = man.find(".SS \"tally " + path + "\"\n");
    ASSERT_NE(at, std::string::npos) << path;
    std::size_t end = man.find(".SS ", at + 4);
    std::string section = man.substr(at, end == std::string::npos ? std::string::npos : end - at);
    std::vector<std::string> argv = {TALLY_BINARY};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    argv.push_back("--help");
    std::istringstream help(runProgram(argv).out);
    int seen = 0;
    for (std::string l; std::getline(help, l);) {
      std::smatch m;
      if (!std::regex_search(l, m, option)) continue;
      std::string name = m[1];
      if (name == "--help" || name == "--proc-root" || name == "--sys-root" ||
          name == "--cgroup-root" || name == "--version")
        continue;  // tally's own, listed once
      ++seen;
      EXPECT_NE(section.find(roffed(name)), std::string::npos) << path << ": " << name;
    }
    EXPECT_GT(seen, 0) << path;
  }
  // The synopsis names each command's operands, as its --help does.
  std::string synopsis = man.substr(man.find(".SH SYNOPSIS"));
  synopsis = synopsis.substr(0, synopsis.find(".SH ", 4));
  EXPECT_NE(
      synopsis.find(".B tally run\n.RI [ options ]\n.RB [ \\-\\- ]\n.RI [ \"command ...\" ]\n"),
      std::string::npos)
      << synopsis;
  EXPECT_NE(synopsis.find(".B tally lease show\n.RI [ options ]\n.I \"ID\"\n"), std::string::npos)
      << synopsis;
  EXPECT_NE(synopsis.find(".B tally config check\n.RI [ options ]\n.RI [ \"FILE\" ]\n"),
            std::string::npos)
      << synopsis;
}

// One table of exit codes: tally --help prints it and the man page carries
// the same codes with the same words.
TEST(ExitStatusCli, HelpAndTheManPageCarryTheSameTable) {
  auto help = runProgram({TALLY_BINARY, "--help"});
  std::map<int, std::string> fromHelp, fromMan;
  std::regex helpLine("^  ([0-9])  (.+)$"), continued("^     (\\S.*)$");
  std::istringstream lines(help.out.substr(help.out.find("Exit status:")));
  int code = -1;
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    EXPECT_LE(l.size(), 80u) << l;
    if (std::regex_match(l, m, helpLine))
      fromHelp[code = std::stoi(m[1])] = m[2];
    else if (code >= 0 && std::regex_match(l, m, continued))
      fromHelp[code] += " " + m[1].str();
  }
  std::string man = manPage();
  std::string section = man.substr(man.find(".SH EXIT STATUS"));
  section = section.substr(0, section.find(".SH ", 4));
  std::regex manEntry("\\.TP\n\\.B ([0-9])\n([^\n]+)\n");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), manEntry);
       it != std::sregex_iterator(); ++it)
    fromMan[std::stoi((*it)[1])] = (*it)[2];
  EXPECT_EQ(fromHelp.size(), 6u) << help.out;
  EXPECT_EQ(fromHelp, fromMan);
  EXPECT_NE(help.out.find("'tally run' exits with its workload's status"), std::string::npos);
}

// A mistyped command is named with the nearest one, before any parsing or
// lookup; help shows "tally", not the binary's path; --version names the commit.
TEST(MessagesCli, UnknownCommandsHelpAndVersionReadLikeATool) {
  auto typo = runProgram({TALLY_BINARY, "gpuu"});
  EXPECT_EQ(typo.exitCode(), 2);
  EXPECT_EQ(typo.err, "tally: unknown command 'gpuu' (did you mean gpu?)\n");
  auto rooted = runProgram({TALLY_BINARY, "--proc-root", "/proc", "dcotor", "--json"});
  EXPECT_EQ(rooted.err, "tally: unknown command 'dcotor' (did you mean doctor?)\n");
  auto nothing = runProgram({TALLY_BINARY, "xyzzy"});
  EXPECT_EQ(nothing.err, "tally: unknown command 'xyzzy' (tally --help lists them)\n");
  // The workload's own words are never taken for a command.
  auto workload = runProgram({TALLY_BINARY, "run", "--memory-max", "lots", "--", "gpuu"});
  EXPECT_EQ(workload.err.find("unknown command"), std::string::npos) << workload.err;
  auto help = runProgram({TALLY_BINARY, "gpu", "--help"});
  EXPECT_EQ(help.exitCode(), 0);
  EXPECT_NE(help.out.find("Usage: tally gpu"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find(TALLY_BINARY), std::string::npos) << help.out;
  auto version = runProgram({TALLY_BINARY, "--version"});
  EXPECT_EQ(version.exitCode(), 0);
  EXPECT_EQ(version.out.rfind("tally 0.1.0 (", 0), 0u) << version.out;
  EXPECT_TRUE(version.out.find("(commit ") != std::string::npos ||
              version.out.find("(unknown commit)") != std::string::npos)
      << version.out;
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

using namespace tally::testing;

// A --pool job in the foreground says at start that it ends with its
// terminal, and how not to; --detach without a pool is a usage error.
TEST(DetachCli, AForegroundPoolJobSaysALostTerminalEndsItAndHowToDetach) {
  TempDir dir;
  auto fg = runProgram(
      {TALLY_BINARY, "run", "--pool", "batch", "--socket", dir.path() + "/no.sock", "--", "true"});
  EXPECT_EQ(fg.exitCode(), 125) << fg.err;  // no daemon: nothing ran
  EXPECT_EQ(fg.err.rfind("tally run: this job ends if this terminal goes (SIGHUP); to let it run "
                         "on without one, add --detach (its output goes to the journal: tally "
                         "logs ID)\n",
                         0),
            0u)
      << fg.err;
  auto quiet = runProgram({TALLY_BINARY, "run", "--quiet", "--pool", "batch", "--socket",
                           dir.path() + "/no.sock", "--", "true"});
  EXPECT_EQ(quiet.err.find("this terminal goes"), std::string::npos) << quiet.err;
  auto alone = runProgram({TALLY_BINARY, "run", "--detach", "--", "true"});
  EXPECT_EQ(alone.exitCode(), 2);
  EXPECT_EQ(alone.err,
            "tally run: --detach needs --pool: a detached job's lease is held through the daemon "
            "(tally run --pool P --detach -- CMD)\n");
  // No daemon: refused, nothing left running. Without systemd (this build
  // host) it is the manager that is missing; with one, the job's own tally
  // run finds no daemon and its service fails before READY.
  auto noDaemon = runProgram({TALLY_BINARY, "run", "--system", "--detach", "--pool", "batch",
                              "--socket", dir.path() + "/no.sock", "--", "true"});
  EXPECT_EQ(noDaemon.exitCode(), 125);
  EXPECT_TRUE(noDaemon.err.find("tally run: --detach needs a systemd manager: ") !=
                  std::string::npos ||
              noDaemon.err.find("tally run: the detached job did not start: ") != std::string::npos)
      << noDaemon.err;
}

TEST(DetachCli, LogsWithoutADaemonSaysSo) {
  TempDir dir;
  auto r = runProgram({TALLY_BINARY, "logs", "1f0c2a9b3e7d", "--socket", dir.path() + "/no.sock"});
  EXPECT_EQ(r.exitCode(), 3) << r.err;
}

}  // namespace
}  // namespace tally
