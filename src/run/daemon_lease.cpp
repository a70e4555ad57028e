#include "run/daemon_lease.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "lease/record.h"
#include "util/clock.h"

namespace tally::run {

using json = nlohmann::json;

Result<std::string> DaemonLease::acquire(
    const rpc::api::Acquire& request, int signalFd,
    std::function<void(const std::string&, const std::string&)> onQueued) {
  auto m = rpc::callWaiting(
      socket_, request,
      [&onQueued](const rpc::Message& ev) {
        auto q = rpc::api::decodeQueued(ev.raw);
        std::string words = rpc::api::describe(q);
        fmt::print(stderr, "tally run: queued as lease {}: {}\n", q.lease.empty() ? "?" : q.lease,
                   words);
        if (onQueued && !q.lease.empty()) onQueued(q.lease, words);
      },
      10'000,  // the daemon's first word (reply or "queued"); then the queue's wait
      reconnectUs_, signalFd,
      [](const std::string& what) { fmt::print(stderr, "tally run: {}\n", what); });
  if (!m) {
    if (m.error().code == EINTR)
      return Error{EINTR, "a stop signal arrived while queued; the request was cancelled"};
    return m.error();
  }
  client_.emplace(std::move(m->client));
  const rpc::Message& reply = m->reply;
  if (!reply.ok)
    return Error{0,
                 fmt::format("the daemon refused the lease: {}", rpc::errorSentence(reply.error))};
  auto grant = rpc::api::decodeLeaseReply(reply.result);
  if (!grant)
    return Error{0, fmt::format("the daemon's grant is malformed: {}", grant.error().message)};
  grant_ = std::move(*grant);
  leaseId_ = grant_.lease;
  return leaseId_;
}

Result<rpc::Message> DaemonLease::resuming(
    const std::function<Result<rpc::Message>(rpc::Client&)>& call) {
  if (client_) {
    auto m = call(*client_);
    if (m) return m;
    fmt::print(stderr, "tally run: {}; reconnecting to resume lease {}\n", m.error().message,
               leaseId_);
  }
  client_.reset();
  std::uint64_t deadline = clock::monotonicUs() + reconnectUs_;
  Error last{0, "no attempt"};
  while (clock::monotonicUs() < deadline) {
    auto c = rpc::Client::connect(socket_);
    if (c) {
      auto r = c->call(rpc::api::Resume{{leaseId_}}, {}, 30'000);
      if (r && r->ok) {
        client_.emplace(std::move(*c));
        return call(*client_);
      }
      if (r && !r->ok) return r;  // the daemon is back but no longer knows the lease
      last = r ? Error{0, "resume refused"} : r.error();
    } else {
      last = c.error();
    }
    ::usleep(500'000);
  }
  return Error{last.code, fmt::format("the daemon did not come back within {} s: {}",
                                      reconnectUs_ / 1000000, last.message)};
}

Status DaemonLease::placed(const lease::LeaseRecord& rec, const contain::LeaseCgroup& lease) {
  auto m =
      callResuming(rpc::api::Started{leaseId_, rec.unit, lease.cgroup(), lease.countersCgroup()});
  if (!m)
    return Error{0, fmt::format("the daemon could not be told where lease {} runs: {}", leaseId_,
                                m.error().message)};
  if (!m->ok)
    return Error{
        0, fmt::format("the daemon refused to meter lease {}: {}", leaseId_, m->error.message)};
  return Ok{};
}

void DaemonLease::finished(lease::LeaseRecord& rec) {
  auto m = callResuming(rpc::api::Complete{leaseId_, json(lease::recordJson(rec))});
  if (m && m->ok) {
    if (auto done = rpc::api::decodeCompleteReply(m->result)) {
      recorded_ = true;
      // What the kernel charged and refused is the daemon's alone (this
      // client samples fdinfo): the summary line and --json say it from here.
      if (done->kernelCharge) {
        rec.gpu.kernel = done->kernelCharge;
        rec.gpu.peakBytes = std::max(rec.gpu.peakBytes.value_or(0), done->kernelCharge->peakBytes);
      }
      return;
    }
  }
  std::string why = m ? rpc::errorSentence(m->error) : m.error().message;
  rec.warnings.push_back(fmt::format("the daemon did not record the outcome: {}", why));
}

// Told at once, without reconnecting: the sample loop must not wait on a
// daemon that is down (the event is in the record `complete` sends anyway).
void DaemonLease::bound(const enforce::BoundEvent& e) {
  if (!client_) return;
  auto m = client_->call(rpc::api::Bound{leaseId_, e}, {}, 2'000);
  if (!m || !m->ok)
    fmt::print(stderr, "tally run: the daemon did not record a GPU bound event: {}\n",
               m ? m->error.message : m.error().message);
}

void DaemonLease::withdraw(const std::optional<std::string>& containmentRefused) {
  if (leaseId_.empty()) return;
  rpc::api::Release release;
  release.lease = leaseId_;
  release.containmentRefused = containmentRefused;
  auto m = callResuming(release);
  if (!m || !m->ok)
    fmt::print(stderr, "tally run: could not withdraw lease {} from the daemon\n", leaseId_);
}

}  // namespace tally::run
