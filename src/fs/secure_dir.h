// Directories the daemon (often root) creates files in, unlinks names in or
// binds a socket in. If another user can change what a name there points
// to, a root write could land on a file of that user's choosing (a symlink
// put where the metrics textfile's temporary goes, say). So before using
// one, the daemon checks the directory and every directory above it.
#pragma once

#include <string>

#include "util/result.h"

namespace tally::fs {

enum class DirUse {
  // Only root or the daemon's own user may write it (the state directory:
  // SQLite creates its -wal and -shm files there by name).
  Private,
  // As Private, or writable by others with the sticky bit set (like /tmp):
  // others cannot rename or remove what the daemon puts there, and the
  // daemon creates its files with O_EXCL|O_NOFOLLOW (socket and textfile
  // directories).
  SharedSticky,
};

// Every symlink on the way to `dir` (links in links' targets too) is owned
// by root or the daemon's effective uid, and `dir` and each of its ancestors
// (symlinks in the path resolved first) is
// owned by root or the daemon's effective uid, and is not writable by group
// or others unless sticky (an ancestor always may be sticky, /tmp). The
// error names `what` (the config key), the directory, the owner or mode
// found, and the fix.
Status checkTrustedDir(const std::string& dir, const std::string& what, DirUse use);

}  // namespace tally::fs
