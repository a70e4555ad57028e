// The records one read() of an inotify fd returns, decoded. Pure: the names
// in them are whatever a user gave her cgroups (mkdir below a delegated
// cgroup needs no privilege), so the decoder trusts no length it is given
// and is fuzzed (fuzz/proc_fuzz.cpp, the cgroup_path target).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tally::cgroup {

struct InotifyEvent {
  int wd = -1;  // -1 with IN_Q_OVERFLOW: the kernel's queue overflowed
  std::uint32_t mask = 0;
  std::string_view
      name;  // a watched directory's entry, NUL padding cut; empty for the watched inode itself
};

// Every whole record of `bytes` (struct inotify_event, then `len` bytes of
// name). A record that runs past the end is an error naming its offset: the
// kernel never splits one, so a torn buffer means the caller's read is wrong.
Result<std::vector<InotifyEvent>> decodeInotify(std::string_view bytes);

}  // namespace tally::cgroup
