#include "fs/secure_dir.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <deque>
#include <string_view>
#include <vector>

namespace tally::fs {

namespace {

// Every symlink met on the way to `dir`, followed by hand (links inside a
// link's target included): each must be root's or the daemon's own, or the
// user who owns it chooses where root writes, whatever the directory it leads
// to looks like.
Status checkLinksOnTheWay(const std::string& dir, const std::string& what, uid_t self) {
  std::deque<std::string> todo;
  auto push = [&](std::string_view path, bool front) {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < path.size();) {
      auto j = path.find('/', i);
      if (j == std::string_view::npos) j = path.size();
      if (j > i) parts.emplace_back(path.substr(i, j - i));
      i = j + 1;
    }
    if (front)
      todo.insert(todo.begin(), parts.begin(), parts.end());
    else
      todo.insert(todo.end(), parts.begin(), parts.end());
  };
  push(dir, false);
  std::string at = "/";
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.front());
    todo.pop_front();
    if (part == ".") continue;
    if (part == "..") {
      auto slash = at.rfind('/');
      at.resize(slash == 0 ? 1 : slash);
      continue;
    }
    std::string next = at;  // appended, not "/" + part: GCC 12's -O2 -Wrestrict false positive
    if (next.back() != '/') next += '/';
    next += part;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0)
      return errnoError(errno, fmt::format("{}: cannot stat {}", what, next));
    if (!S_ISLNK(st.st_mode)) {
      at = std::move(next);
      continue;
    }
    if (st.st_uid != 0 && st.st_uid != self) {
      return Error{0, fmt::format("{} {}: {} is a symlink owned by uid {}, so that user chooses "
                                  "where the daemon writes; use a path without it, or chown it "
                                  "to root",
                                  what, dir, next, st.st_uid)};
    }
    if (++links > 40) return Error{ELOOP, fmt::format("{} {}: too many symlinks", what, dir)};
    char target[PATH_MAX];
    ssize_t n = ::readlink(next.c_str(), target, sizeof target - 1);
    if (n < 0) return errnoError(errno, fmt::format("{}: cannot read link {}", what, next));
    std::string_view t(target, static_cast<std::size_t>(n));
    if (!t.empty() && t[0] == '/') at.resize(1);  // back to "/" (at always starts with it)
    push(t, true);
  }
  return Ok{};
}

}  // namespace

Status checkTrustedDir(const std::string& dir, const std::string& what, DirUse use) {
  uid_t caller = ::geteuid();
  if (!dir.empty() && dir[0] == '/') {
    if (auto s = checkLinksOnTheWay(dir, what, caller); !s) return s;
  }
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
