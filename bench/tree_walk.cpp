// What a lease's wide tree costs a sample: the whole walk (Cgroup::subtreeProcs:
// every cgroup opened, its cgroup.procs read, its directory listed) against
// the walk through the inotify index (cgroup/tree_watch.h: only where
// something runs), in one run, as a ratio (docs/PERFORMANCE.md).
//
//   tally_bench_tree_walk DIR [CGROUPS=16000] [ROUNDS=20]
//
// DIR below /sys/fs/cgroup: real cgroups (mkdir; a sleeping child moved into
// DIR itself, as a lease's workload is, so DIR is populated and its CGROUPS
// children are empty). Elsewhere: a synthetic tree of directories with
// cgroup.procs and cgroup.events files. DIR is made and removed by the run.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cgroup/cgroup.h"
#include "cgroup/tree_watch.h"

namespace {

using Clock = std::chrono::steady_clock;

double usSince(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

int main(int argc, char** argv) {
  using namespace tally;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [CGROUPS=16000] [ROUNDS=20]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int n = argc > 2 ? std::atoi(argv[2]) : 16000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 20;
  const bool real = dir.starts_with("/sys/fs/cgroup/");
  if (::mkdir(dir.c_str(), 0755) != 0) return std::perror(dir.c_str()), 1;
  auto t = Clock::now();
  for (int i = 0; i < n; ++i) {
    std::string c = fmt::format("{}/c{:05}", dir, i);
    if (::mkdir(c.c_str(), 0755) != 0) return std::perror(c.c_str()), 1;
    if (!real) {
      put(c + "/cgroup.procs", "");
      put(c + "/cgroup.events", "populated 0\nfrozen 0\n");
    }
  }
  fmt::print("{} cgroups made in {:.0f} ms ({})\n", n, usSince(t) / 1000,
             real ? "real cgroupfs" : "synthetic tree");
  pid_t sleeper = ::fork();
  if (sleeper == 0) {
    ::pause();
    ::_exit(0);
  }
  put(dir + "/cgroup.procs", std::to_string(sleeper) + "\n");
  if (!real) put(dir + "/cgroup.events", "populated 1\nfrozen 0\n");

  const std::string root = real ? "/sys/fs/cgroup" : std::filesystem::path(dir).parent_path();
  auto rootDir = fs::Root::open(root);
  auto cg = cgroup::Cgroup::open(*rootDir, "/" + std::filesystem::path(dir).filename().string());
  if (!cg) return std::fprintf(stderr, "%s\n", cg.error().message.c_str()), 1;
  cgroup::SubtreeLimits limits{64, 100'000};

  double whole = 0;
  std::size_t wholeVisited = 0;
  auto watcher = cgroup::TreeWatcher::open(1'000'000);
  if (!watcher) return std::fprintf(stderr, "%s\n", watcher.error().message.c_str()), 1;
  cgroup::SubtreeIndex index(**watcher, *cg);
  cgroup::SubtreeWalk walk;
  t = Clock::now();
  (*watcher)->drain();
  if (!index.procs(limits, &walk)) return 1;
  const double indexing = usSince(t);
  const std::size_t indexingVisited = walk.visited;
  double indexed = 0;
  std::size_t indexedVisited = 0;
  // Interleaved, round by round: the machine's noise falls on both alike.
  for (int r = 0; r < rounds; ++r) {
    t = Clock::now();
    if (!cg->subtreeProcs(limits, &walk)) return 1;
    whole += usSince(t);
    wholeVisited = walk.visited;
    t = Clock::now();
    (*watcher)->drain();
    if (!index.procs(limits, &walk)) return 1;
    indexed += usSince(t);
    indexedVisited = walk.visited;
  }
  whole /= rounds;
  indexed /= rounds;
  fmt::print(
      "whole walk: {:.0f} us ({} cgroups opened); indexed walk: {:.1f} us ({} opened), "
      "{:.0f}x less; indexing it once: {:.0f} us ({} opened, {} inotify watches)\n",
      whole, wholeVisited, indexed, indexedVisited, whole / indexed, indexing, indexingVisited,
      (*watcher)->watches());
  if (index.lastDrop())
    fmt::print("the index was dropped ({} whole walks): {}\n", index.wholeWalks(),
               *index.lastDrop());
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);
  std::error_code ec;
  if (real) {
    for (int i = 0; i < n; ++i) ::rmdir(fmt::format("{}/c{:05}", dir, i).c_str());
    ::rmdir(dir.c_str());
  } else {
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}
