// The fixture of the live hostile suites (HostileDaemon): a real tally
// daemon on a synthetic host, started with the test's extra [daemon] keys,
// asked `hello` to show it still serves as the same process. Shared by
// hostile_daemon_test.cpp and hostile_daemon_files_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/daemon.h"
#include "support/fake_host.h"
#include "support/raw_client.h"

namespace tally::livehostile {

using namespace tally::testing;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
inline constexpr std::uint64_t GiB = 1ULL << 30;

inline double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

class HostileDaemon : public ::testing::Test {
 protected:
  // The port the daemon's metrics listener took (metrics_listen = "127.0.0.1:0"),
  // as its log says; "" when it never said.
  std::string metricsPort() {
    std::string port;
    eventually([&] {
      std::string log = daemon->log();
      auto at = log.find("metrics on http://127.0.0.1:");
      if (at == std::string::npos) return false;
      port = log.substr(at + 28, log.find('/', at + 28) - at - 28);
      return true;
    });
    return port;
  }
  void start(const std::string& extraDaemonKeys = "") {
    host.setMemAvailable(64 * GiB);
    makeDirs(host.cgroupRoot());
    daemon = std::make_unique<DaemonUnderTest>(
        dir.path(),
        "sample_interval = \"100ms\"\nclient_grace = \"1s\"\n" + extraDaemonKeys +
            "[pools.one]\ncapacity = 1\n[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"96GiB\"\n",
        std::vector<std::string>{"--proc-root", host.procRoot(), "--sys-root", host.sysRoot(),
                                 "--cgroup-root", host.cgroupRoot()});
    ASSERT_TRUE(daemon->start());
    pid = daemon->pid();
  }
  // `hello` from a fresh connection, from the daemon that started: its pid.
  // Liveness, not speed: the daemon answers at all (a minute's grace: under
  // ASan on a busy 2-core machine a flood's backlog took over 5 s to drain).
  void stillServing() {
    Raw r(daemon->socket());
    ASSERT_TRUE(r.connected());
    ASSERT_TRUE(r.send(json({{"v", 1}, {"id", 1}, {"method", "hello"}}).dump() + "\n"));
    json h = r.line(60'000);
    ASSERT_TRUE(h.value("ok", false)) << h;
    EXPECT_EQ(h["result"]["daemon_pid"], pid);
  }
  double helloMs() {
    Raw r(daemon->socket());
    auto t = Clock::now();
    json h = r.call({{"v", 1}, {"id", 1}, {"method", "hello"}});
    EXPECT_TRUE(h.value("ok", false)) << h;
    return msSince(t);
  }

  FakeHost host;
  TempDir dir;
  std::unique_ptr<DaemonUnderTest> daemon;
  int pid = 0;
};

}  // namespace tally::livehostile
