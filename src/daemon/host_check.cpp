#include "daemon/host_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "admission/engine.h"
#include "daemon/headroom.h"
#include "fs/secure_dir.h"
#include "ledger/ledger.h"
#include "util/units.h"

namespace tally::daemon {

// What the daemon would find on this host: problems it would refuse to start
// with, and warnings about settings that cannot mean what they say here.
HostFindings checkOnHost(const config::Config& c, const host::Snapshot& host,
                         const std::string& stateDir) {
  HostFindings f;
  if (const auto& g = c.daemon.socketGroup) {
    // A group of many members needs a bigger buffer (ERANGE): grown, never
    // read as "does not exist".
    std::vector<char> buf(65536);
    group gr{}, *found = nullptr;
    int rc = 0;
    while ((rc = ::getgrnam_r(g->c_str(), &gr, buf.data(), buf.size(), &found)) == ERANGE &&
           buf.size() < (16u << 20))
      buf.resize(buf.size() * 4);
    if (rc != 0 || !found)
      f.problems.push_back(fmt::format(
          "daemon.socket_group '{}' does not exist on this host (groupadd {} or remove the key): "
          "the daemon would not start",
          *g, *g));
  }
  // Only a directory that exists can be judged; the daemon creates a missing
  // one itself (0700, its own).
  struct stat sd {};
  if (::stat(stateDir.c_str(), &sd) == 0) {
    if (auto s = fs::checkTrustedDir(stateDir, "[daemon] state_dir", fs::DirUse::Private); !s)
      f.problems.push_back(s.error().message + ": the daemon would not start");
  }
  // A declared lease is asked for at every start of its unit: one its pools
  // could never grant would be refused each time.
  admission::Engine engine(c.pools);
  auto totalsOf = [&](const config::Pool& p) { return poolTotals(p, host); };
  for (const auto& l : c.leases) {
    admission::Request r;
    r.id = l.name;
    r.pools = l.attach.declared.pools;
    r.declaration = l.attach.declared.declaration;
    admission::fillDefaults(r.declaration, r.pools, c.pools);
    r.placed = l.attach.declared.placed;
    // What the config alone can never grant (a budget, a share, a missing
    // declaration) is a problem; what only this host's size refuses (a
    // MemTotal or a GTT ceiling smaller than the lease) is a warning: a
    // config shared by a fleet is right on larger nodes, and the daemon
    // runs such a unit unleased, saying so.
    if (auto s = engine.check(r); !s)
      f.problems.push_back(
          fmt::format("leases.{}: {}: the daemon would refuse it at every start of {}", l.name,
                      s.error().message, l.unit()));
    else if (auto h = engine.check(r, totalsOf); !h)
      f.warnings.push_back(
          fmt::format("leases.{}: {} on this host: the daemon here would run {} unleased", l.name,
                      h.error().message, l.unit()));
  }
  if (!c.daemon.metricsTextfile.empty()) {
    const std::string& file = c.daemon.metricsTextfile;
    std::string dir = file.substr(0, std::max<std::size_t>(file.rfind('/'), 1));
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      f.problems.push_back(fmt::format(
          "daemon.metrics_textfile: the directory {} does not exist; create it (e.g. install -d -m "
          "0755 {}) or change the path: the daemon would not start",
          dir, dir));
  }
  std::vector<std::string> here;
  for (const auto& d : host.devices.devices)
    if (d.pdev) here.push_back(*d.pdev);
  for (const auto& p : c.pools) {
    for (const auto& dev : p.devices) {
      if (std::find(here.begin(), here.end(), dev) == here.end())
        f.warnings.push_back(fmt::format(
            "pools.{}.devices: {} is not a DRM device on this host ({}); its GPU headroom cannot "
            "be measured here",
            p.name, dev,
            here.empty() ? std::string("none here")
                         : fmt::format("here: {}", fmt::join(here, ", "))));
    }
    auto totals = poolTotals(p, host);
    if (p.memoryBudget && totals.hostBytes && *p.memoryBudget > *totals.hostBytes)
      f.warnings.push_back(fmt::format(
          "pools.{}.memory_budget {} is more than this host's memory (MemTotal {}): holders "
          "will be bounded by headroom first",
          p.name, units::humanBytes(*p.memoryBudget), units::humanBytes(*totals.hostBytes)));
    if (p.gpuMemoryBudget && totals.gpuBytes && *p.gpuMemoryBudget > *totals.gpuBytes)
      f.warnings.push_back(fmt::format(
          "pools.{}.gpu_memory_budget {} is more than the pool's devices hold (GTT ceiling + "
          "VRAM: {})",
          p.name, units::humanBytes(*p.gpuMemoryBudget), units::humanBytes(*totals.gpuBytes)));
  }
  return f;
}

}  // namespace tally::daemon

namespace tally::daemon {

Result<config::Config> readChecked(const std::string& path, const fs::Root& proc,
                                   const fs::Root& sys) {
  auto parsed = config::load(path);
  if (!parsed.config) {
    std::vector<std::string> problems;
    for (const auto& p : parsed.problems)
      problems.push_back(p.line ? fmt::format("{}:{}: {}", path, p.line, p.message) : p.message);
    return Error{
        0, fmt::format("{} ('tally config check {}' lists them)", fmt::join(problems, "; "), path)};
  }
  const config::Config& c = *parsed.config;
  std::string stateDir = c.daemon.stateDir.empty() ? ledger::defaultStateDir() : c.daemon.stateDir;
  auto found = checkOnHost(c, host::readSnapshot(proc, sys), stateDir);
  if (!found.problems.empty())
    return Error{0, fmt::format("{}: {}", path, fmt::join(found.problems, "; "))};
  return std::move(*parsed.config);
}

}  // namespace tally::daemon
