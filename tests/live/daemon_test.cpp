// The real `tally daemon` binary on a real Unix socket, over a synthetic
// host (fake /proc, /sys and cgroup trees): RPC robustness, peer identity,
// kill -9 recovery, and the ledger surviving a daemon killed mid-write.
#include "support/daemon.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "ledger/ledger.h"
#include "support/fake_host.h"
#include "support/process.h"
#include "support/raw_client.h"
#include "util/text.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

class DaemonLive : public ::testing::Test {
 protected:
  void SetUp() override {
    host.setMemAvailable(64 * GiB);
    makeDirs(host.cgroupRoot());
    daemon = std::make_unique<DaemonUnderTest>(
        dir.path(),
        "sample_interval = \"100ms\"\nclient_grace = \"1s\"\n[pools.one]\ncapacity = "
        "1\n[pools.gpu]\ncapacity = 4\n"
        "gpu_memory_budget = \"96GiB\"\n",
        std::vector<std::string>{"--proc-root", host.procRoot(), "--sys-root", host.sysRoot(),
                                 "--cgroup-root", host.cgroupRoot()});
    ASSERT_TRUE(daemon->start());
  }
  void workload(const std::string& path, bool populated) {
    std::string d = host.cgroupRoot() + path;
    writeFile(d + "/cgroup.events", fmt::format("populated {}\nfrozen 0\n", populated ? 1 : 0));
    writeFile(d + "/memory.current", "104857600\n");
    writeFile(d + "/memory.peak", "209715200\n");
    writeFile(d + "/memory.events", "oom 0\noom_kill 0\n");
    writeFile(d + "/memory.max", "max\n");
  }
  ProgramResult tally(std::vector<std::string> args) {
    args.insert(args.begin(), TALLY_BINARY);
    return runProgram(args, {"TALLY_SOCKET=" + daemon->socket()});
  }
  std::vector<ledger::Event> rows(const std::string& lease) {
    auto db = ledger::Ledger::open(daemon->stateDir());
    return *db->events(lease);
  }

  FakeHost host;
  TempDir dir;
  std::unique_ptr<DaemonUnderTest> daemon;
};

TEST_F(DaemonLive, HostileRequestsGetErrorsAndTheDaemonStaysUp) {
  Raw r(daemon->socket());
  ASSERT_TRUE(r.connected());
  json e = r.call(json("not an object"));
  EXPECT_EQ(e["error"]["code"], "bad-request");
  r.send("{this is not json\n");
  EXPECT_EQ(r.line()["error"]["code"], "bad-json");
  EXPECT_EQ(r.call({{"v", 1}, {"id", 5}, {"method", "self-destruct"}})["error"]["code"],
            "unknown-method");
  EXPECT_EQ(r.call({{"v", 99}, {"id", 6}, {"method", "hello"}})["error"]["code"],
            "unsupported-version");
  // A 1 MiB request: refused, skipped, and the same connection still works.
  r.send("{\"v\":1,\"id\":7,\"method\":\"hello\",\"params\":{\"pad\":\"" +
         std::string(1 << 20, 'x') + "\"}}\n");
  EXPECT_EQ(r.line()["error"]["code"], "too-large");
  json ok = r.call({{"v", 1}, {"id", 8}, {"method", "hello"}});
  EXPECT_TRUE(ok["ok"]);
  EXPECT_EQ(ok["id"], 8);
  EXPECT_EQ(ok["result"]["uid"], ::getuid());  // SO_PEERCRED, not anything the client said
  // NUL bytes, a half request and an abrupt close.
  {
    Raw half(daemon->socket());
    half.send(std::string("{\"v\":1,\0\0\0", 10));
  }
  for (int i = 0; i < 50; ++i)
    Raw(daemon->socket())
        .send("{\"v\":1,\"id\":1,\"method\":\"acquire\",\"params\":{\"pools\":[\"one\"]}}\n");
  Raw after(daemon->socket());
  EXPECT_TRUE(after.call({{"v", 1}, {"id", 1}, {"method", "pools"}})["ok"]);
  // The 50 acquirers vanished: the queued ones went with their connections;
  // the one granted is kept for client_grace (1 s) in case it resumes, then withdrawn.
  // (The daemon may serve `after` before the last of the 50 hang-ups.)
  json leases;
  ASSERT_TRUE(eventually([&] {
    leases = after.call({{"v", 1}, {"id", 2}, {"method", "leases"}});
    return leases["result"]["leases"].size() == 1u;
  })) << leases;
  std::string granted = leases["result"]["leases"][0]["lease"];
  // The barrier is the ledger's withdrawn row (client_grace passed without the client).
  ASSERT_TRUE(eventually(
      [&] { return !rows(granted).empty() && rows(granted).back().kind == "withdrawn"; }));
  leases = after.call({{"v", 1}, {"id", 3}, {"method", "leases"}});
  EXPECT_TRUE(leases["result"]["leases"].empty()) << leases;
  ASSERT_FALSE(rows(granted).empty());
  EXPECT_EQ(rows(granted).back().kind, "withdrawn");
}

// `tally events` as `docker events` is read: each line with its time; --since
// replays the ledger's rows first; when the daemon restarts, events says so,
// reconnects and replays what the ledger recorded while it was away (here the
// coverage row each daemon start writes); filters pick the kinds.
TEST_F(DaemonLive, EventsReplaySinceAndReconnectAcrossADaemonRestart) {
  {
    Raw first(daemon->socket());
    json a = first.call({{"v", 1},
                         {"id", 1},
                         {"method", "acquire"},
                         {"params", {{"pools", {"one"}}, {"name", "before"}}}});
    ASSERT_EQ(a.value("ok", false), true) << a;
  }
  auto events = spawnProgram({TALLY_BINARY, "events", "--since", "10m", "--kind", "granted",
                              "--kind", "coverage", "--count", "4", "--timeout", "60s"},
                             {"TALLY_SOCKET=" + daemon->socket()});
  auto said = [&](const char* what) {
    return eventually([&] { return readFile(events.errPath).find(what) != std::string::npos; },
                      std::chrono::seconds(30));
  };
  ASSERT_TRUE(said("following the daemon at")) << readFile(events.errPath);
  daemon->stop();
  ASSERT_TRUE(said("reconnecting")) << readFile(events.errPath);
  ASSERT_TRUE(daemon->start());
  ASSERT_TRUE(said("reconnected to the daemon at")) << readFile(events.errPath);
  Raw second(daemon->socket());
  json b =
      second.call({{"v", 1},
                   {"id", 1},
                   {"method", "acquire"},
                   {"params", {{"pools", {"gpu"}}, {"name", "after"}, {"gpu_memory_max", GiB}}}});
  ASSERT_EQ(b.value("ok", false), true) << b;
  auto r = waitProgram(events);
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  std::printf("[ tally events --since 10m --kind granted --kind coverage ]\n%s%s[ end ]\n",
              r.err.c_str(), r.out.c_str());
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << r.out << r.err;
  const std::regex when(R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}  )");
  for (const auto& line : lines) EXPECT_TRUE(std::regex_search(line, when)) << line;
  EXPECT_NE(lines[0].find("  coverage: "), std::string::npos) << r.out;  // the first start's
  EXPECT_NE(lines[1].find(" (before): granted in one"), std::string::npos) << r.out;
  EXPECT_NE(lines[2].find("  coverage: "), std::string::npos) << r.out;  // written while away
  EXPECT_NE(lines[3].find(" (after): granted in gpu"), std::string::npos) << r.out;
  // The replay is said as it begins and as it ends (it is served in slices).
  auto first = r.err.find("(first the ledger's rows since then)");
  auto two = r.err.find("tally events: 2 rows replayed\n");
  auto away = r.err.find("; first the ledger's rows from while it was away");
  auto one = r.err.find("tally events: 1 row replayed\n");
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_NE(away, std::string::npos) << r.err;
  EXPECT_TRUE(first < two && two < away && away < one && one != std::string::npos) << r.err;
}

TEST_F(DaemonLive, SocketIsMode0660AndPeersAreIdentifiedByTheKernel) {
  struct stat st {};
  ASSERT_EQ(::stat(daemon->socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  Raw owner(daemon->socket());
  json granted =
      owner.call({{"v", 1}, {"id", 1}, {"method", "acquire"}, {"params", {{"pools", {"one"}}}}});
  ASSERT_TRUE(granted["ok"]) << granted;
  std::string lease = granted["result"]["lease"];
  // Another user (nobody): let it through the mode bits for this test only.
  ASSERT_EQ(::chmod(daemon->socket().c_str(), 0666), 0);
  int pipeFd[2];
  ASSERT_EQ(::pipe(pipeFd), 0);
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    Raw other(daemon->socket());
    json hello = other.call({{"v", 1}, {"id", 1}, {"method", "hello"}});
    json rel =
        other.call({{"v", 1}, {"id", 2}, {"method", "release"}, {"params", {{"lease", lease}}}});
    std::string out = hello["result"]["uid"].dump() + " " + rel["error"]["code"].dump() + "\n";
    (void)!::write(pipeFd[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(pipeFd[1]);
  char buf[256] = {};
  ssize_t n = ::read(pipeFd[0], buf, sizeof buf - 1);
  ::close(pipeFd[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf), "65534 \"forbidden\"\n");
  EXPECT_TRUE(owner.call(
      {{"v", 1}, {"id", 2}, {"method", "release"}, {"params", {{"lease", lease}}}})["ok"]);
}

TEST_F(DaemonLive, Kill9MidLeaseReadoptsAndRecordsTheOutcomeOnce) {
  workload("/system.slice/llama.service", true);
  auto a = tally({"attach", "--cgroup", "/system.slice/llama.service", "--pool", "gpu",
                  "--gpu-memory-max", "48GiB", "--name", "llama"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  std::string lease(text::trim(a.out));
  ASSERT_EQ(lease.size(), 12u) << a.out;
  // A few samples first: the barrier is the lease's own sample count.
  ASSERT_TRUE(eventually([&] {
    auto shown = tally({"lease", "show", lease, "--json"});
    json j = json::parse(shown.out, nullptr, false);
    return j.is_object() && j.contains("memory") && j["memory"].value("samples", 0) >= 3;
  }));
  daemon->kill9();
  ASSERT_TRUE(daemon->start());
  EXPECT_NE(daemon->log().find("re-adopted /system.slice/llama.service"), std::string::npos)
      << daemon->log();
  auto shown = tally({"lease", "show", lease, "--json"});
  ASSERT_EQ(shown.exitCode(), 0) << shown.err;
  json s = json::parse(shown.out);
  EXPECT_EQ(s["state"], "running");
  EXPECT_EQ(s["readopted_after_restart"], true);
  // The workload ends; inotify on cgroup.events tells the restarted daemon.
  writeFile(host.cgroupRoot() + "/system.slice/llama.service/cgroup.events",
            "populated 0\nfrozen 0\n");
  ASSERT_TRUE(
      eventually([&] { return !rows(lease).empty() && rows(lease).back().kind == "outcome"; }));
  std::vector<std::string> kinds;
  for (const auto& e : rows(lease)) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"granted", "adopted", "readopted", "outcome"}));
  json outcome = json::parse(rows(lease).back().body);
  EXPECT_EQ(outcome["outcome"]["class"], "ended");
  EXPECT_EQ(outcome["memory"]["peak_bytes"], 209715200);
  // Restart once more: nothing is re-adopted or recorded again.
  daemon->kill9();
  ASSERT_TRUE(daemon->start());
  EXPECT_EQ(rows(lease).size(), 4u);
  auto verify = tally({"ledger", "verify", "--config", daemon->config()});
  EXPECT_EQ(verify.exitCode(), 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("intact"), std::string::npos);
}

// A queued request outlives a daemon restart: its client sees the daemon go,
// sends the request again once it is back (the restarted daemon re-adopts the
// holder, so the request waits again), and is granted when the holder leaves.
TEST_F(DaemonLive, AQueuedAttachIsQueuedAgainAfterADaemonRestart) {
  workload("/system.slice/first.service", true);
  workload("/system.slice/second.service", true);
  auto first = tally({"attach", "--cgroup", "/system.slice/first.service", "--pool", "one"});
  ASSERT_EQ(first.exitCode(), 0) << first.err;
  std::string holder(text::trim(first.out));
  // Into the full pool without --wait: refused at once, the reason named.
  auto refused = tally({"attach", "--cgroup", "/system.slice/second.service", "--pool", "one"});
  EXPECT_EQ(refused.exitCode(), 5) << refused.err;
  EXPECT_NE(refused.err.find("it cannot be granted now: pool one"), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("pass --wait (or --queue-timeout) to queue for it"), std::string::npos)
      << refused.err;
  auto waiting = spawnProgram({TALLY_BINARY, "attach", "--cgroup", "/system.slice/second.service",
                               "--pool", "one", "--wait"},
                              {"TALLY_SOCKET=" + daemon->socket()});
  auto timesQueued = [&] {
    std::string err = readFile(waiting.errPath);
    std::size_t n = 0;
    for (std::size_t at = 0; (at = err.find("queued as lease", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  ASSERT_TRUE(eventually([&] { return timesQueued() >= 1; })) << readFile(waiting.errPath);
  daemon->kill9();
  ASSERT_TRUE(daemon->start());
  ASSERT_TRUE(eventually([&] { return timesQueued() >= 2; })) << readFile(waiting.errPath);
  EXPECT_NE(readFile(waiting.errPath).find("went away while the request waited"), std::string::npos)
      << readFile(waiting.errPath);
  ASSERT_EQ(tally({"lease", "release", holder}).exitCode(), 0);
  auto granted = waitProgram(waiting);
  EXPECT_EQ(granted.exitCode(), 0) << granted.err;
  std::string lease(text::trim(granted.out));
  EXPECT_EQ(lease.size(), 12u) << granted.out;
  EXPECT_EQ(rows(lease).front().kind, "granted");
}

TEST_F(DaemonLive, LedgerSurvivesTheDaemonKilledMidWrite) {
  // Clients acquire and release as fast as they can while the daemon is
  // killed with SIGKILL three times; every row that made it must verify.
  std::atomic<bool> stop{false};
  std::atomic<int> cycles{0};
  std::thread hammer([&] {
    while (!stop) {
      auto c = rpc::Client::connect(daemon->socket());
      if (!c) continue;  // the daemon is restarting
      rpc::api::Acquire a;
      a.declared.pools = {"gpu"};
      a.declared.declaration.gpuMemoryMax = 1 << 30;
      auto m = c->call(a, {}, 2000);
      if (m && m->ok) {
        (void)c->call(rpc::api::Release{{m->result["lease"].get<std::string>()}}, {}, 2000);
        ++cycles;
      }
    }
  });
  // Each kill lands while clients are mid-cycle: the barrier is five more
  // completed cycles since the last restart.
  for (int k = 0; k < 3; ++k) {
    int at = cycles.load();
    ASSERT_TRUE(eventually([&] { return cycles.load() >= at + 5; }));
    daemon->kill9();
    ASSERT_TRUE(daemon->start());
  }
  int at = cycles.load();
  ASSERT_TRUE(eventually([&] { return cycles.load() >= at + 5; }));
  stop = true;
  hammer.join();
  EXPECT_GT(cycles.load(), 10);
  // Leases granted just before a kill were re-held on restart for their
  // client; none resumes, so after client_grace each is withdrawn, once.
  ASSERT_TRUE(
      eventually([&] { return ledger::Ledger::open(daemon->stateDir())->openLeases()->empty(); }));
  auto verify = tally({"ledger", "verify", "--config", daemon->config(), "--json"});
  ASSERT_EQ(verify.exitCode(), 0) << verify.out << verify.err;
  json v = json::parse(verify.out);
  EXPECT_TRUE(v["intact"]);
  EXPECT_GT(v["rows"].get<int>(), 30);
  auto db = ledger::Ledger::open(daemon->stateDir());
  EXPECT_TRUE(db->openLeases()->empty());
  std::map<std::string, int> terminal;
  auto events = db->events();
  ASSERT_TRUE(events);
  for (const auto& e : *events) {
    if (ledger::isTerminal(e.kind)) ++terminal[e.leaseId];
  }
  for (const auto& [id, n] : terminal) EXPECT_EQ(n, 1) << id;
}

TEST_F(DaemonLive, ClientCommandsAndTheirExitCodes) {
  auto pools = tally({"pools", "--json"});
  ASSERT_EQ(pools.exitCode(), 0) << pools.err;
  json p = json::parse(pools.out);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0]["pool"], "one");
  EXPECT_EQ(p[1]["gpu_memory_budget"], 96 * GiB);
  EXPECT_EQ(p[1]["headroom"]["host_bytes"], 64 * GiB);  // the fake host's MemAvailable
  auto table = tally({"pools"});
  EXPECT_NE(table.out.find("gpu"), std::string::npos);
  auto refused = tally({"attach", "--cgroup", "/system.slice/x.service", "--pool", "gpu"});
  EXPECT_EQ(refused.exitCode(), 5);
  EXPECT_NE(refused.err.find("--gpu-memory-max"), std::string::npos) << refused.err;
  auto missing = tally({"lease", "show", "000000000000"});
  EXPECT_EQ(missing.exitCode(), 5);
  auto noDaemon = runProgram({TALLY_BINARY, "leases", "--socket", dir.path() + "/nowhere.sock"});
  EXPECT_EQ(noDaemon.exitCode(), 3);
  EXPECT_NE(noDaemon.err.find("is the daemon running?"), std::string::npos) << noDaemon.err;
  // A second daemon on the same socket refuses to take it over.
  auto second = runProgram(
      {TALLY_BINARY, "--cgroup-root", host.cgroupRoot(), "daemon", "--config", daemon->config()});
  EXPECT_EQ(second.exitCode(), 3);
  EXPECT_NE(second.err.find("another tally daemon answers"), std::string::npos) << second.err;
  auto stopped = daemon->stop();
  EXPECT_EQ(stopped.exitCode(), 0) << stopped.err;
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

using namespace tally::testing;

// tally attach --container: the engine's own CLI names the container (here
// scripts standing in for podman and docker, printing their inspect JSON);
// the daemon leases its whole cgroup under its name.
class ContainerLive : public DaemonLive {
 protected:
  // The id in the captured podman output.
  static constexpr const char* kId =
      "b6d73dc354ad63f3bc8c37851ae49bc4fcaa584ef1bf07ee711f27e59ebac82a";
  // An engine that knows one container, `name`, whose init is `pid`.
  void engine(const std::string& bin, const std::string& exe, const std::string& name, pid_t pid) {
    std::string said =
        readFile(std::string(TALLY_FIXTURE_DIR) + "/containers/podman-4.3.1-running.json");
    said.replace(said.find("\"Pid\": 245"), 10, "\"Pid\": " + std::to_string(pid));
    said.replace(said.find("\"Name\": \"comfyui\""), 17, "\"Name\": \"" + name + "\"");
    writeFile(bin + "/" + exe + ".json", said);
    writeFile(bin + "/" + exe, "#!/bin/sh\n[ \"$1 $2 $3\" = \"container inspect " + name +
                                   "\" ] && exec /bin/cat " + bin + "/" + exe +
                                   ".json\necho \"Error: no such container $3\" >&2\nexit 125\n");
    ASSERT_EQ(::chmod((bin + "/" + exe).c_str(), 0755), 0);
  }
  ProgramResult tallyWithPath(const std::string& path, std::vector<std::string> args) {
    args.insert(args.begin(), TALLY_BINARY);
    // Only the fake engines: the host's own podman or docker must not answer.
    return runProgram(args, {"TALLY_SOCKET=" + daemon->socket(), "PATH=" + path});
  }
  void container(pid_t pid) {
    std::string scope = std::string("/machine.slice/libpod-") + kId + ".scope";
    workload(scope, true);
    workload(scope + "/container", true);
    FakeProcess init;
    init.pid = pid;
    init.cgroup = scope + "/container";
    host.addProcess(init);
  }
};

TEST_F(ContainerLive, AttachByNameLeasesTheWholeContainerUnderItsName) {
  container(5010);
  std::string podman = dir.path() + "/podman-bin";
  makeDirs(podman);
  engine(podman, "podman", "comfyui", 5010);
  auto a = tallyWithPath(podman, {"attach", "--container", "comfyui", "--pool", "gpu",
                                  "--gpu-memory-max", "1G", "--json"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  json lease = json::parse(a.out);
  EXPECT_EQ(lease["name"], "comfyui");
  EXPECT_EQ(lease["cgroup"], std::string("/machine.slice/libpod-") + kId + ".scope");
  auto shown = json::parse(tally({"lease", "show", lease["lease"], "--json"}).out);
  EXPECT_EQ(shown["target"]["container"]["name"], "comfyui") << shown.dump(2);
  EXPECT_EQ(shown["target"]["container"]["engine"], "podman");
  // Unknown to the engine: refused with what it said and what to do.
  auto missing = tallyWithPath(podman, {"attach", "--container", "nope", "--engine", "podman",
                                        "--pool", "gpu", "--gpu-memory-max", "1G"});
  EXPECT_EQ(missing.exitCode(), 5);
  EXPECT_EQ(missing.err,
            "tally attach: no container 'nope' (podman: Error: no such container nope). A "
            "rootless container is seen only by its owner's engine: run tally as that user\n");
}

TEST_F(ContainerLive, WithoutPodmanDockerIsAsked) {
  container(6120);
  std::string docker = dir.path() + "/docker-bin";
  makeDirs(docker);
  engine(docker, "docker", "ollama", 6120);
  auto a = tallyWithPath(docker, {"attach", "--container", "ollama", "--pool", "gpu",
                                  "--gpu-memory-max", "1G", "--json"});
  ASSERT_EQ(a.exitCode(), 0) << a.err;
  EXPECT_EQ(json::parse(a.out)["name"], "ollama");
  auto none = tallyWithPath(dir.path() + "/empty", {"attach", "--container", "x", "--pool", "gpu"});
  EXPECT_EQ(none.exitCode(), 5);
  EXPECT_NE(none.err.find("(podman is not installed; docker is not installed)"), std::string::npos)
      << none.err;
}

}  // namespace
}  // namespace tally
