// tally attach --container: a container named by its engine's own CLI
// (podman, then docker; or the one --engine names). The engine is asked as
// the user who runs tally, so a rootless container is found in its owner's
// podman. Its output goes through attribution::decodeContainerInspect.
#pragma once

#include <string>

#include "attribution/container_inspect.h"
#include "util/result.h"

namespace tally::cli {

// `engine`: "podman", "docker", or "" for podman then docker (the first that
// knows the container). The error says what each engine answered.
Result<attribution::InspectedContainer> inspectContainer(const std::string& nameOrId,
                                                         const std::string& engine);

}  // namespace tally::cli
