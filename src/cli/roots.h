// Opening the three roots every command reads from, with messages that name
// the option to fix.
#pragma once

#include <optional>
#include <string>

#include "fs/root.h"

namespace tally::cli {

struct OpenRoots {
  fs::Root proc;
  fs::Root sys;
  std::optional<fs::Root> cgroup;  // absent when the cgroup root cannot be opened
  std::optional<std::string> cgroupError;
};

// nullopt (after printing why to stderr) when /proc or /sys cannot be opened.
std::optional<OpenRoots> openRoots(const fs::RootPaths& paths);

}  // namespace tally::cli
