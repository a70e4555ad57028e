#include "cgroup/path.h"

#include <fmt/format.h>

namespace tally::cgroup {

Result<std::string> canonicalPath(std::string_view path) {
  if (path.empty() || path[0] != '/')
    return Error{0, "must be an absolute cgroup path such as /system.slice/llama.service"};
  if (path.size() > kMaxPathBytes)
    return Error{0, fmt::format("is longer than {} bytes", kMaxPathBytes)};
  if (path.find('\0') != std::string_view::npos || path.find('\n') != std::string_view::npos) {
    return Error{0, "contains a NUL or newline byte"};
  }
  std::string out;
  out.reserve(path.size());
  std::string_view rest = path;
  while (!rest.empty()) {
    auto slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") return Error{0, "contains '..'; name the cgroup itself"};
    // (push_back + append of iterators: g++ 12 -O2 misreads `out += part`
    // as an overlapping memcpy, -Wrestrict, a known false positive.)
    out.push_back('/');
    out.append(part.begin(), part.end());
  }
  if (out.empty()) out = "/";
  return out;
}

bool isWithin(std::string_view inner, std::string_view outer) {
  if (outer == "/") return !inner.empty() && inner[0] == '/';
  if (inner.size() < outer.size() || inner.substr(0, outer.size()) != outer) return false;
  return inner.size() == outer.size() || inner[outer.size()] == '/';
}

}  // namespace tally::cgroup
