// The load suite's fixture (VmLoad): its users and group made for the suite,
// a daemon per test as production runs it, the root's probes (hellos,
// every page of the listings, the CLIs) run during an attack, and the
// figures printed as `[ bench ]` lines. Shared by load_test.cpp and
// load_tree_ledger_test.cpp; the attackers: load_attack.h. VM harness only.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "load_attack.h"
#include "support/fake_host.h"
#include "support/process.h"

namespace tally::vmload {

struct Spread {
  double p50 = 0, p99 = 0, worst = 0;
  std::size_t n = 0;
};
inline Spread spread(std::vector<double> ms) {
  if (ms.empty()) return {};
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[static_cast<std::size_t>(q * static_cast<double>(ms.size() - 1))];
  };
  return {at(0.5), at(0.99), ms.back(), ms.size()};
}

class VmLoad : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
        << "these tests need the VM harness: vm/run.sh -- tally_vm_tests";
    const char* ko = std::getenv("TALLY_TESTDRM_KO");
    ASSERT_NE(ko, nullptr);
    // A GPU host's kernel has the DRM core: the kernel charge loads as it would there.
    if (::access("/sys/module/tally_testdrm", F_OK) != 0) {
      ASSERT_EQ(shell("modprobe drm && insmod " + std::string(ko)), 0);
    }
    // The suite's own group and users, made here and removed at its end. Any
    // earlier holder of a name goes first (the VM's root is the host's,
    // overlaid and thrown away), so the users are in this group and no other.
    users_.clear();
    for (const char* who : kUsers) shell("userdel -f " + kGroup + "-" + who + " 2>/dev/null");
    shell("groupdel " + kGroup + " 2>/dev/null");
    ASSERT_EQ(shell("groupadd " + kGroup), 0);
    for (const char* who : kUsers) {
      std::string name = kGroup + "-" + who;
      ASSERT_EQ(shell(fmt::format("useradd -M -N -g {1} -s /usr/sbin/nologin {0}", name, kGroup)),
                0);
      const passwd* pw = ::getpwnam(name.c_str());
      ASSERT_NE(pw, nullptr) << name;
      users_.push_back({name, pw->pw_uid, pw->pw_gid});
    }
  }
  static void TearDownTestSuite() {
    for (const char* who : kUsers) {
      EXPECT_EQ(shell("userdel " + kGroup + "-" + who), 0) << kGroup << "-" << who;
    }
    EXPECT_EQ(shell("groupdel " + kGroup), 0) << kGroup;
  }
  void SetUp() override {
    started_ = lastPhase_ = Clock::now();
    name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = "/tmp/vml-" + name_;
    shell("rm -rf " + dir_);
    makeDirs(dir_);
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // the socket's directory: users reach it
    socket_ = dir_ + "/tally.sock";
    config_ = dir_ + "/tally.toml";
    state_ = dir_ + "/state";
    int n = counter_++;
    unit_ = fmt::format("tally-load-{}-{}.service", ::getpid(), n);
    top_ = fmt::format("/tally-load-{}-{}", ::getpid(), n);
    topDir_ = "/sys/fs/cgroup" + top_;
    ASSERT_EQ(::mkdir(topDir_.c_str(), 0755), 0) << topDir_;
    writeFile(topDir_ + "/cgroup.subtree_control", "+memory");
  }
  void TearDown() override {
    phase("test");
    shell("systemctl stop " + unit_ + " 2>/dev/null; systemctl reset-failed " + unit_ +
          " 2>/dev/null");
    phase("stop");
    for (pid_t p : sleepers_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    // The killed processes leave their cgroups as they are reaped: removed
    // once empty, so no tree of this test is left to the next.
    EXPECT_TRUE(eventually(
        [&] {
          shell("find " + topDir_ + " -depth -type d -exec rmdir {} + 2>/dev/null");
          return ::access(topDir_.c_str(), F_OK) != 0;
        },
        30s))
        << topDir_ << " is left";
    shell("rm -rf " + dir_);
    phase("cleanup");
    std::printf("[ bench ] VmLoad.%s took %.1f s (%s)\n", name_.c_str(), msSince(started_) / 1000.0,
                phases_.c_str());
    std::fflush(stdout);
  }

  // Where a test's time went, said with its duration: "start 2.9 s, ...".
  void phase(const char* what) {
    auto now = Clock::now();
    phases_ += fmt::format("{}{} {:.1f} s", phases_.empty() ? "" : ", ", what,
                           std::chrono::duration<double>(now - lastPhase_).count());
    lastPhase_ = now;
  }

  static const User& userA() { return users_[0]; }
  static const User& userB() { return users_[1]; }
  static const User& bystander() { return users_[2]; }

  void writeConfig(const std::string& extra) {
    writeFile(config_, fmt::format("[daemon]\nsocket = \"{}\"\nsocket_group = \"{}\"\nstate_dir = "
                                   "\"{}\"\nsample_interval = \"200ms\"\n{}\n"
                                   "[pools.load]\ncapacity = 100000\n",
                                   socket_, kGroup, state_, extra));
  }
  // As production runs it: Type=notify (systemd-run returns at READY=1), the
  // shipped unit's WatchdogSec=30s, and a restart that would show in NRestarts.
  void startDaemon() {
    ASSERT_EQ(shell("systemd-run --quiet --unit=" + unit_ +
                    " -p Type=notify -p WatchdogSec=30s -p Restart=always -p RestartSec=300ms " +
                    kTally + " daemon --config " + config_),
              0);
    mainPid_ = shellOut("systemctl show -p MainPID --value " + unit_);
    ASSERT_NE(mainPid_, "0");
    phase("start");
  }
  // The watchdog held through the attack: no restart, the same process, and
  // systemd never said the watchdog fired.
  void expectWatchdogHeld() {
    EXPECT_EQ(shellOut("systemctl show -p NRestarts --value " + unit_), "0");
    EXPECT_EQ(shellOut("systemctl show -p MainPID --value " + unit_), mainPid_);
    EXPECT_EQ(shellOut("systemctl show -p ActiveState --value " + unit_), "active");
    std::string journal;
    // The unit's journal is there to read (journald took the daemon's start).
    EXPECT_TRUE(eventually(
        [&] {
          journal = shellOut("journalctl --no-pager -o cat -u " + unit_);
          return !journal.empty();
        },
        10s))
        << "no journal for " << unit_;
    EXPECT_EQ(journal.find("Watchdog timeout"), std::string::npos) << journal;
  }

  // Root's hello, `n` times on `c`: each answered within kAnswerMs; the
  // latencies (ms) go to `into`.
  // They are sent 20 ms apart (or at once when the last took longer): a
  // hello arrives whatever the loop is doing, as a client's would, not only
  // in the gaps a hello sent right after the last one finds.
  void hellos(Conn& c, int n, std::vector<double>& into) {
    const auto first = Clock::now();
    for (int i = 0; i < n; ++i) {
      std::this_thread::sleep_until(first + i * 20ms);  // pacing, not ordering
      auto t = Clock::now();
      auto r = c.call("hello");
      double ms = msSince(t);
      ASSERT_TRUE(r) << "hello not answered within " << kAnswerMs << " ms (call " << i << ")";
      ASSERT_TRUE(r->msg.value("ok", false)) << r->msg;
      EXPECT_EQ(std::to_string(r->msg["result"].value("daemon_pid", 0)), mainPid_);
      into.push_back(ms);
    }
  }
  // Every page of `method` (leases, seats) as root asks it: each reply
  // answered, under the 4 MiB cap, and the pages together list every live lease.
  std::size_t everyPage(Conn& c, const std::string& method) {
    std::size_t listed = 0, live = 0, pages = 0;
    json after;
    do {
      json params = {{"limit", 512}};
      if (after.is_string()) params["after"] = after;
      auto r = c.call(method, params);
      EXPECT_TRUE(r) << method << " page " << pages << " not answered within " << kAnswerMs
                     << " ms";
      if (!r) return listed;
      EXPECT_TRUE(r->msg.value("ok", false)) << method << ": " << r->msg.dump().substr(0, 300);
      EXPECT_LT(r->bytes, kReplyCap) << method;
      biggestReply_ = std::max(biggestReply_, r->bytes);
      const json& page = r->msg["result"]["page"];
      listed += page.value("listed", std::size_t{0});
      live = page.value("live", std::size_t{0});
      after = page.contains("next") ? page["next"] : json();
      ++pages;
    } while (after.is_string() && pages < 100);
    EXPECT_EQ(listed, live) << method << ": the pages list every live lease";
    return live;
  }
  // Root's listings: every page of leases and seats, the overview, the metrics.
  void listings(Conn& c, std::size_t liveAtLeast) {
    EXPECT_GE(everyPage(c, "leases"), liveAtLeast);
    EXPECT_GE(everyPage(c, "seats"), liveAtLeast);
    for (const char* method : {"overview", "metrics", "pools"}) {
      auto r = c.call(method);
      ASSERT_TRUE(r) << method << " not answered within " << kAnswerMs << " ms";
      EXPECT_TRUE(r->msg.value("ok", false)) << method << ": " << r->msg.dump().substr(0, 300);
      EXPECT_LT(r->bytes, kReplyCap) << method;
      biggestReply_ = std::max(biggestReply_, r->bytes);
    }
  }
  // The CLIs as people run them: root's `tally leases` and `tally metrics`
  // (every page, --timeout 10s), and the bystander's `tally leases`. (Root's
  // seats are paged above, through the socket.)
  void clis(std::size_t liveAtLeast) {
    std::vector<std::string> env = {"TALLY_SOCKET=" + socket_};
    auto l = runProgram({kTally, "leases", "--json", "--timeout", "10s"}, env);
    EXPECT_EQ(l.exitCode(), 0) << l.err;
    json listed = json::parse(l.out, nullptr, false);
    EXPECT_TRUE(listed.is_array() && listed.size() >= liveAtLeast) << l.out.substr(0, 300);
    auto m = runProgram({kTally, "metrics", "--timeout", "10s"}, env);
    EXPECT_EQ(m.exitCode(), 0) << m.err;
    EXPECT_NE(m.out.find("tally_leases_live"), std::string::npos) << m.out.substr(0, 300);
    const User& c = bystander();
    auto theirs =
        runProgram({"setpriv", "--reuid", std::to_string(c.uid), "--regid", std::to_string(c.gid),
                    "--clear-groups", kTally, "leases", "--json", "--timeout", "10s"},
                   env);
    EXPECT_EQ(theirs.exitCode(), 0) << c.name << ": " << theirs.err;
    json rows = json::parse(theirs.out, nullptr, false);
    EXPECT_TRUE(rows.is_array() && rows.size() >= liveAtLeast) << theirs.out.substr(0, 300);
  }

  // A process of `user` (root when null) in cgroup `cgDir` that does nothing
  // until killed: what makes a cgroup populated. Root moves it there, then
  // it drops to the user; returned once it is there.
  pid_t sleeper(const std::string& cgDir, const User* user = nullptr) {
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) return -1;
    std::fflush(nullptr);
    pid_t p = ::fork();
    if (p == 0) {
      keepOnly({ready[1]});
      std::string me = std::to_string(::getpid());
      int fd = ::open((cgDir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, me.data(), me.size()) != static_cast<ssize_t>(me.size()))
        ::_exit(3);
      ::close(fd);
      if (user && !dropTo(*user)) ::_exit(2);
      (void)!::write(ready[1], "r", 1);
      ::close(ready[1]);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char c;
    bool there = ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
    if (!there) {
      ::waitpid(p, nullptr, 0);
      return -1;
    }
    sleepers_.push_back(p);
    return p;
  }
  // Root's lease on a cgroup of its own with a process in it: its samples
  // show the daemon's sampling went on during an attack.
  std::string witness() {
    std::string cg = topDir_ + "/witness";
    EXPECT_EQ(::mkdir(cg.c_str(), 0755), 0);
    EXPECT_GT(sleeper(cg), 0);
    Conn root(socket_);
    auto r = root.call("attach", {{"pools", {"load"}},
                                  {"cgroup", top_ + "/witness"},
                                  {"name", "witness"},
                                  {"no_wait", true}});
    EXPECT_TRUE(r && r->msg.value("ok", false)) << (r ? r->msg.dump() : "no answer");
    return r ? r->msg["result"].value("lease", "") : "";
  }
  // A live lease's sample count, as root reads it.
  std::uint64_t samplesOf(const std::string& lease) {
    Conn root(socket_);
    auto r = root.call("lease", {{"lease", lease}, {"live", true}});
    if (!r || !r->msg.value("ok", false)) return 0;
    return r->msg["result"]["memory"].value("samples", std::uint64_t{0});
  }
  // Until each attacker is under way: the test's barrier before it probes.
  void awaitAttacks(std::vector<Attacker*> attackers) {
    for (auto* a : attackers) ASSERT_TRUE(a->awaitReady(120s)) << "an attack never got under way";
  }
  // Root probes while the attack runs: rounds of 40 hellos and every
  // listing; the CLIs (root's and the bystander's) once. The attackers are
  // still attacking when it ends (the attack spanned every probe).
  void probeUnderAttack(std::vector<Attacker*> attackers, std::size_t liveAtLeast,
                        std::vector<double>& under, int rounds = 3) {
    phase("setup");
    Conn root(socket_);
    ASSERT_TRUE(root.connected());
    for (int r = 0; r < rounds; ++r) {
      ASSERT_NO_FATAL_FAILURE(hellos(root, 40, under));
      ASSERT_NO_FATAL_FAILURE(listings(root, liveAtLeast));
      if (r == 0) {
        phase("probes");
        clis(liveAtLeast);
        phase("CLIs");
      }
    }
    phase("probes");
    for (auto* a : attackers) EXPECT_TRUE(a->running()) << "an attack ended before the probes";
  }
  void expectChainIntact() {
    auto v = runProgram({kTally, "ledger", "verify", "--config", config_});
    EXPECT_EQ(v.exitCode(), 0) << v.out << v.err;
  }
  void figures(const std::string& attack, const std::vector<double>& idleMs,
               const std::vector<double>& underMs, const std::string& notes) {
    Spread idle = spread(idleMs), under = spread(underMs);
    std::printf(
        "[ bench ] VmLoad %s: root's hello idle p50 %.2f ms, p99 %.2f ms, worst %.2f ms (%zu "
        "calls); under the attack p50 %.2f ms (%.1fx idle), p99 %.2f ms (%.1fx), worst %.2f ms "
        "(%zu calls); biggest listing reply %.0f KiB\n",
        attack.c_str(), idle.p50, idle.p99, idle.worst, idle.n, under.p50, under.p50 / idle.p50,
        under.p99, under.p99 / idle.p99, under.worst, under.n,
        static_cast<double>(biggestReply_) / 1024.0);
    if (!notes.empty()) std::printf("[ bench ] VmLoad %s: %s\n", attack.c_str(), notes.c_str());
    std::fflush(stdout);
  }
  // A user's directory in the test's cgroup tree, hers as a delegated
  // cgroup is (the directory and its interface files), the memory
  // controller on for the cgroups she makes in it.
  std::string delegate(const User& u) {
    std::string d = topDir_ + "/" + u.name;
    EXPECT_EQ(::mkdir(d.c_str(), 0755), 0);
    writeFile(d + "/cgroup.subtree_control", "+memory");
    EXPECT_EQ(shell(fmt::format("chown {}:{} {} {}/cgroup.procs {}/cgroup.subtree_control "
                                "{}/cgroup.threads",
                                u.uid, u.gid, d, d, d, d)),
              0);
    return d;
  }

  // The query budget of the listing and history attacks: the daemon's
  // defaults. A count alone (20 a second) did not see a query's cost: under
  // TCG (10-50x slower than native) a chart of the history lease costs the
  // daemon tens of ms, and two users at 20 a second were never refused (root's
  // hello p50 0.84 s under the history attack; docs/PERFORMANCE.md). The loop
  // time each read took is budgeted too now (query_time_per_second_per_uid,
  // 100 ms a second), which scales with the machine by itself.
  // TALLY_VM_LOAD_QPS sets the count instead (then a refusal is not
  // required, only that any names a query budget).
  static std::string queryBudgetText() {
    const char* v = std::getenv("TALLY_VM_LOAD_QPS");
    return v ? fmt::format("queries_per_second_per_uid = {}", v)
             : "the default query budgets (20 a second, 100 ms of the loop a second)";
  }
  static std::string queryBudget() {
    const char* v = std::getenv("TALLY_VM_LOAD_QPS");
    return v ? fmt::format("queries_per_second_per_uid = {}\n", std::strtol(v, nullptr, 10)) : "";
  }
  static void expectRefusedForQueries(const json& r, const char* counts, const char* message) {
    if (!std::getenv("TALLY_VM_LOAD_QPS")) {
      EXPECT_GT(r[counts].value("rate-limited", 0), 0) << r;
    }
    if (r[counts].empty()) return;
    EXPECT_EQ(r[counts].size(), 1u) << "refused for the query budget only: " << r;
    const std::string why = r.value(message, "");
    EXPECT_TRUE(why.find("(queries_per_second_per_uid)") != std::string::npos ||
                why.find("(query_time_per_second_per_uid)") != std::string::npos)
        << r;
  }

  static inline std::vector<User> users_;
  static inline int counter_ = 0;
  Clock::time_point started_, lastPhase_;
  std::string phases_;
  std::string name_, dir_, socket_, config_, state_, unit_, top_, topDir_, mainPid_;
  std::vector<pid_t> sleepers_;
  std::size_t biggestReply_ = 0;
};

}  // namespace tally::vmload
