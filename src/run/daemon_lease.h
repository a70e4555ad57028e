// `tally run --pool`: the lease comes from the daemon. The client waits in
// the queue (showing its position), runs the scope exactly as standalone
// `tally run` does, tells the daemon where the lease lives (it meters it
// too) and hands it the outcome, which the daemon records.
//
// Daemon restarts: the client reconnects and resumes the lease by id. If the
// daemon stays away past --reconnect-timeout when the outcome is due, the
// record is printed on stderr and the daemon, when back, closes the lease as
// "lost" (docs/daemon.md, "Recovery").
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "rpc/client.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"
#include "run/runner.h"

namespace tally::run {

class DaemonLease final : public LeaseObserver {
 public:
  DaemonLease(std::string socket, std::uint64_t reconnectTimeoutUs)
      : socket_(std::move(socket)), reconnectUs_(reconnectTimeoutUs) {}

  // Waits for the grant. Returns the lease id, or an error (printed by the caller).
  // `signalFd` readable (SIGINT/SIGTERM/SIGHUP) cancels the wait.
  // `onQueued(lease, words)`: the daemon queued it (before the grant).
  Result<std::string> acquire(
      const rpc::api::Acquire& request, int signalFd,
      std::function<void(const std::string&, const std::string&)> onQueued = {});
  Status placed(const lease::LeaseRecord& rec, const contain::LeaseCgroup& lease) override;
  void finished(lease::LeaseRecord& rec) override;
  void bound(const enforce::BoundEvent& e) override;
  // The lease ended without ever starting (containment refused): withdraw it.
  void withdraw(const std::optional<std::string>& containmentRefused = {});
  bool recorded() const { return recorded_; }
  // The daemon's grant: the hand-over's MemoryMax, the coverage, whether the
  // GPU bound is advisory.
  const rpc::api::LeaseReply& grant() const { return grant_; }

 private:
  // A call that survives a daemon restart: on a broken connection it
  // reconnects (every 500 ms, up to the reconnect timeout), resumes the lease
  // and repeats the call once.
  template <class Params>
  Result<rpc::Message> callResuming(const Params& params) {
    return resuming([&](rpc::Client& c) { return c.call(params, {}, 30'000); });
  }
  Result<rpc::Message> resuming(const std::function<Result<rpc::Message>(rpc::Client&)>& call);
  std::string socket_;
  std::uint64_t reconnectUs_;
  std::optional<rpc::Client> client_;
  std::string leaseId_;
  bool recorded_ = false;
  rpc::api::LeaseReply grant_;
};

}  // namespace tally::run
