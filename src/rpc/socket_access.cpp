#include "rpc/socket_access.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace tally::rpc {

SocketAccess socketAccessFacts(const std::string& path) {
  SocketAccess f;
  f.path = path;
  if (passwd* pw = ::getpwuid(::geteuid())) f.userName = pw->pw_name;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return f;
  f.socketGid = st.st_gid;
  if (group* g = ::getgrgid(st.st_gid)) {
    f.groupName = g->gr_name;
    for (char** m = g->gr_mem; *m; ++m)
      if (f.userName == *m) f.listedInGroup = true;
  }
  if (passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_gid == st.st_gid) f.listedInGroup = true;
  int n = ::getgroups(0, nullptr);
  std::vector<gid_t> gids(n > 0 ? static_cast<std::size_t>(n) : 0);
  if (n > 0) n = ::getgroups(n, gids.data());
  f.sessionHasGroup = ::getegid() == st.st_gid;
  for (int i = 0; i < n; ++i)
    if (gids[static_cast<std::size_t>(i)] == st.st_gid) f.sessionHasGroup = true;
  return f;
}

std::string socketAccessHint(const SocketAccess& f) {
  if (!f.socketGid) return "; the socket's directory is closed to you: use sudo";
  if (*f.socketGid == 0)
    return "; only root may use this daemon (its socket's group is root): use sudo, or ask an "
           "administrator to set [daemon] socket_group = \"tally\" in its config (the Debian "
           "package does)";
  // usermod and newgrp take a group's number where it has no name.
  std::string arg = f.groupName.empty() ? std::to_string(*f.socketGid) : f.groupName;
  std::string group = f.groupName.empty() ? "gid " + arg : f.groupName;
  std::string user = f.userName.empty() ? "$USER" : f.userName;
  if (f.listedInGroup && !f.sessionHasGroup)
    return fmt::format(
        "; you are in group {} but this session started before you joined it: log out and in "
        "again (or run `newgrp {}`)",
        group, arg);
  return fmt::format(
      "; the socket is group {}'s (mode 0660): ask an administrator to add you "
      "(sudo usermod -aG {} {}), then log in again; or use sudo",
      group, arg, user);
}

}  // namespace tally::rpc
