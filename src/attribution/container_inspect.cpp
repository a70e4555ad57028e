#include "attribution/container_inspect.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attribution/container.h"

namespace tally::attribution {

bool validContainerName(std::string_view n) {
  if (n.empty() || n.size() > 253) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-'))) return false;
  }
  return true;
}

Result<InspectedContainer> decodeContainerInspect(std::string_view text, std::string_view engine) {
  // Depth-limited: the engine's output is outside input like any other.
  constexpr std::size_t kMaxBytes = 4u << 20;
  if (text.size() > kMaxBytes)
    return Error{0, fmt::format("{} inspect printed more than {} bytes", engine, kMaxBytes)};
  int depth = 0;
  auto guard = [&depth](int d, nlohmann::json::parse_event_t e, nlohmann::json&) {
    depth = d;
    (void)e;
    return d <= 64;
  };
  nlohmann::json doc = nlohmann::json::parse(text, guard, false);
  if (doc.is_discarded())
    return Error{0, fmt::format("{} inspect printed no JSON tally can read", engine)};
  if (!doc.is_array() || doc.size() != 1 || !doc[0].is_object())
    return Error{0, fmt::format("{} inspect did not print exactly one container", engine)};
  const auto& c = doc[0];
  InspectedContainer out;
  out.engine = std::string(engine);
  auto str = [&c](const char* key) -> const std::string* {
    auto it = c.find(key);
    return it != c.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
  };
  const std::string* id = str("Id");
  if (!id || !isContainerId(*id))
    return Error{0, fmt::format("{} inspect: \"Id\" is not a 64-hex container id", engine)};
  out.id = *id;
  const std::string* name = str("Name");
  if (!name) return Error{0, fmt::format("{} inspect: no \"Name\"", engine)};
  std::string_view n = *name;
  if (!n.empty() && n.front() == '/') n.remove_prefix(1);  // docker's "/name"
  if (!validContainerName(n))
    return Error{0, fmt::format("{} inspect: \"Name\" is not a container name", engine)};
  out.name = std::string(n);
  auto state = c.find("State");
  if (state == c.end() || !state->is_object())
    return Error{0, fmt::format("{} inspect: no \"State\"", engine)};
  auto running = state->find("Running");
  if (running == state->end() || !running->is_boolean())
    return Error{0, fmt::format("{} inspect: no \"State.Running\"", engine)};
  auto pid = state->find("Pid");
  if (!running->get<bool>() || pid == state->end() || !pid->is_number_integer() ||
      pid->get<std::int64_t>() <= 0) {
    return Error{0, fmt::format("container {} is not running ({} says State.Running {}): start "
                                "it, then attach",
                                out.name, engine, running->get<bool>() ? "true" : "false")};
  }
  if (pid->get<std::int64_t>() > 4194304)
    return Error{0, fmt::format("{} inspect: \"State.Pid\" is not a process id", engine)};
  out.pid = static_cast<pid_t>(pid->get<std::int64_t>());
  return out;
}

}  // namespace tally::attribution
