#include "cgroup/cgroup.h"

#include <fmt/format.h>

#include <cerrno>

#include "probes/sysfs_value.h"
#include "util/text.h"

namespace tally::cgroup {

Result<Cgroup> Cgroup::open(const fs::Root& root, std::string_view path) {
  auto dir = root.openDirBeneath(path);
  if (!dir) return dir.error();
  auto st = dir->statSelf();
  if (!st) return st.error();
  return Cgroup(std::move(*dir), std::string(path.empty() ? std::string_view("/") : path), *st);
}

Result<std::uint64_t> Cgroup::bytes(const char* file) const {
  auto text = dir_.read(file, 64);
  if (!text) return text.error();
  auto v = probes::parseSysfsU64(*text);
  if (!v)
    return Error{0, fmt::format("{} reads '{}'", describe(file), text::trim(*text).substr(0, 32))};
  return *v;
}

Result<probes::MemoryLimit> Cgroup::limit(const char* file) const {
  auto text = dir_.read(file, 256);
  if (!text) return text.error();
  auto l = probes::parseMemoryLimit(*text);
  if (!l)
    return Error{0, fmt::format("{} reads '{}', not a limit", describe(file),
                                text::trim(*text).substr(0, 32))};
  return *l;
}

Result<probes::FlatKeyed> Cgroup::flat(const char* file) const {
  auto text = dir_.read(file, 64 * 1024);
  if (!text) return text.error();
  auto parsed = probes::parseFlatKeyed(*text);
  if (!parsed) return Error{0, fmt::format("{} is malformed", describe(file))};
  return std::move(*parsed);
}

Result<bool> Cgroup::oomGroup() const {
  auto text = dir_.read(file::kMemoryOomGroup, 64);
  if (!text) return text.error();
  auto v = text::parseU64(text::trim(*text));
  if (!v || *v > 1)
    return Error{0, fmt::format("{} reads '{}'", describe(file::kMemoryOomGroup),
                                text::trim(*text).substr(0, 32))};
  return *v == 1;
}

Result<bool> Cgroup::populated() const {
  auto text = dir_.read(file::kEvents, 4096);
  if (!text) {
    if (text.error().code == ENOENT) return false;  // removed: nothing runs there
    return text.error();
  }
  auto ev = probes::parseFlatKeyed(*text);
  if (!ev || !ev->get("populated"))
    return Error{0, fmt::format("{} has no 'populated' line", describe(file::kEvents))};
  return *ev->get("populated") == 1;
}

Result<std::vector<pid_t>> Cgroup::procs() const {
  std::vector<pid_t> out;
  auto text = dir_.read(file::kProcs, 1 << 20);
  if (!text) {
    if (text.error().code == ENOENT) return out;
    return text.error();
  }
  text::LineReader lines(*text);
  while (auto line = lines.next()) {
    auto pid = text::parseU64(text::trim(*line));
    if (pid && *pid > 0 && *pid <= 4194304) out.push_back(static_cast<pid_t>(*pid));
  }
  return out;
}

Result<bool> Cgroup::hasController(std::string_view controller) const {
  auto text = dir_.read(file::kControllers, 4096);
  if (!text) return text.error();
  return text::hasWord(text::trim(*text), controller);
}

Result<bool> Cgroup::delegates(std::string_view controller) const {
  auto text = dir_.read(file::kSubtreeControl, 4096);
  if (!text) return text.error();
  return text::hasWord(text::trim(*text), controller);
}

FinalCounters readFinalCounters(const fs::Root& cgroupRoot, const std::string& path) {
  auto cg = Cgroup::open(cgroupRoot, path);
  if (cg) return readFinalCounters(*cg);
  // Gone (systemd removed it) or never there: every counter says so.
  FinalCounters c;
  c.cgroup = path;
  c.memoryPeakUnknown = cg.error().message;
  c.eventsUnknown = cg.error().message;
  return c;
}

std::vector<std::string> fillUnread(FinalCounters& c, const FinalCounters& earlier) {
  std::vector<std::string> filled;
  auto take = [&](auto& mine, const auto& theirs, const char* file) {
    if (mine || !theirs) return false;
    mine = theirs;
    filled.emplace_back(file);
    return true;
  };
  if (take(c.memoryPeak, earlier.memoryPeak, file::kMemoryPeak)) c.memoryPeakUnknown.reset();
  take(c.swapPeak, earlier.swapPeak, file::kMemorySwapPeak);
  if (take(c.events, earlier.events, file::kMemoryEvents)) c.eventsUnknown.reset();
  take(c.stat, earlier.stat, file::kMemoryStat);
  return filled;
}

FinalCounters readFinalCounters(const Cgroup& cgroup) {
  FinalCounters c;
  c.cgroup = cgroup.path();
  const Cgroup* cg = &cgroup;
  auto ev = cg->memoryEvents();
  // Every cgroup with the memory controller has memory.events: without it
  // the cgroup was removed under the handle (systemd collects a stopped
  // unit's), and memory.peak is missing for that reason, not the kernel's age.
  bool gone = !ev && ev.error().code == ENOENT;
  if (auto peak = cg->memoryPeak()) {
    c.memoryPeak = *peak;
  } else if (peak.error().code == ENOENT) {
    c.memoryPeakUnknown =
        gone ? fmt::format("{}: the cgroup was removed before its counters were read",
                           cg->describe(file::kMemoryPeak))
             : fmt::format("no {} (needs Linux 5.19)", file::kMemoryPeak);
  } else {
    c.memoryPeakUnknown = peak.error().message;
  }
  if (auto swap = cg->swapPeak()) c.swapPeak = *swap;
  if (auto st = cg->memoryStat()) c.stat = std::move(*st);
  if (ev)
    c.events = std::move(*ev);
  else
    c.eventsUnknown = ev.error().message;
  return c;
}

}  // namespace tally::cgroup
