// A live workload for the benchmark: N processes each holding M open fds.
// Usage: tally_bench_workload N M [PATH]; prints "ready" when all hold their
// fds, and tears everything down when its stdin closes.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PROCESSES FDS [PATH]\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const int m = std::atoi(argv[2]);
  const char* path = argc > 3 ? argv[3] : "/dev/null";
  int ready[2];
  if (::pipe(ready) != 0) return 1;
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the workload
      ::close(ready[0]);
      for (int j = 0; j < m; ++j)
        if (::open(path, O_RDONLY) < 0) ::_exit(1);
      if (::write(ready[1], "x", 1) != 1) ::_exit(1);
      ::close(ready[1]);
      for (;;) ::pause();
    }
    kids.push_back(pid);
  }
  ::close(ready[1]);
  char c;
  std::size_t got = 0;
  while (got < kids.size() && ::read(ready[0], &c, 1) == 1) ++got;
  std::printf("ready %zu processes x %d fds\n", got, m);
  std::fflush(stdout);
  while (::read(0, &c, 1) > 0) {
  }
  for (pid_t k : kids) ::kill(k, SIGKILL);
  for (pid_t k : kids) ::waitpid(k, nullptr, 0);
  return 0;
}
