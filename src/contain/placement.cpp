#include "contain/placement.h"

#include <fmt/format.h>

#include "fs/root.h"

namespace tally::contain {

std::string cgroupfsParent(const std::string& ownCgroup) {
  std::string_view up = fs::parentPath(ownCgroup);
  return std::string(up.empty() ? std::string_view("/") : up);
}

LeasePlacement leasePlacement(bool systemd, uid_t uid, const std::string& ownCgroup,
                              const std::string& slice) {
  if (!systemd) {
    std::string parent = cgroupfsParent(ownCgroup);
    return {parent, parent};
  }
  std::string root =
      uid == 0 ? "/" : fmt::format("/user.slice/user-{}.slice/user@{}.service", uid, uid);
  return {root, root == "/" ? "/" + slice : root + "/" + slice};
}

}  // namespace tally::contain
