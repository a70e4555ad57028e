// Operator-declared attributes of a lease (`--attr model=qwen3-32b`): what the
// operator says runs there, carried into seat rows and metrics labelled
// "declared". tally measures none of them; it only checks their shape, so a
// label can go into a Prometheus label value and a journal field unescaped.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tally::lease {

using Attributes = std::map<std::string, std::string>;

inline constexpr std::size_t kMaxAttributes = 16;
inline constexpr std::size_t kMaxAttributeKey = 32;
inline constexpr std::size_t kMaxAttributeValue = 256;

// KEY=VALUE, KEY 1-32 of [a-z0-9_] starting with a letter, VALUE 0-256
// bytes of clean text (util/clean_text.h: UTF-8, no control or bidi characters).
Result<std::pair<std::string, std::string>> parseAttribute(std::string_view text);
Status checkAttribute(std::string_view key, std::string_view value);

// What only root may declare, because tally's own parts set it from what
// they verified: the Slurm plugin (root, in slurmstepd) names its leases
// slurm-<job>.<step> and sets the slurm_* attributes. Nobody else may pose as
// a Slurm step. Returns why, or nullopt.
std::optional<std::string> rootOnlyDeclaration(std::string_view name, const Attributes& a);

// A detached job's keys: where its output went (tally run --detach sets
// them, tally logs reads them back).
inline constexpr const char* kJobUnitKey = "job_unit";
inline constexpr const char* kJobManagerKey = "job_manager";
// tally-job-<id>.service, the name contain/detached_job.h gives a detached job's service.
bool isDetachedJobUnit(std::string_view unit);

// A detached job's keys, `job_unit` and `job_manager`, say where a lease's
// output went: `tally logs` runs journalctl on that unit. Anyone could write
// them, so they are taken only from the job itself: `tally run --detach`
// asks from inside its service (tally-job-<hex>.service), so the asking
// process's cgroup (`askerCgroup`, from /proc/<pid>/cgroup; "" when it
// could not be read) must end in that unit, and the manager named must be
// the one whose tree it is in (a user manager's is under user@<uid>.service).
// Returns why not, or nullopt (also when neither key is declared).
std::optional<std::string> jobKeysProblem(const Attributes& a, std::string_view askerCgroup);

// From a request's "attributes" object (absent = none); every entry checked.
Result<Attributes> attributesFromJson(const nlohmann::json& j);
nlohmann::json attributesJson(const Attributes& a);

}  // namespace tally::lease
