// Load on `tally daemon` (docs/PERFORMANCE.md, "Daemon"): acquire+release
// round trips per second over the socket (against hello round trips in the
// same run), and the daemon's RSS and CPU with 8 attached leases sampled at
// 1 Hz on a host with 1,000 extra processes, and with QUEUED (10,000) queued
// requests: their cost, and `hello` latency against the same daemon idle.
//
//   tally_daemon_load TALLY_BINARY [SECONDS=60] [PROCS=1000] [QUEUED=1000]
//                     [ROUNDTRIPS=2000] [PER_LEASE=16]
//
// The leases' cgroups are a synthetic tree (this host has no cgroup v2 memory
// controller) whose cgroup.procs list real processes, so every sample reads
// real /proc/<pid>/fd and fdinfo; /proc and /sys are the live ones.
//
// TALLY_LOAD_KERNEL_CHARGE=on|off sets the daemon's `kernel_charge` (default:
// the daemon's default). With it on, where the programs load (the VM harness:
// a charged GPU device, BTF, bpffs), the leases are metered from the in-kernel
// charge and fdinfo is walked only every 10th sample; the line "GPU source"
// says which meter the leases had.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_client.h"
#include "rpc/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using tally::bench::connectRetry;
using tally::rpc::Client;
using json = nlohmann::json;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// CPU time of a process in ns, from /proc/<pid>/schedstat (the scheduler's
// own sum, ns resolution): utime + stime tick at 100 Hz, too coarse for a
// daemon that uses a fraction of a percent.
unsigned long long cpuNs(pid_t pid) {
  std::istringstream in(slurp(fmt::format("/proc/{}/schedstat", pid)));
  unsigned long long ns = 0;
  in >> ns;
  return ns;
}

std::string statusKb(pid_t pid, const char* key) {
  std::istringstream in(slurp(fmt::format("/proc/{}/status", pid)));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto v = line.substr(std::string(key).size());
      while (!v.empty() && (v[0] == ' ' || v[0] == '\t')) v.erase(0, 1);
      return v;
    }
  }
  return "?";
}

double rssMiB(pid_t pid, const char* key = "VmRSS:") {
  return std::stod(statusKb(pid, key)) / 1024.0;
}

tally::rpc::api::Acquire acquire(const char* pool) {
  tally::rpc::api::Acquire a;
  a.declared.pools = {pool};
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TALLY_BINARY [SECONDS] [PROCS] [QUEUED] [ROUNDTRIPS]\n",
                 argv[0]);
    return 2;
  }
  std::string tally = argv[1];
  int seconds = argc > 2 ? std::atoi(argv[2]) : 60;
  int procs = argc > 3 ? std::atoi(argv[3]) : 1000;
  int queued = argc > 4 ? std::atoi(argv[4]) : 1000;
  int roundtrips = argc > 5 ? std::atoi(argv[5]) : 2000;
  const int perLease = argc > 6 ? std::atoi(argv[6]) : 16;
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  std::string kernelCharge;
  if (const char* kc = std::getenv("TALLY_LOAD_KERNEL_CHARGE"))
    kernelCharge = fmt::format("kernel_charge = {}\n", std::string(kc) == "on");
  char tmpl[] = "/tmp/tally-load.XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string sock = dir + "/tally.sock", cg = dir + "/cgroup";
  write(
      dir + "/tally.toml",
      fmt::format("[daemon]\nsocket = \"{}\"\nstate_dir = \"{}/state\"\nsample_interval = \"1s\"\n"
                  // The control connection holds nothing while the leases are sampled
                  // (attached leases live on without their client): without this the
                  // daemon's idle_timeout (60 s) would close it mid-run.
                  "idle_timeout = \"1h\"\n{}"
                  "[pools.bench]\ncapacity = 1000000\n[pools.one]\ncapacity = 1\n"
                  "[pools.leases]\ncapacity = 8\n",
                  sock, dir, kernelCharge));

  // The 1,000-process host: sleepers of ours.
  std::vector<pid_t> sleepers;
  for (int i = 0; i < procs; ++i) {
    pid_t p = ::fork();
    if (p == 0) {
      ::pause();
      ::_exit(0);
    }
    sleepers.push_back(p);
  }
  // 8 lease cgroups, PER_LEASE real processes each.
  const int leases = 8;
  for (int l = 0; l < leases; ++l) {
    std::string d = fmt::format("{}/load.slice/lease{}.service", cg, l);
    std::filesystem::create_directories(d);
    std::string pids;
    for (int k = 0; k < perLease && l * perLease + k < procs; ++k)
      pids += fmt::format("{}\n", sleepers[static_cast<std::size_t>(l * perLease + k)]);
    write(d + "/cgroup.procs", pids);
    write(d + "/cgroup.events", "populated 1\nfrozen 0\n");
    write(d + "/memory.current", "104857600\n");
    write(d + "/memory.stat", "anon 104857600\nfile 0\n");
    write(d + "/memory.events", "oom 0\noom_kill 0\n");
    write(d + "/memory.max", "max\n");
    write(d + "/memory.peak", "104857600\n");
  }

  pid_t daemon = ::fork();
  if (daemon == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execl(tally.c_str(), tally.c_str(), "--cgroup-root", cg.c_str(), "daemon", "--config",
            (dir + "/tally.toml").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  Client c = connectRetry(sock);
  // The socket accepts before the daemon has finished starting (loading and
  // attaching the BPF programs among it); its first answer comes after.
  if (auto h = c.call(tally::rpc::api::Hello{}); !h || !h->ok)
    return std::fprintf(stderr, "the daemon did not answer hello\n"), 1;
  double idleRss = rssMiB(daemon);
  // 0. Idle: no lease, no request, the loop's own timers only.
  unsigned long long idle0 = cpuNs(daemon);
  auto tIdle = Clock::now();
  ::sleep(static_cast<unsigned>(seconds / 3 > 0 ? seconds / 3 : 1));
  double idleCpuPct =
      100.0 * static_cast<double>(cpuNs(daemon) - idle0) / 1e9 / secondsSince(tIdle);

  // 1. Round trips: hello (the floor) and acquire+release (3 fsync'd ledger rows).
  auto t0 = Clock::now();
  for (int i = 0; i < roundtrips; ++i) (void)c.call(tally::rpc::api::Hello{});
  double helloPerSec = roundtrips / secondsSince(t0);
  t0 = Clock::now();
  for (int i = 0; i < roundtrips; ++i) {
    auto m = c.call(acquire("bench"));
    if (!m || !m->ok) return std::fprintf(stderr, "acquire failed\n"), 1;
    (void)c.call(tally::rpc::api::Release{{m->result["lease"].get<std::string>()}});
  }
  double acqPerSec = roundtrips / secondsSince(t0);
  double afterRoundtripsRss = rssMiB(daemon);

  // 2. 8 attached leases, sampled at 1 Hz for SECONDS.
  for (int l = 0; l < leases; ++l) {
    tally::rpc::api::Attach a;
    a.declared.pools = {"leases"};
    a.target.cgroup = fmt::format("/load.slice/lease{}.service", l);
    auto m = c.call(a);
    if (!m || !m->ok)
      return std::fprintf(stderr, "attach failed: %s\n",
                          m ? m->error.message.c_str() : m.error().message.c_str()),
             1;
  }
  ::sleep(2);
  unsigned long long cpu0 = cpuNs(daemon);
  t0 = Clock::now();
  ::sleep(static_cast<unsigned>(seconds));
  double window = secondsSince(t0);
  double cpuPct = 100.0 * static_cast<double>(cpuNs(daemon) - cpu0) / 1e9 / window;
  double leasesRss = rssMiB(daemon);
  double leasesAnon = rssMiB(daemon, "RssAnon:");
  auto shown = c.call(tally::rpc::api::ListLeases{});
  std::uint64_t samplesPerLease =
      shown && shown->ok && !shown->result["leases"].empty()
          ? shown->result["leases"][0]["memory"]["samples"].get<std::uint64_t>()
          : 0;
  std::string gpuSource = shown && shown->ok && !shown->result["leases"].empty()
                              ? shown->result["leases"][0]["gpu"].value("source", "?")
                              : "?";

  if (samplesPerLease == 0)
    return std::fprintf(stderr, "the leases were never sampled: no CPU figure to report\n"), 1;

  // Hello latency on this daemon with nothing queued: the baseline for the queued figure.
  auto helloLatencies = [&](int n) {
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
      auto t = Clock::now();
      auto m = c.call(tally::rpc::api::Hello{});
      ms.push_back(secondsSince(t) * 1000.0);
      if (!m || !m->ok) {
        std::fprintf(stderr,
                     "hello failed: the figures would be the failure's, not the daemon's\n");
        std::exit(1);
      }
    }
    std::sort(ms.begin(), ms.end());
    return ms;
  };
  auto baseHello = helloLatencies(200);

  // 3. QUEUED requests on a capacity-1 pool: 64 per connection (the
  // per-connection limit), each connection's requests sent in one write.
  auto holder = c.call(acquire("one"));
  std::vector<Client> waiters;
  int perConn = 64;
  waiters.reserve(static_cast<std::size_t>(queued / perConn + 1));
  t0 = Clock::now();
  for (int sent = 0; sent < queued; sent += perConn) {
    waiters.push_back(connectRetry(sock));
    std::string lines;
    for (int i = 0; i < perConn && sent + i < queued; ++i)
      lines += tally::rpc::encodeRequest(i, "acquire", {{"pools", {"one"}}});
    (void)!::write(waiters.back().fd(), lines.data(), lines.size());
    // The "queued" events are the answers; drained so the daemon never waits on us.
    for (int i = 0; i < perConn && sent + i < queued; ++i) (void)waiters.back().next(10'000);
  }
  json leasesNow;
  bool allQueued = false;
  for (int i = 0; i < 400 && !allQueued; ++i) {
    auto l = c.call(tally::rpc::api::ListPools{});
    allQueued =
        l && l->ok && l->result["pools"][1]["queue"].size() == static_cast<std::size_t>(queued);
    if (!allQueued) ::usleep(25'000);
  }
  if (!allQueued) return std::fprintf(stderr, "the %d requests never all queued\n", queued), 1;
  double enqueueSec = secondsSince(t0);
  auto queuedHello = helloLatencies(200);
  unsigned long long cpuQ0 = cpuNs(daemon);
  t0 = Clock::now();
  ::sleep(10);
  double qWindow = secondsSince(t0);
  double queuedCpuPct = 100.0 * static_cast<double>(cpuNs(daemon) - cpuQ0) / 1e9 / qWindow;
  double queuedRss = rssMiB(daemon);
  double hwm = rssMiB(daemon, "VmHWM:");
  // Releasing the holder moves every waiter up one place: one grant, QUEUED-1 position events.
  t0 = Clock::now();
  if (holder && holder->ok)
    (void)c.call(tally::rpc::api::Release{{holder->result["lease"].get<std::string>()}});
  double releaseMs = secondsSince(t0) * 1000.0;

  fmt::print(
      "daemon load ({} extra processes, {} leases x {} processes, {} s at 1 Hz, {} queued)\n",
      procs, leases, perLease, seconds, queued);
  fmt::print("  hello round trips/s            {:10.0f}\n", helloPerSec);
  fmt::print(
      "  acquire+release round trips/s  {:10.0f}  ({:.2f}x hello; 3 ledger rows each, "
      "synchronous=FULL)\n",
      acqPerSec, acqPerSec / helloPerSec);
  fmt::print("  CPU idle (no lease)            {:10.3f} % of one core\n", idleCpuPct);
  fmt::print("  RSS idle                       {:10.1f} MiB\n", idleRss);
  fmt::print("  RSS after {} round trips     {:10.1f} MiB\n", roundtrips, afterRoundtripsRss);
  fmt::print("  CPU with 8 leases at 1 Hz      {:10.3f} % of one core ({} samples per lease)\n",
             cpuPct, samplesPerLease);
  fmt::print("  RSS with 8 leases              {:10.1f} MiB (private RssAnon {:.1f} MiB)\n",
             leasesRss, leasesAnon);
  fmt::print("  GPU source of the leases       {}\n", gpuSource);
  fmt::print("  enqueue {} requests          {:10.2f} s ({} connections x {})\n", queued,
             enqueueSec, waiters.size(), perConn);
  fmt::print(
      "  hello, nothing queued          median {:.3f} ms, p99 {:.3f} ms, max {:.3f} ms (200 "
      "calls)\n",
      baseHello[100], baseHello[197], baseHello.back());
  fmt::print(
      "  hello, {} queued            median {:.3f} ms, p99 {:.3f} ms, max {:.3f} ms (200 calls; "
      "{:.2f}x the median above)\n",
      queued, queuedHello[100], queuedHello[197], queuedHello.back(),
      queuedHello[100] / baseHello[100]);
  fmt::print("  release with {} queued        {:10.1f} ms (one grant, {} position events)\n",
             queued, releaseMs, queued - 1);
  fmt::print("  CPU with 8 leases + {} queued {:9.3f} % of one core\n", queued, queuedCpuPct);
  fmt::print(
      "  RSS with 8 leases + {} queued {:9.1f} MiB (peak VmHWM {:.1f} MiB; private RssAnon {:.1f} "
      "MiB, the rest is shared library text)\n",
      queued, queuedRss, hwm, rssMiB(daemon, "RssAnon:"));

  waiters.clear();
  ::kill(daemon, SIGTERM);
  ::waitpid(daemon, nullptr, 0);
  for (pid_t p : sleepers) ::kill(p, SIGKILL);
  for (pid_t p : sleepers) ::waitpid(p, nullptr, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
