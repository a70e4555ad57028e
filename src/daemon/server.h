// `tally daemon`'s event loop: one sd-event loop for the RPC socket, the
// timers (sampling, housekeeping, retention), inotify watches on lease
// cgroups' cgroup.events, the systemd bus and the stop signals. No thread
// per lease or per client. Under systemd it speaks Type=notify (READY,
// STATUS, WATCHDOG via sd-event's own watchdog support).
//
// No client can stop it or starve the others (daemon/limits.h): connections
// are capped in total and per uid with slots only root may use; a request
// line must arrive whole in time; a connection that holds nothing is closed
// when idle; a client that does not read its replies is not read from, then
// dropped; each connection gets a fixed share of lines per turn of the loop.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "config/config.h"
#include "daemon/dispatch.h"
#include "daemon/limits.h"
#include "daemon/seams.h"
#include "daemon/service.h"
#include "rpc/protocol.h"
#include "util/unique_fd.h"

namespace tally::daemon {

// The limits a config sets (the rest keep their defaults).
Limits limitsFromConfig(const config::Daemon& d);

class Server final : public Outbox, public Watches {
 public:
  explicit Server(const config::Config& cfg, Limits limits = {});
  ~Server() override;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket (mode 0660) and sets the loop up; errors name the fix.
  Status listen();
  // Runs until SIGTERM/SIGINT. `service` must outlive the call.
  int run(Service& service);
  sd_event* event() const { return event_; }
  // Called after every sample round (the metrics textfile and HTTP snapshot).
  void afterSample(std::function<void()> fn) { afterSample_ = std::move(fn); }
  // Called on SIGHUP, in the loop (a config reload); none: SIGHUP stops the
  // daemon as SIGTERM does.
  void onHangup(std::function<void()> fn) { hangup_ = std::move(fn); }

  bool send(std::uint64_t conn, std::string line) override;
  void wantTurn() override;
  std::size_t backlog(std::uint64_t conn) const override;
  Status watch(const std::string& leaseId, const std::string& path) override;
  bool watchPid(const std::string& leaseId, pid_t pid) override;
  void unwatch(const std::string& leaseId) override;

 private:
  struct Conn;
  struct WatchCtx;
  static int onAccept(sd_event_source* s, int fd, uint32_t revents, void* self);
  static int onConn(sd_event_source* s, int fd, uint32_t revents, void* conn);
  static int onTimer(sd_event_source* s, uint64_t usec, void* self);
  static int onPending(sd_event_source* s, void* self);
  static int onTurnEnd(sd_event_source* s, void* self);
  static int onInotify(sd_event_source* s, const struct inotify_event* ev, void* ctx);
  static int onPidfd(sd_event_source* s, int fd, uint32_t revents, void* ctx);
  bool admit(const Peer& peer, int fd);
  // Closes a connection. The service hears of it at once, or (`later`) on
  // the next turn of the loop: a send() the service made must not re-enter
  // the service while it iterates its own leases.
  void closeConn(std::uint64_t id, bool later = false);
  void closeWith(std::uint64_t id, const char* code, const std::string& message);
  void readFrom(Conn& c);
  // Handles up to Limits::linesPerTurn complete lines; false if the conn is gone.
  bool handleLines(Conn& c);
  void flush(Conn& c);
  void updateInterest(Conn& c);
  void sweep();  // timeouts: partial lines, idle connections; once a second from the tick
  void notifyStatus();

  config::Config cfg_;
  Limits limits_;
  sd_event* event_ = nullptr;
  UniqueFd listenFd_;
  sd_event_source* listenSrc_ = nullptr;
  sd_event_source* sampleTimer_ = nullptr;
  sd_event_source* tickTimer_ = nullptr;
  sd_event_source* pruneTimer_ = nullptr;
  sd_event_source* pendingSrc_ = nullptr;
  sd_event_source* turnEndSrc_ = nullptr;  // post: Service::endOfTurn
  Service* service_ = nullptr;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::map<uid_t, std::size_t> connsPerUid_;
  // Connections with complete lines not yet handled, served round-robin one
  // connection's share per turn of the loop (so reads and accepts come between).
  std::deque<std::uint64_t> pending_;
  std::set<std::uint64_t> inPending_;
  std::uint64_t lastSweepUs_ = 0;
  bool background_ = false;  // the service has work in slices (Service::backgroundWork)
  std::vector<std::uint64_t> goneLater_;  // closed during a send; the service is told next turn
  void markPending(std::uint64_t id);
  std::size_t inputBytes_ = 0;  // partial request lines held, all connections
  std::multimap<std::string, std::unique_ptr<WatchCtx>> watches_;
  std::map<std::string, std::unique_ptr<WatchCtx>> pidWatches_;
  std::uint64_t nextConn_ = 1;
  std::string lastStatus_;
  std::function<void()> afterSample_;
  std::function<void()> hangup_;
  static int onHangupSignal(sd_event_source*, const struct signalfd_siginfo*, void* self);
};

}  // namespace tally::daemon
