#include "cgroup/inotify_events.h"

#include <fmt/format.h>
#include <sys/inotify.h>

#include <cstring>

namespace tally::cgroup {

Result<std::vector<InotifyEvent>> decodeInotify(std::string_view bytes) {
  std::vector<InotifyEvent> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < sizeof(inotify_event))
      return Error{EPROTO, fmt::format("inotify record at byte {} is cut short ({} bytes left)", at,
                                       bytes.size() - at)};
    inotify_event head;
    std::memcpy(&head, bytes.data() + at, sizeof head);  // the buffer need not be aligned
    at += sizeof head;
    if (head.len > bytes.size() - at)
      return Error{EPROTO, fmt::format("inotify record at byte {} names {} bytes, {} are left",
                                       at - sizeof head, head.len, bytes.size() - at)};
    std::string_view name = bytes.substr(at, head.len);
    at += head.len;
    if (auto nul = name.find('\0'); nul != std::string_view::npos) name = name.substr(0, nul);
    out.push_back({head.wd, head.mask, name});
  }
  return out;
}

}  // namespace tally::cgroup
