#include "contain/held_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace tally::contain {
namespace {

int pidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Runs in the forked child: only async-signal-safe calls from here on.
[[noreturn]] void childMain(int goFd, int errFd, char* const* argv) {
  sigset_t none;
  sigemptyset(&none);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) ::signal(sig, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  char go = 0;
  ssize_t n;
  do {
    n = ::read(goFd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1 || go != 'g') ::_exit(kNeverReleasedStatus);
  ::close(goFd);
  ::execvp(argv[0], argv);
  int err = errno;
  (void)!::write(errFd, &err, sizeof err);
  ::_exit(127);
}

}  // namespace

Result<HeldChild> HeldChild::spawn(const std::vector<std::string>& argv) {
  if (argv.empty()) return Error{EINVAL, "no command to run"};
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  int go[2], err[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return errnoError(errno, "pipe");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(go[0]);
    ::close(go[1]);
    return errnoError(e, "pipe");
  }
  UniqueFd goRead(go[0]), goWrite(go[1]), errRead(err[0]), errWrite(err[1]);
  pid_t pid = ::fork();
  if (pid < 0) return errnoError(errno, "fork");
  if (pid == 0) childMain(goRead.get(), errWrite.get(), args.data());
  goRead.reset();
  errWrite.reset();
  UniqueFd pidfd(pidfdOpen(pid));
  if (!pidfd.valid()) {
    int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return errnoError(e, "pidfd_open (needs Linux 5.3)");
  }
  return HeldChild(pid, std::move(pidfd), std::move(goWrite), std::move(errRead));
}

HeldChild::HeldChild(HeldChild&& o) noexcept
    : pid_(std::exchange(o.pid_, 0)),
      pidfd_(std::move(o.pidfd_)),
      go_(std::move(o.go_)),
      execErr_(std::move(o.execErr_)),
      reaped_(std::exchange(o.reaped_, true)) {}

HeldChild::~HeldChild() {
  if (go_.valid()) abandon();
}

int HeldChild::release() {
  char go = 'g';
  if (::write(go_.get(), &go, 1) != 1) return errno ? errno : EPIPE;
  go_.reset();
  int childErrno = 0;
  ssize_t n;
  do {
    n = ::read(execErr_.get(), &childErrno, sizeof childErrno);
  } while (n < 0 && errno == EINTR);
  execErr_.reset();
  return n == sizeof childErrno ? childErrno : 0;
}

void HeldChild::abandon() {
  go_.reset();
  execErr_.reset();
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }
}

Result<int> HeldChild::reap() {
  if (reaped_) return Error{ECHILD, "child already reaped"};
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return errnoError(errno, "waitpid");
  reaped_ = true;
  return status;
}

}  // namespace tally::contain
