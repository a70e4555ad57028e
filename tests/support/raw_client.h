// A raw connection to the daemon's socket: bytes out, lines in, no client
// library in between (what a hostile or careless peer does).
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace tally::testing {

class Raw {
 public:
  explicit Raw(const std::string& path);
  ~Raw();
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  // Everything, blocking; false if the peer closed.
  bool send(const std::string& bytes);
  // The next line as JSON, or null after `timeoutMs` or at EOF.
  nlohmann::json line(int timeoutMs = 5000);
  nlohmann::json call(const nlohmann::json& req) {
    send(req.dump() + "\n");
    return line();
  }
  // True once the daemon closed the connection (EOF within `timeoutMs`),
  // the lines before it discarded.
  bool closedWithin(int timeoutMs);

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

// Polls `done` every 10 ms until it holds or `timeout` passes; true if it held.
// For conditions the test can observe (a ledger row, a reply), never to let time pass.
bool eventually(const std::function<bool()>& done,
                std::chrono::milliseconds timeout = std::chrono::seconds(10));

// The resident set of a process in bytes (VmRSS), 0 if unreadable.
std::uint64_t residentBytes(int pid);

}  // namespace tally::testing
