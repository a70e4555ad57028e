// What two ordinary users can do to `tally daemon`'s answers for everyone
// else (docs/PERFORMANCE.md, "Two users' attacks, natively"): root's
// `hello` latency (p50, p99, worst) while two non-root users, members of
// the socket's group, run each attack of issue 48, against the same daemon
// idle in the same run. Ratios, not wall-clock thresholds.
//
//   tally_daemon_attacks TALLY_BINARY [ROWS=6000] [HELLOS=2000]
//   TALLY_ATTACKS_UNBUDGETED=1 tally_daemon_attacks ...   (the budgets out of reach)
//
// Attacks, each alone, each by uids 65534 and 65533 (group nogroup):
//   replay    64 connections each subscribing from the ledger's first row
//             (ROWS rows: root's acquire+release cycles before the attack)
//   history   1,024 pipelined `lease` queries for a lease with ROWS/3 rows
//   listings  256 leases each (max_leases_per_uid), then `leases`, `seats`,
//             `overview`, `metrics` pipelined in a loop
// Each attack's refusals are counted by their error code. Run as root (the
// attackers are forked and drop to their uids); /tmp holds the daemon.
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "daemon_client.h"
#include "rpc/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using tally::bench::connectRetry;
using tally::rpc::Client;
using json = nlohmann::json;

// A raw connection for pipelining: requests written back to back, replies
// read (and discarded) as they come.
int rawConnect(const std::string& sock) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

std::string request(int id, const char* method, const json& params) {
  return json{{"v", 1}, {"id", id}, {"method", method}, {"params", params}}.dump() + "\n";
}

// Reads what the daemon sends until it has sent `lines` lines or closed;
// counts error codes.
void drain(int fd, std::size_t lines, std::map<std::string, int>& codes) {
  std::string buf;
  char chunk[65536];
  std::size_t seen = 0;
  while (seen < lines) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    std::size_t at;
    while ((at = buf.find('\n')) != std::string::npos) {
      json j = json::parse(buf.substr(0, at), nullptr, false);
      buf.erase(0, at + 1);
      ++seen;
      if (j.is_object() && j.contains("error") && j["error"].is_object())
        ++codes[j["error"].value("code", "?")];
    }
  }
}

std::string slurp(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  char buf[4096];
  ssize_t n;
  while (fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<std::size_t>(n));
  if (fd >= 0) ::close(fd);
  return out;
}

struct Latency {
  double p50 = 0, p99 = 0, worst = 0;
};

Latency hellos(Client& c, int n) {
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    auto m = c.call(tally::rpc::api::Hello{}, {}, 60'000);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    if (!m || !m->ok) std::fprintf(stderr, "hello failed\n");
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[static_cast<std::size_t>(q * static_cast<double>(ms.size() - 1))];
  };
  return {at(0.5), at(0.99), ms.back()};
}

// Forks an attacker as `uid` (group nogroup); it runs `attack` and exits,
// writing its refusal counts to `report`.
pid_t attacker(uid_t uid, gid_t gid, const std::string& report,
               const std::function<void(std::map<std::string, int>&)>& attack) {
  pid_t p = ::fork();
  if (p != 0) return p;
  if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 ||
      ::setresuid(uid, uid, uid) != 0)
    ::_exit(2);
  std::map<std::string, int> codes;
  attack(codes);
  std::string out;
  for (const auto& [k, v] : codes) out += fmt::format("{}={} ", k, v);
  std::ofstream(report) << out;
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TALLY_BINARY [ROWS] [HELLOS]\n", argv[0]);
    return 2;
  }
  std::string tally = argv[1];
  const int rows = argc > 2 ? std::atoi(argv[2]) : 6000;
  const int n = argc > 3 ? std::atoi(argv[3]) : 2000;
  group* nogroup = ::getgrnam("nogroup");
  if (!nogroup) return std::fprintf(stderr, "no group nogroup\n"), 1;
  const gid_t gid = nogroup->gr_gid;
  char tmpl[] = "/tmp/tally-attacks.XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0755);
  std::string sock = dir + "/run/tally.sock";
  ::mkdir((dir + "/run").c_str(), 01777);
  ::chmod((dir + "/run").c_str(), 01777);
  // TALLY_ATTACKS_UNBUDGETED=1: the per-user budgets set out of reach, so
  // the same run shows what they buy (the replay's slices stay).
  const bool unbudgeted = std::getenv("TALLY_ATTACKS_UNBUDGETED") != nullptr;
  std::ofstream(dir + "/tally.toml") << fmt::format(
      "[daemon]\nsocket = \"{}\"\nsocket_group = \"nogroup\"\nstate_dir = \"{}/state\"\n"
      "idle_timeout = \"1h\"\n{}[pools.bench]\ncapacity = 1000000\n",
      sock, dir,
      unbudgeted ? "queries_per_second_per_uid = 1000000\nmax_replays_per_uid = 1000\n" : "");
  pid_t daemon = ::fork();
  if (daemon == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execl(tally.c_str(), tally.c_str(), "daemon", "--config", (dir + "/tally.toml").c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  Client root = connectRetry(sock);
  if (auto h = root.call(tally::rpc::api::Hello{}); !h || !h->ok)
    return std::fprintf(stderr, "the daemon did not answer hello\n"), 1;
  // The ledger's history: root's cycles (3 rows each), one lease with many rows.
  std::string longLived;
  for (int i = 0; i < rows / 3; ++i) {
    tally::rpc::api::Acquire a;
    a.declared.pools = {"bench"};
    auto m = root.call(a);
    if (!m || !m->ok) return std::fprintf(stderr, "acquire failed\n"), 1;
    std::string id = m->result["lease"];
    if (longLived.empty()) {
      longLived = id;
      continue;
    }
    (void)root.call(tally::rpc::api::Release{{id}});
  }
  Latency idle = hellos(root, n);
  fmt::print(
      "hello, idle daemon ({} rows in the ledger): p50 {:.3f} ms, p99 {:.3f} ms, worst "
      "{:.3f} ms\n",
      rows, idle.p50, idle.p99, idle.worst);

  struct Attack {
    const char* name;
    std::function<void(std::map<std::string, int>&)> run;
  };
  std::vector<Attack> attacks = {
      {"replay: 64 subscribers from the first row, per user",
       [&](std::map<std::string, int>& codes) {
         std::vector<int> fds;
         for (int i = 0; i < 64; ++i) {
           int fd = rawConnect(sock);
           if (fd < 0) continue;
           std::string r = request(i, "subscribe", {{"after_seq", 0}});
           (void)!::write(fd, r.data(), r.size());
           fds.push_back(fd);
         }
         for (int fd : fds) drain(fd, 1, codes);  // the replies; replays go on behind them
         ::sleep(3);
       }},
      {"history: 1,024 pipelined `lease` queries, per user",
       [&](std::map<std::string, int>& codes) {
         int fd = rawConnect(sock);
         std::string all;
         for (int i = 0; i < 1024; ++i) all += request(i, "lease", {{"lease", longLived}});
         (void)!::write(fd, all.data(), all.size());
         drain(fd, 1024, codes);
       }},
      {"listings: 256 leases each, then leases/seats/overview/metrics pipelined x200",
       [&](std::map<std::string, int>& codes) {
         int fd = rawConnect(sock);
         std::string all;
         for (int i = 0; i < 256; ++i)
           all +=
               request(i, "acquire",
                       {{"pools", {"bench"}}, {"attributes", {{"model", std::string(200, 'm')}}}});
         (void)!::write(fd, all.data(), all.size());
         drain(fd, 256, codes);
         all.clear();
         for (int i = 0; i < 200; ++i)
           for (const char* m : {"leases", "seats", "overview", "metrics"})
             all += request(1000 + i, m, json::object());
         (void)!::write(fd, all.data(), all.size());
         drain(fd, 800, codes);
       }},
  };
  int status = 0;
  for (const auto& attack : attacks) {
    std::string ra = dir + "/run/a.txt", rb = dir + "/run/b.txt";  // theirs to write
    pid_t a = attacker(65534, gid, ra, attack.run);
    pid_t b = attacker(65533, gid, rb, attack.run);
    ::usleep(200'000);  // the attack under way
    Latency under = hellos(root, n);
    ::waitpid(a, &status, 0);
    ::waitpid(b, &status, 0);
    std::string ca = slurp(ra), cb = slurp(rb);
    fmt::print(
        "{}\n  hello under it: p50 {:.3f} ms ({:.1f}x idle), p99 {:.3f} ms ({:.1f}x), worst "
        "{:.3f} ms\n  refused: uid 65534 {}; uid 65533 {}\n",
        attack.name, under.p50, under.p50 / idle.p50, under.p99, under.p99 / idle.p99, under.worst,
        ca.empty() ? "none" : ca, cb.empty() ? "none" : cb);
    std::fflush(stdout);
  }
  ::kill(daemon, SIGTERM);
  ::waitpid(daemon, &status, 0);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
