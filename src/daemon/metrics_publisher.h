// Where the daemon's metrics go besides `tally metrics`: a node_exporter
// textfile, replaced atomically after every sample round, and GET /metrics
// on a loopback address, served from the daemon's own event loop from the
// last published snapshot.
//
// Both face other users. The textfile's directory is often writable by a
// group (node_exporter's), so the daemon, often root, never writes through a
// name someone else could have put there: the directory is checked and
// opened once, the temporary is created O_CREAT|O_EXCL|O_NOFOLLOW under a
// random name, and renamed over the real one inside that open directory.
// The HTTP side never blocks and never waits on a client: a request head
// must arrive within a second, connections are capped, and when the cap is
// reached the oldest connection still sending its head makes room, so slow
// clients cannot keep a scrape out.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "config/listen_address.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace tally::daemon {

using config::ListenAddress;
using config::parseListenAddress;

class Textfile {
 public:
  // Checks the directory (fs::checkTrustedDir, sticky allowed) and opens it.
  static Result<Textfile> open(const std::string& path);
  // PATH.<random>.tmp, written, fsynced, mode 0644, renamed over PATH: a
  // reader (node_exporter) sees the old file or the new one, never half.
  // An exposition over kMaxBytes is refused (the old file stays): a 21.5 MB
  // textfile once was rewritten every second.
  Status write(std::string_view text) const;
  static constexpr std::size_t kMaxBytes = 4u << 20;
  const std::string& path() const { return path_; }

 private:
  Textfile(UniqueFd dir, std::string path, std::string name)
      : dir_(std::move(dir)), path_(std::move(path)), name_(std::move(name)) {}
  UniqueFd dir_;
  std::string path_, name_;
};

struct HttpLimits {
  std::size_t maxConnections = 64;
  std::uint64_t headTimeoutUs = 1'000'000;   // the request head must arrive in this
  std::uint64_t writeTimeoutUs = 5'000'000;  // and the reply be taken in this
  // Who may read (daemon.metrics_allow_users, resolved at start; root
  // always): each connection's peer is named by the kernel's socket table
  // (metrics/peer_uid.h) and anyone else is answered 403. None: every local
  // user who reaches the address, as for the textfile's readers.
  std::optional<std::set<uid_t>> allowUids;
};

class MetricsHttp {
 public:
  // Binds (errors name the address and the fix) and serves on `event`.
  static Result<std::unique_ptr<MetricsHttp>> start(sd_event* event, const ListenAddress& at,
                                                    HttpLimits limits = {});
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;
  void publish(std::string text) { text_ = std::move(text); }
  std::uint16_t port() const { return port_; }
  std::size_t connections() const { return conns_.size(); }
  // Connections answered 403 (HttpLimits::allowUids).
  std::uint64_t refused() const { return refused_; }

 private:
  struct Conn;
  MetricsHttp(sd_event* event, HttpLimits limits);
  static int onAccept(sd_event_source* s, int fd, uint32_t revents, void* self);
  static int onConn(sd_event_source* s, int fd, uint32_t revents, void* conn);
  static int onSweep(sd_event_source* s, uint64_t usec, void* self);
  void answer(Conn& c);
  void flush(Conn& c);
  void drop(Conn& c);

  sd_event* event_;
  HttpLimits limits_;
  UniqueFd listenFd_;
  sd_event_source* listenSrc_ = nullptr;
  sd_event_source* sweepSrc_ = nullptr;
  std::list<std::unique_ptr<Conn>> conns_;  // oldest first
  std::uint16_t port_ = 0;
  std::string text_;
  std::uint64_t refused_ = 0;
};

}  // namespace tally::daemon
