#include "lease/attributes.h"

#include <fmt/format.h>

#include "lease/unit_names.h"
#include "util/clean_text.h"

namespace tally::lease {

Status checkAttribute(std::string_view key, std::string_view value) {
  bool keyOk = !key.empty() && key.size() <= kMaxAttributeKey && key[0] >= 'a' && key[0] <= 'z';
  for (char c : key)
    keyOk = keyOk && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!keyOk) {
    return Error{0, fmt::format("attribute key '{}' must be 1-{} of [a-z0-9_], starting with a "
                                "letter (e.g. model, context_window)",
                                key.substr(0, 64), kMaxAttributeKey)};
  }
  if (value.size() > kMaxAttributeValue) {
    return Error{0, fmt::format("attribute '{}' is {} bytes; values are at most {}", key,
                                value.size(), kMaxAttributeValue)};
  }
  if (auto why = text::cleanTextProblem(value))
    return Error{0, fmt::format("attribute '{}' {}", key, *why)};
  return Ok{};
}

std::optional<std::string> rootOnlyDeclaration(std::string_view name, const Attributes& a) {
  if (name.substr(0, 6) == "slurm-")
    return fmt::format(
        "the name '{}' is a Slurm step's (slurm-<job>.<step>), which only the "
        "Slurm plugin declares; choose another name",
        name);
  for (const auto& [key, value] : a) {
    if (key.substr(0, 6) == "slurm_")
      return fmt::format(
          "attribute '{}' is one the Slurm plugin sets from the job it verified; "
          "declare your own under another key",
          key);
  }
  return std::nullopt;
}

bool isDetachedJobUnit(std::string_view unit) { return isJobUnitName(unit); }

std::optional<std::string> jobKeysProblem(const Attributes& a, std::string_view askerCgroup) {
  auto unit = a.find(kJobUnitKey);
  auto manager = a.find(kJobManagerKey);
  if (unit == a.end() && manager == a.end()) return std::nullopt;
  if (unit == a.end())
    return std::string(
        "attribute 'job_manager' says which manager runs a detached job's 'job_unit'; "
        "tally run --detach sets both. Declare your own under another key");
  const std::string& u = unit->second;
  if (!isDetachedJobUnit(u))
    return fmt::format(
        "attribute 'job_unit' names a detached job's service (tally-job-*.service), which "
        "tally run --detach sets; '{}' is not one. Declare your own under another key",
        u);
  // The asker's own unit is the last component of its cgroup path.
  std::string_view own = askerCgroup.substr(askerCgroup.rfind('/') + 1);
  if (askerCgroup.empty() || own != u)
    return fmt::format(
        "attribute 'job_unit' = '{}' is the detached job's own word, and the asking process "
        "is not in that service (its cgroup: '{}'): no lease names another job's output. "
        "tally run --pool P --detach sets it from inside the job",
        u, askerCgroup.empty() ? "unreadable" : askerCgroup);
  const bool userManager = askerCgroup.find("/user@") != std::string_view::npos;
  const char* expected = userManager ? "user" : "system";
  if (manager != a.end() && manager->second != expected)
    return fmt::format(
        "attribute 'job_manager' = '{}', but {} runs under the {} manager (its cgroup: '{}')",
        manager->second, u, expected, askerCgroup);
  return std::nullopt;
}

Result<std::pair<std::string, std::string>> parseAttribute(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos)
    return Error{
        0, fmt::format("'{}' is not KEY=VALUE (e.g. --attr model=qwen3-32b)", text.substr(0, 64))};
  auto key = text.substr(0, eq), value = text.substr(eq + 1);
  if (auto s = checkAttribute(key, value); !s) return s.error();
  return std::pair<std::string, std::string>(key, value);
}

Result<Attributes> attributesFromJson(const nlohmann::json& j) {
  Attributes out;
  if (j.is_null()) return out;
  if (!j.is_object()) return Error{0, "\"attributes\" must be an object of strings"};
  if (j.size() > kMaxAttributes)
    return Error{0, fmt::format("at most {} attributes per lease", kMaxAttributes)};
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string())
      return Error{0, fmt::format("attribute '{}' must be a string", k.substr(0, 64))};
    if (auto s = checkAttribute(k, v.get_ref<const std::string&>()); !s) return s.error();
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

nlohmann::json attributesJson(const Attributes& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : a) j[k] = v;
  return j;
}

}  // namespace tally::lease
