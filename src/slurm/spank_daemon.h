// The plugin's calls to the node's tally daemon (plugstack.conf's socket=):
// a lease asked for (the job's, the step's), and a lease's live view.
#pragma once

#include <optional>
#include <string>

#include "rpc/client.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"
#include "slurm/job_record.h"
#include "slurm/step.h"
#include "util/result.h"

namespace tally::slurm::plugin {

// How long the daemon may take to answer one call (plugstack.conf timeout=).
int daemonTimeoutMs(const PluginArgs& args);

// One attach call on `client`, timed as `phase` (job-lease, step-lease): the
// lease reply, or why not (and in `refusedCode`, when given, the daemon's
// error code if it answered no). A queued lease is said in the log as `where`.
Result<rpc::api::LeaseReply> requestLease(rpc::Client& client, const PluginArgs& args,
                                          const rpc::api::Attach& request, const std::string& where,
                                          const char* phase, std::string* refusedCode = nullptr);

// One attach-or-join of the job's lease on this node, on a connection of its
// own, for the extern step and for a job's first step (joinJobEarly): the
// granted lease's id, or why not. Absent when no request can be made (the
// job holds no GRES here, or its pool is not allowed).
std::optional<Result<std::string>> attachJobLease(const PluginArgs& args, StepFacts facts,
                                                  const JobRecord& record,
                                                  const std::string& jobCgroup,
                                                  const StepOptions& options,
                                                  const std::string& where);

// A lease as the daemon holds it now (its live view; an ended one's rows);
// a daemon from before `live` refuses the field and is asked for the whole view.
Result<rpc::Message> liveLease(rpc::Client& client, const std::string& lease, int timeoutMs,
                               const rpc::Client::EventFn& onEvent = {});

}  // namespace tally::slurm::plugin
