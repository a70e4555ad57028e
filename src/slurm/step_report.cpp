// What a leased step says of its bound as it ends, from the daemon's view of
// its lease: the one reader of that reply (stepBoundFromLease), the step's
// stderr lines, the job's AdminComment line and the tasks' wait status as one
// (declared in slurm/step.h, where the rules are; here apart from them, as
// the plugin's end-of-step reporting: spank_step_end.cpp, spank_admin_comment.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>

#include <algorithm>

#include "slurm/step.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::slurm {

Result<StepBound> stepBoundFromLease(const nlohmann::json& lease) {
  if (!lease.is_object()) return Error{EPROTO, "the lease reply is not an object"};
  StepBound b;
  auto count = [](const nlohmann::json& obj, const char* key, std::uint64_t& out) -> Status {
    if (!obj.is_object()) return Ok{};
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return Ok{};
    if (!it->is_number_unsigned()) return Error{EPROTO, fmt::format("{} is not a count", key)};
    out = it->get<std::uint64_t>();
    return Ok{};
  };
  auto at = [](const nlohmann::json& obj, const char* key) -> const nlohmann::json& {
    static const nlohmann::json none;
    if (!obj.is_object()) return none;
    auto it = obj.find(key);
    return it == obj.end() ? none : *it;
  };
  // Live, the lease's own view; ended (the daemon recorded it before the
  // question came), its granted and outcome rows say the same.
  // gpu_memory_max 0 is a bound (no GPU memory): absent only when no field says it.
  auto maxFrom = [&](const nlohmann::json& declared) -> Status {
    if (at(declared, "gpu_memory_max").is_null()) return Ok{};
    std::uint64_t max = 0;
    if (auto s = count(declared, "gpu_memory_max", max); !s) return s.error();
    b.max = max;
    return Ok{};
  };
  if (auto s = count(at(lease, "gpu"), "allocations_refused", b.refused); !s) return s.error();
  if (auto s = count(at(lease, "gpu"), "refused_bytes", b.refusedBytes); !s) return s.error();
  if (auto s = maxFrom(at(lease, "declared")); !s) return s.error();
  // Live, its kill as the daemon recorded it (gpu_bound.kill).
  if (const auto& kill = at(at(lease, "gpu_bound"), "kill"); kill.is_object()) {
    auto e = enforce::boundEventFromJson(kill);
    if (!e) return Error{EPROTO, "gpu_bound.kill: " + e.error().message};
    if (e->kind == enforce::Verdict::Kill) b.kill = std::move(*e);
  }
  const auto& rows = at(lease, "ledger");
  if (rows.is_array()) {
    for (const auto& row : rows) {
      std::string kind = row.is_object() ? row.value("kind", "") : "";
      const auto& body = at(row, "body");
      if (kind == "granted" && !b.max) {
        if (auto s = maxFrom(at(body, "declared")); !s) return s.error();
      } else if (kind == "outcome" && !at(lease, "gpu").is_object()) {
        const auto& charged = at(at(body, "gpu"), "kernel_charge");
        if (auto s = count(charged, "allocations_refused", b.refused); !s) return s.error();
        if (auto s = count(charged, "refused_bytes", b.refusedBytes); !s) return s.error();
      } else if (kind == "gpu-bound") {
        auto e = enforce::boundEventFromJson(body);
        if (!e) return Error{EPROTO, "a gpu-bound row: " + e.error().message};
        if (e->kind == enforce::Verdict::Kill) b.kill = std::move(*e);
      }
    }
  }
  if (const auto& parent = at(lease, "parent_view"); parent.is_object()) {
    auto job = stepBoundFromLease(parent);
    if (!job) return Error{EPROTO, "parent_view: " + job.error().message};
    // Only a kill of the job while this step was granted is this step's: a
    // job killed once at its bound (its later steps run on) kills no later step.
    std::uint64_t granted = 0;
    if (auto s = count(lease, "granted_at_ns", granted); !s) return s.error();
    if (job->kill && job->kill->atNs >= granted) b.jobKill = std::move(job->kill);
  }
  std::uint64_t peak = 0;
  const auto& gpu = at(lease, "gpu");
  if (gpu.is_object() && gpu.contains("peak_bytes") && !gpu["peak_bytes"].is_null()) {
    if (auto s = count(gpu, "peak_bytes", peak); !s) return s.error();
    b.peak = peak;
  }
  return b;
}

std::string jobSummary(std::string_view node, const StepBound& job) {
  std::string line = fmt::format("tally {}: GPU peak {}", node,
                                 job.peak ? units::humanBytes(*job.peak) : std::string("unknown"));
  if (job.max) line += fmt::format(" of {}", units::humanBytes(*job.max));
  if (job.refused)
    line += fmt::format("; {} refused in the kernel ({} asked)",
                        text::counted(job.refused, "GPU allocation", "GPU allocations"),
                        units::humanBytes(job.refusedBytes));
  if (job.kill)
    line += fmt::format("; its steps killed at {} over its bound {}",
                        units::humanBytes(job.kill->bytes), units::humanBytes(job.kill->limit));
  return line;
}

std::string mergeAdminComment(std::string_view existing, std::string_view node,
                              std::string_view line) {
  constexpr std::string_view kSep = " | ";
  std::string mine = fmt::format("tally {}: ", node);
  std::vector<std::string_view> kept;
  while (!existing.empty()) {
    auto cut = existing.find(kSep);
    std::string_view part = existing.substr(0, cut);
    if (!part.empty() && part.substr(0, mine.size()) != mine) kept.push_back(part);
    existing =
        cut == std::string_view::npos ? std::string_view{} : existing.substr(cut + kSep.size());
  }
  kept.push_back(line);
  return fmt::format("{}", fmt::join(kept, kSep));
}

std::vector<std::string> boundLines(std::uint32_t job, std::uint32_t step, const StepBound& b,
                                    const std::optional<NoGresHint>& noGres) {
  std::string id = fmt::format("StepId={}.{}", job, stepName(step));
  std::vector<std::string> lines;
  if (b.refused)
    lines.push_back(fmt::format(
        "tally: {}: {} refused in the kernel at gpu_memory_max {} ({} asked)", id,
        text::counted(b.refused, "GPU allocation", "GPU allocations"),
        b.max ? units::humanBytes(*b.max) : std::string("-"), units::humanBytes(b.refusedBytes)));
  if (b.kill)
    lines.push_back(fmt::format("tally: {} killed: GPU memory {} over gpu_memory_max {}", id,
                                units::humanBytes(b.kill->bytes),
                                units::humanBytes(b.kill->limit)));
  if (b.jobKill && !b.kill)
    lines.push_back(fmt::format(
        "tally: {} killed with its job: the job's GPU memory {} over its gpu_memory_max {} on "
        "this node",
        id, units::humanBytes(b.jobKill->bytes), units::humanBytes(b.jobKill->limit)));
  if (noGres && (b.refused || b.kill || b.jobKill)) {
    std::string gets = noGres->policy.kind == NoGresPolicy::Kind::kCap
                           ? "at most " + describe(noGres->policy) + " of GPU memory"
                           : std::string("no GPU memory");
    lines.push_back(fmt::format(
        "tally: {}: the job holds no {} GRES on this node, and a job without it gets {} here "
        "(plugstack.conf's no_gres); ask for what it needs: --gres={}:SIZE",
        id, noGres->gres, gets, noGres->gres));
  }
  return lines;
}

std::optional<rpc::api::Exited> stepExit(const std::string& lease,
                                         const std::vector<int>& statuses) {
  if (statuses.empty()) return std::nullopt;
  rpc::api::Exited e;
  e.lease = lease;
  int code = 0;
  for (int st : statuses) {
    if (WIFSIGNALED(st)) {
      e.signal = WTERMSIG(st);
      return e;
    }
    if (WIFEXITED(st)) code = std::max(code, WEXITSTATUS(st));
  }
  e.exitCode = code;
  return e;
}

}  // namespace tally::slurm
