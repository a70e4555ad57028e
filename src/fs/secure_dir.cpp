#include "fs/secure_dir.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace tally::fs {

Status checkTrustedDir(const std::string& dir, const std::string& what, DirUse use) {
  char resolved[PATH_MAX];
  if (!::realpath(dir.c_str(), resolved)) return errnoError(errno, fmt::format("{} {}", what, dir));
  std::string path = resolved;
  uid_t self = ::geteuid();
  // From the directory itself up to "/".
  for (std::string at = path;;) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0)
      return errnoError(errno, fmt::format("{}: cannot stat {}", what, at));
    if (!S_ISDIR(st.st_mode)) return Error{0, fmt::format("{}: {} is not a directory", what, at)};
    bool isTarget = at == path;
    if (st.st_uid != 0 && st.st_uid != self) {
      return Error{0, fmt::format("{} {}: {} is owned by uid {}, so that user could replace what "
                                  "the daemon writes there; "
                                  "chown it to root{} or choose another directory",
                                  what, dir, at, st.st_uid,
                                  self ? fmt::format(" or uid {}", self) : std::string())};
    }
    bool othersWrite = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    bool sticky = (st.st_mode & S_ISVTX) != 0;
    bool allowed = !othersWrite || (sticky && (!isTarget || use == DirUse::SharedSticky));
    if (!allowed) {
      return Error{0, fmt::format("{} {}: {} is writable by {} (mode {:04o}){}; chmod go-w {} or "
                                  "choose another directory",
                                  what, dir, at, (st.st_mode & S_IWOTH) ? "everyone" : "its group",
                                  st.st_mode & 07777, sticky ? "" : " without the sticky bit", at)};
    }
    if (at == "/") break;
    auto slash = at.rfind('/');
    at = slash == 0 ? "/" : at.substr(0, slash);
  }
  return Ok{};
}

}  // namespace tally::fs
