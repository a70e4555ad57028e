// A cgroup path as a client names it, made canonical before any rule sees it.
// Pure: no filesystem access (cgroupfs has no symlinks; the daemon opens the
// canonical path without following any, so a fixture tree's symlink cannot
// stand in for a cgroup either).
#pragma once

#include <string>
#include <string_view>

#include "util/result.h"

namespace tally::cgroup {

inline constexpr std::size_t kMaxPathBytes = 4096;

// "/a//b/./c/" -> "/a/b/c"; "/" stays "/". A path must be absolute (from the
// cgroup v2 root), at most kMaxPathBytes, without NUL or newline, and without
// ".." (a client that means a parent names it): one cgroup has one spelling,
// so access rules and "one lease per cgroup" hold for every alias of it.
Result<std::string> canonicalPath(std::string_view path);

// Whether `inner` is `outer` or below it (both canonical).
bool isWithin(std::string_view inner, std::string_view outer);

}  // namespace tally::cgroup
