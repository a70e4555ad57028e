#include "cli/socket_path.h"

#include <unistd.h>

#include <cstdlib>

#include "config/config.h"

namespace tally::cli {

std::string socketPath(const std::string& option) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("TALLY_SOCKET"); env && *env) return env;
  if (::access("/etc/tally/tally.toml", R_OK) == 0) {
    auto parsed = config::load("/etc/tally/tally.toml");
    if (parsed.config) return parsed.config->daemon.socket;
  }
  return config::kSystemSocket;
}

}  // namespace tally::cli
