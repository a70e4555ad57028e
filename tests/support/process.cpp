#include "support/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "support/fake_host.h"

namespace tally::testing {

int ProgramResult::exitCode() const { return WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus) : -1; }

Spawned spawnProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  static int counter = 0;
  Spawned s;
  std::string base =
      "/tmp/tally-test-prog." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  s.outPath = base + ".out";
  s.errPath = base + ".err";
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  s.pid = ::fork();
  if (s.pid == 0) {
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(s.outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(s.errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execvp(args[0], args.data());
    ::dprintf(2, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  return s;
}

ProgramResult waitProgram(const Spawned& s) {
  ProgramResult r;
  pid_t w;
  do {
    w = ::waitpid(s.pid, &r.waitStatus, 0);
  } while (w < 0 && errno == EINTR);
  r.out = readFile(s.outPath);
  r.err = readFile(s.errPath);
  ::unlink(s.outPath.c_str());
  ::unlink(s.errPath.c_str());
  return r;
}

ProgramResult runProgram(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env) {
  return waitProgram(spawnProgram(argv, env));
}

int shell(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string shellOut(const std::string& cmd) {
  std::string s = runProgram({"sh", "-c", cmd}).out;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace tally::testing
