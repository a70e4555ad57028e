// The real `tally daemon` against the attacks of "the daemon survives every
// client", each as a local user would run it: the daemon answers every one
// with an error (or a closed connection) and is still the same process,
// answering `hello`, afterwards. Other users are forked children that drop
// to their uid (the socket is opened to them for the test only).
// Here the socket's and the metrics listener's attacks; the files the daemon
// reads and writes (config, ledger, directories): hostile_daemon_files_test.cpp.
#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "hostile_daemon_fixture.h"
#include "support/process.h"

namespace tally {
namespace {

using namespace tally::livehostile;

// Under AddressSanitizer the allocator keeps freed memory in quarantine and
// adds shadow memory: resident-set bounds are checked in the plain build only.
// (g++ says __SANITIZE_ADDRESS__, clang __has_feature.)
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssMeaningful = false;
#elif defined(__has_feature)
constexpr bool kRssMeaningful = !__has_feature(address_sanitizer);
#else
constexpr bool kRssMeaningful = true;
#endif

// A child process of another user holding connections to the daemon. It
// reports how many the daemon accepted (answered `hello`) on a pipe, then
// holds them until it is killed.
class OtherUser {
 public:
  OtherUser(const std::string& socket, uid_t uid, int connections) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      if (::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(2);
      std::vector<std::unique_ptr<Raw>> held;
      int accepted = 0;
      for (int i = 0; i < connections; ++i) {
        auto r = std::make_unique<Raw>(socket);
        if (!r->connected()) continue;
        json hello = r->call({{"v", 1}, {"id", i}, {"method", "hello"}});
        if (hello.value("ok", false)) ++accepted;
        held.push_back(std::move(r));
      }
      std::string out = std::to_string(accepted) + "\n";
      (void)!::write(fds[1], out.data(), out.size());
      ::pause();
      ::_exit(0);
    }
    ::close(fds[1]);
    char buf[32] = {};
    ssize_t n = ::read(fds[0], buf, sizeof buf - 1);  // the barrier: every connection is open
    ::close(fds[0]);
    accepted_ = n > 0 ? std::atoi(buf) : -1;
  }
  ~OtherUser() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  int accepted() const { return accepted_; }

 private:
  pid_t pid_ = -1;
  int accepted_ = -1;
};

// Why 1 and 8 of the issue, method by method: wrong types, missing and
// oversized fields. Never "internal", never a crash.
TEST_F(HostileDaemon, EveryMethodRefusesWrongMissingAndOversizedFields) {
  start();
  Raw r(daemon->socket());
  std::string big(100000, 'x');
  const std::vector<std::pair<std::string, json>> cases = {
      {"hello", {{"x", 1}}},
      {"acquire", json::object()},
      {"acquire", {{"pools", "one"}}},
      {"acquire", {{"pools", {big}}}},
      {"acquire",
       {{"pools", json::array({"one", "one", "one", "one", "one", "one", "one", "one", "one", "one",
                               "one", "one", "one", "one", "one", "one", "one"})}}},
      {"acquire", {{"pools", {"one"}}, {"memory_max", "8G"}}},
      {"acquire", {{"pools", {"one"}}, {"memory_max", -5}}},
      {"acquire", {{"pools", {"one"}}, {"priority", 1e300}}},
      {"acquire", {{"pools", {"one"}}, {"timeout_us", 18446744073709551615ULL}}},
      {"acquire", {{"pools", {"one"}}, {"name", big}}},
      {"acquire", {{"pools", {"one"}}, {"attributes", {{"model", big}}}}},
      {"acquire", {{"pools", {"one"}}, {"gpu_over_samples", 0}}},
      {"attach", {{"pools", {"one"}}}},
      {"attach", {{"pools", {"one"}}, {"cgroup", 7}}},
      {"attach", {{"pools", {"one"}}, {"cgroup", "/" + big}}},
      {"attach", {{"pools", {"one"}}, {"pid", -1}}},
      {"attach", {{"pools", {"one"}}, {"unit", "../../etc/passwd"}}},
      {"attach", {{"pools", {"one"}}, {"unit", "a.service"}, {"pid", 1}}},
      {"started", {{"lease", "abc"}}},
      {"started", {{"lease", 12}, {"cgroup", "/x"}}},
      {"started", {{"lease", "abc"}, {"cgroup", "x"}}},
      {"complete", {{"lease", "abc"}}},
      {"complete", {{"lease", "abc"}, {"record", {{"lease", {{"id", 7}}}}}}},
      {"complete",
       {{"lease", "abc"}, {"record", {{"lease", {{"id", "abc"}}}, {"outcome", {{"class", 3}}}}}}},
      {"complete",
       {{"lease", "abc"},
        {"record",
         {{"lease", {{"id", "abc"}}}, {"outcome", {{"class", "exited"}}}, {"daemon", 1}}}}},
      {"bound", {{"lease", "abc"}, {"event", {{"kind", 5}}}}},
      {"bound", {{"lease", "abc"}, {"event", "kill"}}},
      {"bound", {{"lease", "abc"}}},
      {"resume", json::object()},
      {"release", {{"lease", json::array()}}},
      {"cancel", {{"lease", big}}},
      {"lease", {{"lease", "../x"}}},
      {"leases", {{"all", true}}},
      {"pools", {{"pool", "one"}}},
      {"subscribe", {{"to", "all"}}},
      {"seats", {{"x", 1}}},
      {"overview", {{"x", 1}}},
      {"metrics", {{"format", "json"}}},
  };
  for (const auto& [method, params] : cases) {
    json reply = r.call({{"v", 1}, {"id", 1}, {"method", method}, {"params", params}});
    ASSERT_TRUE(reply.is_object()) << method << " " << params.dump().substr(0, 200);
    EXPECT_FALSE(reply.value("ok", true)) << method << " " << params.dump().substr(0, 200);
    EXPECT_EQ(reply["error"]["code"], "invalid-params")
        << method << " " << params.dump().substr(0, 200) << " -> " << reply;
  }
  stillServing();
}

// Why 2: nesting 80,000 deep, six times (it used to take the daemon down each time).
TEST_F(HostileDaemon, DeepNestingIsRefusedBeforeParsing) {
  start();
  Raw r(daemon->socket());
  std::string deep = "{\"id\":" + std::string(160 * 1024, '[') + "\n";
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(r.send(deep));
    json e = r.line();
    EXPECT_EQ(e["error"]["code"], "too-deep") << e;
  }
  stillServing();
}

// Why 3: 4,000 acquires in one write on one connection against a capacity-1
// pool. The connection gets 64 places; the rest are refused "busy"; `hello`
// from others stays fast throughout.
TEST_F(HostileDaemon, AQueueFloodIsCappedAndHelloStaysFast) {
  start();
  Raw flood(daemon->socket());
  std::string lines;
  for (int i = 0; i < 4000; ++i) {
    lines += json({{"v", 1}, {"id", i}, {"method", "acquire"}, {"params", {{"pools", {"one"}}}}})
                 .dump() +
             "\n";
  }
  std::atomic<int> granted{0}, queued{0}, busy{0}, other{0};
  std::thread reader([&] {
    for (;;) {
      json m = flood.line(10000);
      if (m.is_null()) return;
      if (m.value("event", "") == "queued")
        ++queued;
      else if (m.value("ok", false))
        ++granted;
      else if (m["error"]["code"] == "busy")
        ++busy;
      else
        ++other;
      if (granted + busy >= 3936) return;
    }
  });
  ASSERT_TRUE(flood.send(lines));
  double worst = 0;
  std::string all;
  for (int i = 0; i < 20; ++i) {
    double ms = helloMs();
    all += fmt::format(" {:.1f}", ms);
    worst = std::max(worst, ms);
  }
  std::fprintf(stderr, "hello during the flood (ms):%s (worst %.1f)\n", all.c_str(), worst);
  reader.join();
  EXPECT_EQ(granted.load(), 1);
  EXPECT_EQ(queued.load(), 64);
  EXPECT_EQ(busy.load(), 4000 - 1 - 64);
  EXPECT_EQ(other.load(), 0);
  // Every hello was answered during the flood (helloMs asserts each); how
  // fast is the benchmark's to measure (bench/), never a threshold here.
  stillServing();
}

// Why 3, at scale: 10,000 requests waiting (160 connections x 64) keep
// `hello` under 100 ms (docs/PERFORMANCE.md records the figures).
TEST_F(HostileDaemon, TenThousandQueuedRequestsKeepHelloUnder100ms) {
  start();
  Raw holder(daemon->socket());
  ASSERT_TRUE(holder.call(
      {{"v", 1}, {"id", 0}, {"method", "acquire"}, {"params", {{"pools", {"one"}}}}})["ok"]);
  std::vector<std::unique_ptr<Raw>> waiters;
  // With attributes: 10,240 of them once made every listing reply pass the
  // 4 MiB a reply may be, for every user.
  json attrs = json::object();
  for (int k = 0; k < 4; ++k) attrs[fmt::format("note{}", k)] = std::string(200, 'x');
  for (int c = 0; c < 160; ++c) {
    auto w = std::make_unique<Raw>(daemon->socket());
    std::string lines;
    for (int i = 0; i < 64; ++i)
      lines += json({{"v", 1},
                     {"id", i},
                     {"method", "acquire"},
                     {"params", {{"pools", {"one"}}, {"attributes", attrs}}}})
                   .dump() +
               "\n";
    ASSERT_TRUE(w->send(lines));
    // The barrier: this connection's 64th request is queued.
    int seen = 0;
    while (seen < 64) {
      json m = w->line();
      ASSERT_EQ(m.value("event", ""), "queued") << m;
      ++seen;
    }
    waiters.push_back(std::move(w));
  }
  Raw admin(daemon->socket());
  json pools = admin.call({{"v", 1}, {"id", 1}, {"method", "pools"}});
  ASSERT_EQ(pools["result"]["pools"][0]["queue_length"], 10240u);
  EXPECT_EQ(pools["result"]["pools"][0]["queue"].size(), 256u);  // the next 256, in grant order
  // Every listing still answers, whoever asks.
  for (const char* method : {"leases", "seats", "overview", "metrics"}) {
    json r = admin.call({{"v", 1}, {"id", 2}, {"method", method}});
    EXPECT_TRUE(r.value("ok", false)) << method << ": " << r.dump().substr(0, 300);
    if (r.contains("result") && r["result"].contains("queued")) {
      EXPECT_EQ(r["result"]["queued"], json({{"total", 10240}, {"listed", 256}})) << method;
    }
  }
  std::vector<double> ms;
  for (int i = 0; i < 50; ++i) ms.push_back(helloMs());
  std::sort(ms.begin(), ms.end());
  // Printed, not asserted: speed is for the benchmark (docs/PERFORMANCE.md);
  // what this asserts is that every one of them is answered.
  std::fprintf(stderr, "hello with 10240 queued: median %.2f ms, max %.2f ms (50 calls)\n", ms[25],
               ms.back());
  // Releasing the holder moves all 10,240: the first is granted, every other hears its new place.
  auto t = Clock::now();
  json rel = holder.call({{"v", 1},
                          {"id", 9},
                          {"method", "release"},
                          {"params", {{"lease", pools["result"]["pools"][0]["holders"][0]}}}});
  EXPECT_TRUE(rel.value("ok", false)) << rel;
  std::fprintf(stderr, "release with 10240 queued answered in %.2f ms\n", msSince(t));
  stillServing();
}

// Why 4: one user's 1,024 idle connections. That user gets its 64; root and
// everyone else still connect; idle ones are closed after idle_timeout.
TEST_F(HostileDaemon, IdleConnectionsLockNobodyOut) {
  start("idle_timeout = \"2s\"\n");
  ASSERT_EQ(::chmod(daemon->socket().c_str(), 0666), 0);  // other users, for this test only
  {
    OtherUser flood(daemon->socket(), 1000, 1024);
    EXPECT_EQ(flood.accepted(), 64);
    OtherUser another(daemon->socket(), 1001, 3);
    EXPECT_EQ(another.accepted(), 3);
    stillServing();  // root
    auto pools = runProgram({TALLY_BINARY, "pools", "--socket", daemon->socket()});
    EXPECT_EQ(pools.exitCode(), 0) << pools.err;
  }
  // A connection holding nothing is closed after idle_timeout, and says why.
  Raw idle(daemon->socket());
  ASSERT_TRUE(idle.connected());
  auto t = Clock::now();
  json bye = idle.line(5000);
  EXPECT_EQ(bye["error"]["code"], "timeout") << bye;
  EXPECT_TRUE(idle.closedWithin(2000));
  EXPECT_GT(msSince(t), 1500.0);
  // One holding a lease is not idle.
  Raw holder(daemon->socket());
  ASSERT_TRUE(holder.call(
      {{"v", 1}, {"id", 1}, {"method", "acquire"}, {"params", {{"pools", {"one"}}}}})["ok"]);
  EXPECT_TRUE(holder.line(3500).is_null());  // nothing arrived: not closed
  EXPECT_TRUE(holder.call({{"v", 1}, {"id", 2}, {"method", "hello"}})["ok"]);
}

// Why 10: 1,000 slow connections each trickling a request line, and clients
// that ask for metrics and never read: the daemon's memory stays bounded,
// slow lines are cut off after request_timeout.
TEST_F(HostileDaemon, SlowAndNonReadingClientsCannotGrowTheDaemon) {
  start("request_timeout = \"2s\"\n");
  std::uint64_t before = residentBytes(pid);
  {
    std::vector<std::unique_ptr<Raw>> slow;
    std::string partial = "{\"v\":1,\"id\":1,\"method\":\"hello\",\"params\":{\"pad\":\"" +
                          std::string(200 * 1024, 'x');
    for (int i = 0; i < 1000; ++i) {
      auto r = std::make_unique<Raw>(daemon->socket());
      if (!r->connected()) break;
      (void)r->send(partial);
      slow.push_back(std::move(r));
    }
    stillServing();
    std::uint64_t during = residentBytes(pid);
    std::fprintf(stderr, "RSS before %.1f MiB, with 1000 slow connections %.1f MiB\n",
                 static_cast<double>(before) / 1048576.0, static_cast<double>(during) / 1048576.0);
    if (kRssMeaningful) {
      EXPECT_LT(during, before + (48ULL << 20));
    }
    // After request_timeout every one of them is closed.
    for (auto& r : slow) EXPECT_TRUE(r->closedWithin(5000));
  }
  {
    std::vector<std::unique_ptr<Raw>> deaf;
    std::string asks;
    for (int i = 0; i < 2000; ++i)
      asks += json({{"v", 1}, {"id", i}, {"method", "metrics"}}).dump() + "\n";
    for (int i = 0; i < 132; ++i) {
      auto r = std::make_unique<Raw>(daemon->socket());
      ::fcntl(r->fd(), F_SETFL, O_NONBLOCK);
      (void)!::send(r->fd(), asks.data(), asks.size(),
                    MSG_NOSIGNAL);  // as much as the socket takes; never read
      deaf.push_back(std::move(r));
    }
    stillServing();
    std::uint64_t during = residentBytes(pid);
    std::fprintf(stderr, "RSS with 132 clients asking for metrics and never reading: %.1f MiB\n",
                 static_cast<double>(during) / 1048576.0);
    if (kRssMeaningful) {
      EXPECT_LT(during, before + (48ULL << 20));
    }
  }
  stillServing();
}

// Why 6: 40 (and 100) slow HTTP clients hold connections; a scrape is served within 1 s.
TEST_F(HostileDaemon, SlowHttpClientsDoNotStarveAScrape) {
  start("metrics_listen = \"127.0.0.1:0\"\n");
  std::string port = metricsPort();
  ASSERT_FALSE(port.empty()) << daemon->log();
  // Its audience, said at start: without metrics_allow_users, every local user.
  EXPECT_NE(daemon->log().find("(every local user can read every lease's name, attributes and "
                               "figures there"),
            std::string::npos)
      << daemon->log();
  for (int slowCount : {40, 100}) {
    std::vector<int> slow;
    for (int i = 0; i < slowCount; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(port)));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
      (void)!::send(fd, "GET /met", 8, MSG_NOSIGNAL);  // and never the rest
      slow.push_back(fd);
    }
    httplib::Client http("127.0.0.1", std::stoi(port));
    http.set_connection_timeout(2, 0);
    http.set_read_timeout(2, 0);
    auto t = Clock::now();
    auto res = http.Get("/metrics");
    double took = msSince(t);
    // Answered while every slow client still holds its half head: the
    // scrape is never queued behind them (the client's own 2 s timeout is
    // the bound on the event, not a speed figure).
    ASSERT_TRUE(res) << httplib::to_string(res.error()) << " with " << slowCount << " slow clients";
    EXPECT_EQ(res->status, 200);
    EXPECT_NE(res->body.find("tally_"), std::string::npos);
    std::fprintf(stderr, "a scrape beside %d slow clients: %.1f ms\n", slowCount, took);
    for (int fd : slow) ::close(fd);
  }
  stillServing();
}

// A loopback metrics_listen served every local user what the socket's
// group withholds: its audience is said at start, and metrics_allow_users
// lets only root and the users it names read, each peer named by the
// kernel's socket table (sock_diag), decided before a byte is read.
TEST_F(HostileDaemon, TheMetricsListenersAudienceIsSaidAndCanBeRestricted) {
  start("metrics_listen = \"127.0.0.1:0\"\nmetrics_allow_users = [\"12345\"]\n");
  std::string port = metricsPort();
  ASSERT_FALSE(port.empty()) << daemon->log();
  EXPECT_NE(daemon->log().find("(root and 12345 only: daemon.metrics_allow_users)"),
            std::string::npos)
      << daemon->log();
  // Root reads them.
  httplib::Client http("127.0.0.1", std::stoi(port));
  http.set_read_timeout(5, 0);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // Another user is refused, named.
  auto asUser = [&](uid_t uid) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    pid_t child = ::fork();
    if (child == 0) {
      ::close(out[0]);
      if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(2);
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(port)));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(3);
      const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
      (void)!::send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0)
        (void)!::write(out[1], buf, static_cast<size_t>(n));
      ::_exit(0);
    }
    ::close(out[1]);
    std::string got;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    return got;
  };
  std::string refused = asUser(65534);
  EXPECT_EQ(refused.rfind("HTTP/1.1 403 Forbidden", 0), 0u) << refused;
  EXPECT_NE(refused.find("uid 65534 may not read tally's metrics (daemon.metrics_allow_users)"),
            std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("tally_"), std::string::npos) << "not one metric";
  std::string allowed = asUser(12345);
  EXPECT_EQ(allowed.rfind("HTTP/1.1 200", 0), 0u) << allowed.substr(0, 200);
  stillServing();
}

}  // namespace
}  // namespace tally
