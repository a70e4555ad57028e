// The load suite's attackers (load_test.cpp, load_tree_ledger_test.cpp): the
// users they run as, a connection to the daemon's socket read as lines with
// their sizes (Conn), and a forked child of the test that drops to a user's
// uid, attacks and reports back as JSON (Attacker). VM harness only.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "support/fake_host.h"
#include "support/raw_client.h"

namespace tally::vmload {

using json = nlohmann::json;
using namespace tally::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline const std::string kTally = TALLY_BINARY;
// Every probe's answer within this: a liveness bound tied to the watchdog
// (a third of its 30 s), not a speed.
inline constexpr int kAnswerMs = 10'000;
// An attacker's own wait for a reply: her requests are answered too, later.
inline constexpr int kAttackerMs = 60'000;
inline constexpr std::size_t kReplyCap = 4u << 20;  // what one reply may be (docs/daemon.md)
inline const std::string kGroup = "tally-load";     // also the users' prefix: tally-load-a, -b, -c
inline constexpr const char* kUsers[] = {"a", "b", "c"};

inline double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct User {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The user's uid, and the socket's group as hers (primary and supplementary,
// as a login gives a member of the group): what a user of the box runs as.
inline bool dropTo(const User& u) {
  return ::setgroups(1, &u.gid) == 0 && ::setresgid(u.gid, u.gid, u.gid) == 0 &&
         ::setresuid(u.uid, u.uid, u.uid) == 0;
}

// A forked child keeps only the descriptors it was handed: another child's
// pipe end held here would keep that child from seeing the test's "stop".
inline void keepOnly(std::initializer_list<int> keep) {
  for (int fd = 3; fd < 1024; ++fd) {
    if (std::find(keep.begin(), keep.end(), fd) == keep.end()) ::close(fd);
  }
}

inline std::string request(std::int64_t id, const std::string& method,
                           const json& params = json::object()) {
  return json{{"v", 1}, {"id", id}, {"method", method}, {"params", params}}.dump() + "\n";
}

inline std::string codeOf(const json& m) {
  if (m.is_object() && m.contains("error") && m["error"].is_object())
    return m["error"].value("code", "?");
  return "";
}

// One connection to the daemon's socket, as bytes: requests written back to
// back (pipelined), replies read as lines with their size.
class Conn {
 public:
  // Connected and written as testing::Raw does; read here, where the
  // attackers need what Raw does not keep: sizes, and long replies unparsed.
  explicit Conn(const std::string& path) : raw_(path), fd_(raw_.fd()) {}
  bool connected() const { return raw_.connected(); }
  bool send(const std::string& bytes) { return raw_.send(bytes); }
  // The next line as text (its newline cut); nullopt after `timeoutMs`
  // without a whole line (0: only what has arrived), or once the daemon
  // closed the connection (closed()).
  std::optional<std::string> text(int timeoutMs) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
    for (;;) {
      auto nl = buf_.find('\n', std::max(head_, scanned_));
      if (nl != std::string::npos) {
        std::string l = buf_.substr(head_, nl - head_);
        head_ = nl + 1;
        if (head_ >= buf_.size() / 2) {  // what was read goes, now and then: no quadratic copying
          buf_.erase(0, head_);
          head_ = 0;
        }
        scanned_ = head_;
        return l;
      }
      scanned_ = buf_.size();
      if (closed_) return std::nullopt;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0))) <= 0)
        return std::nullopt;
      char chunk[1 << 16];
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        closed_ = true;
        return std::nullopt;
      }
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  bool closed() const { return closed_; }
  int fd() const { return fd_; }
  // The next line (an event or a reply) parsed, and its size. `shallow`: a
  // long reply whose head says ok is not parsed (an attacker's CPU is the
  // daemon's in a VM of two vCPUs; she has no use for the listing).
  struct Line {
    json msg;
    std::size_t bytes = 0;
  };
  std::optional<Line> line(int timeoutMs, bool shallow = false) {
    auto t = text(timeoutMs);
    if (!t) return std::nullopt;
    Line l;
    l.bytes = t->size() + 1;
    if (shallow && t->size() > 4096 && t->find("\"ok\":true") < 64)  // {"id":N,"ok":true,...
      l.msg = {{"ok", true}};
    else
      l.msg = json::parse(*t, nullptr, false);
    return l;
  }
  // The next reply (events before it skipped).
  std::optional<Line> reply(int timeoutMs, bool shallow = false) {
    for (;;) {
      auto l = line(timeoutMs, shallow);
      if (!l || !l->msg.is_object() || !l->msg.contains("event")) return l;
    }
  }
  std::optional<Line> call(const std::string& method, const json& params = json::object(),
                           int timeoutMs = kAnswerMs) {
    if (!send(request(++id_, method, params))) return std::nullopt;
    return reply(timeoutMs);
  }

 private:
  Raw raw_;
  int fd_;
  bool closed_ = false;
  std::string buf_;
  std::size_t head_ = 0, scanned_ = 0;  // buf_ before head_ was read; no newline before scanned_
  std::int64_t id_ = 0;
};

// What a run of replies on one connection came to: answered, refused by
// code (the last refusal's message kept), the biggest reply.
struct Replies {
  int answered = 0;
  std::map<std::string, int> refused;
  std::string refusal;
  std::size_t biggest = 0;
  // The next `n` replies on `c`, counted; false once one does not come.
  bool read(Conn& c, int n, bool shallow) {
    for (int i = 0; i < n; ++i) {
      auto r = c.reply(kAttackerMs, shallow);
      if (!r) return false;
      biggest = std::max(biggest, r->bytes);
      if (r->msg.value("ok", false)) {
        ++answered;
      } else {
        ++refused[codeOf(r->msg)];
        refusal = r->msg["error"].value("message", "");
      }
    }
    return true;
  }
};

// An attacker: a forked child of the test running as `user`. It says when
// its attack is under way (ready), sees when the test says stop, and hands
// back a JSON report. No gtest in the child: it reports, the test asserts.
class Attacker {
 public:
  class Signals {
   public:
    Signals(int readyFd, int stopFd) : readyFd_(readyFd), stopFd_(stopFd) {}
    void ready() {
      if (readyFd_ < 0) return;
      (void)!::write(readyFd_, "r", 1);
      ::close(readyFd_);
      readyFd_ = -1;
    }
    // The test closed its end of the stop pipe.
    bool stopped() const {
      pollfd p{stopFd_, POLLIN, 0};
      return ::poll(&p, 1, 0) > 0;
    }

   private:
    int readyFd_, stopFd_;
  };
  using Body = std::function<json(Signals&)>;

  Attacker(const User& user, const Body& body) {
    int ready[2], stop[2], report[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(stop, O_CLOEXEC) != 0 ||
        ::pipe2(report, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2");
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      keepOnly({ready[1], stop[0], report[1]});
      if (!dropTo(user)) ::_exit(2);
      json out;
      try {
        Signals s(ready[1], stop[0]);
        out = body(s);
      } catch (const std::exception& e) {
        out = {{"error", e.what()}};
      }
      std::string text = out.dump();
      std::size_t off = 0;
      while (off < text.size()) {
        ssize_t n = ::write(report[1], text.data() + off, text.size() - off);
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(stop[0]);
    ::close(report[1]);
    ready_ = ready[0];
    stop_ = stop[1];
    report_ = report[0];
  }
  ~Attacker() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : {ready_, stop_, report_})
      if (fd >= 0) ::close(fd);
  }
  Attacker(const Attacker&) = delete;
  Attacker& operator=(const Attacker&) = delete;

  // The barrier: the child said its attack is under way (false: it ended first).
  bool awaitReady(std::chrono::milliseconds timeout) {
    pollfd p{ready_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char c;
    return ::read(ready_, &c, 1) == 1;
  }
  bool running() {
    if (reaped_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
    reaped_ = true;
    return false;
  }
  // Says stop, and waits for the report (the child checks between batches).
  json finish() {
    if (stop_ >= 0) ::close(stop_);
    stop_ = -1;
    std::string text;
    char buf[4096];
    for (;;) {
      pollfd p{report_, POLLIN, 0};
      if (::poll(&p, 1, 180'000) <= 0) break;
      ssize_t n = ::read(report_, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    if (!reaped_) {
      ::kill(pid_, SIGKILL);  // it has reported (or hung): nothing of it is needed any more
      ::waitpid(pid_, nullptr, 0);
      reaped_ = true;
    }
    json j = json::parse(text, nullptr, false);
    return j.is_object() ? j : json{{"error", "no report: " + text.substr(0, 200)}};
  }

 private:
  pid_t pid_ = -1;
  int ready_ = -1, stop_ = -1, report_ = -1;
  bool reaped_ = false;
};

}  // namespace tally::vmload
