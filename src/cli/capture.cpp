#include "cli/capture.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/clock.h"
#include "util/units.h"

extern char** environ;

namespace tally::cli {

Result<Output> capture(const std::vector<std::string>& argv, std::size_t maxBytes, int timeoutMs) {
  int outPipe[2], errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0) return Error{errno, "pipe"};
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(outPipe[0]);
    ::close(outPipe[1]);
    return Error{e, "pipe"};
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, outPipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, errPipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int r = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  if (r != 0) {
    ::close(outPipe[0]);
    ::close(errPipe[0]);
    return Error{r, std::strerror(r)};
  }
  Output o;
  std::uint64_t deadline = clock::monotonicUs() + static_cast<std::uint64_t>(timeoutMs) * 1000;
  pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
  int open = 2;
  bool timedOut = false;
  while (open > 0) {
    std::uint64_t now = clock::monotonicUs();
    if (now >= deadline) {
      timedOut = true;
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>((deadline - now) / 1000) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
        continue;
      }
      std::string& into = i == 0 ? o.out : o.err;
      if (into.size() < maxBytes) into.append(buf, static_cast<std::size_t>(got));
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  if (timedOut) ::kill(pid, SIGKILL);
  while (::waitpid(pid, &o.status, 0) < 0 && errno == EINTR) {
  }
  if (timedOut)
    return Error{ETIMEDOUT,
                 fmt::format("gave no answer within {}",
                             units::humanDuration(static_cast<std::uint64_t>(timeoutMs) * 1000))};
  return o;
}

}  // namespace tally::cli
