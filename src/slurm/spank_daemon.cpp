#include "slurm/spank_daemon.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "slurm/spank_timing.h"

extern "C" {
#include <slurm/spank.h>
}

namespace tally::slurm::plugin {

int daemonTimeoutMs(const PluginArgs& args) {
  return static_cast<int>(std::min<std::uint64_t>(args.timeoutUs / 1000, 1u << 30));
}

Result<rpc::api::LeaseReply> requestLease(rpc::Client& client, const PluginArgs& args,
                                          const rpc::api::Attach& request, const std::string& where,
                                          const char* phase, std::string* refusedCode) {
  PhaseTimer timer(phase);
  auto reply = client.call(
      request,
      [&](const rpc::Message& ev) {
        auto q = rpc::api::decodeQueued(ev.raw);
        slurm_info("%s: queued as lease %s: %s", where.c_str(), q.lease.c_str(),
                   rpc::api::describe(q).c_str());
      },
      daemonTimeoutMs(args));
  if (!reply)
    return Error{0, fmt::format("the tally daemon at {} did not lease it ({})", args.socket,
                                reply.error().message)};
  if (!reply->ok) {
    if (refusedCode) *refusedCode = reply->error.code;
    return Error{
        0, fmt::format("the tally daemon refused the lease: {}", rpc::errorSentence(reply->error))};
  }
  auto granted = rpc::api::decodeLeaseReply(reply->result);
  if (!granted)
    return Error{
        0, fmt::format("the tally daemon's grant is malformed ({})", granted.error().message)};
  return std::move(*granted);
}

std::optional<Result<std::string>> attachJobLease(const PluginArgs& args, StepFacts facts,
                                                  const JobRecord& record,
                                                  const std::string& jobCgroup,
                                                  const StepOptions& options,
                                                  const std::string& where) {
  facts.gresBytes = record.gres ? record.gres->count : 0;
  takeRecord(facts, record);
  facts.jobCgroup = jobCgroup;
  auto request = jobRequest(args, options, facts);
  if (!request) return std::nullopt;
  auto client = rpc::Client::connect(args.socket);
  if (!client) return client.error();
  auto granted = requestLease(*client, args, *request, where, "job-lease");
  if (!granted) return granted.error();
  return granted->lease;
}

Result<rpc::Message> liveLease(rpc::Client& client, const std::string& lease, int timeoutMs,
                               const rpc::Client::EventFn& onEvent) {
  auto reply = client.call(rpc::api::LeaseQuery{lease, true}, onEvent, timeoutMs);
  if (reply && !reply->ok && reply->error.code == rpc::code::kInvalidParams)
    reply = client.call(rpc::api::LeaseQuery{lease, false}, onEvent, timeoutMs);
  return reply;
}

}  // namespace tally::slurm::plugin
