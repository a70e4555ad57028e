// What `podman container inspect NAME` or `docker container inspect NAME`
// says about one container (pure): a JSON array of one object, of which
// tally reads Id, Name, State.Running and State.Pid. The engine's own CLI is
// how `tally attach --container` names a container (cli/container_engine.h).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "util/result.h"

namespace tally::attribution {

struct InspectedContainer {
  std::string engine;  // "podman" or "docker"
  std::string id;      // 64 lowercase hex
  std::string name;    // without docker's leading '/'
  pid_t pid = 0;       // its init process, > 0
};

// Refuses anything but exactly one running container with a 64-hex id and a
// pid: a stopped container has nothing to meter.
Result<InspectedContainer> decodeContainerInspect(std::string_view text, std::string_view engine);

// A container engine's names: [A-Za-z0-9][A-Za-z0-9_.-]*, at most 253.
bool validContainerName(std::string_view name);

}  // namespace tally::attribution
