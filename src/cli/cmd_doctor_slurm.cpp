// `tally doctor --slurm`: the I/O edge of slurm/health.h. Reads
// plugstack.conf (and what it includes), reads the plugin's plugin_version,
// runs `slurmd -V` and `scontrol show node` (the node's GRES and RealMemory as
// slurmctld places them), reads MemTotal, and asks the daemon; health.h judges.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <glob.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/capture.h"
#include "cli/cmd_doctor.h"
#include "cli/exit_codes.h"
#include "devices/gtt_consumer.h"
#include "host/snapshot.h"
#include "probes/meminfo.h"
#include "rpc/client.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"
#include "slurm/health.h"
#include "slurm/plugin_version.h"
#include "slurm/step.h"
#include "util/clock.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::cli {
namespace {

// The check's time (--timeout): each call out gets what is left of it, so
// the whole check ends inside it, and a call it cannot reach is not made and
// says so. The daemon, local, is asked first; slurmctld's calls come last,
// so a slow controller leaves its checks unknown rather than the daemon's
// FAILED (which drains the node).
class TimeBudget {
 public:
  TimeBudget(std::uint64_t us, std::string said)
      : endUs_(clock::monotonicUs() + us), said_(std::move(said)) {}
  // What is left, at most `capMs`; 0 once spent.
  int leftMs(int capMs) const {
    std::uint64_t now = clock::monotonicUs();
    if (now >= endUs_) return 0;
    return static_cast<int>(
        std::min<std::uint64_t>((endUs_ - now) / 1000, static_cast<std::uint64_t>(capMs)));
  }
  std::string spent(std::string_view call) const {
    return fmt::format("{}: not run, the check's time (--timeout {}) was spent", call, said_);
  }

 private:
  std::uint64_t endUs_;
  std::string said_;
};
constexpr int kCallCapMs = 30'000;

Result<std::string> readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{errno, std::strerror(errno)};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// plugstack.conf, then each file its `include` lines name (a glob, as Slurm
// reads them), one level deep: where the tally line is.
void readPlugstack(const std::string& path, slurm::SlurmFacts& f) {
  f.plugstackPath = path;
  auto text = readWhole(path);
  if (!text) {
    f.plugstackError = text.error().message;
    return;
  }
  slurm::Plugstack p = slurm::parsePlugstack(*text);
  for (const auto& pattern : p.includes) {
    if (p.tally) break;
    glob_t g{};
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (std::size_t i = 0; i < g.gl_pathc && !p.tally; ++i) {
        if (auto more = readWhole(g.gl_pathv[i])) {
          p.tally = slurm::parsePlugstack(*more).tally;
          if (p.tally) f.plugstackPath = fmt::format("{} (via {})", g.gl_pathv[i], path);
        }
      }
    }
    ::globfree(&g);
  }
  f.plugstack = std::move(p);
}

// The plugin's SLURM_VERSION_NUMBER, the plugin_version SPANK checks, read
// from the file (slurm/plugin_version.h: loading it here would fail).
void readPlugin(const std::string& pluginDir, slurm::SlurmFacts& f) {
  const auto& path = f.plugstack->tally->path;
  f.pluginPath = path.find('/') == std::string::npos ? pluginDir + "/" + path : path;
  auto bytes = readWhole(f.pluginPath);
  if (!bytes) {
    f.pluginError = bytes.error().message;
    return;
  }
  auto v = slurm::elfExportedU32(*bytes, "plugin_version");
  if (!v) {
    f.pluginError = v.error().message;
    return;
  }
  f.pluginVersion = *v;
}

// slurmd -V only: it prints and exits before slurmd reads its configuration.
void runSlurmd(slurm::SlurmFacts& f, const TimeBudget& budget) {
  int ms = budget.leftMs(kCallCapMs);
  if (ms == 0) {
    f.slurmdError = budget.spent("slurmd -V");
    return;
  }
  auto r = capture({"slurmd", "-V"}, 1u << 20, ms);
  if (!r) {
    f.slurmdError = fmt::format("slurmd -V: {}", r.error().message);
  } else if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) {
    f.slurmdError =
        fmt::format("slurmd -V failed: {}", text::truncateUtf8(text::trim(r->err + r->out), 300));
  } else {
    f.slurmdVersion = r->out + r->err;
  }
}

// The daemon's pools (the plugin's pool's budget, and which GTT ceiling its
// headroom reads) and its devices' VRAM.
void askDaemon(const std::string& socket, const std::string& pool, slurm::SlurmFacts& f,
               devices::GttConsumer& consumer, const TimeBudget& budget) {
  auto c = rpc::Client::connect(socket);
  if (!c) {
    f.daemonError = c.error().message;
    return;
  }
  auto pools = c->call(rpc::api::ListPools{}, {}, std::max(budget.leftMs(10'000), 1));
  if (!pools || !pools->ok) {
    f.daemonError = pools ? pools->error.message : pools.error().message;
    return;
  }
  f.daemonAnswered = true;
  auto doc = rpc::api::decodeDocument(pools->result, "pools");
  if (!doc) return;
  for (const auto& p : (*doc)["pools"]) {
    if (!p.is_object() || p.value("pool", "") != pool) continue;
    f.poolFound = true;
    if (auto b = p.find("gpu_memory_budget"); b != p.end() && b->is_number_unsigned())
      f.poolBudget = b->get<std::uint64_t>();
    if (auto n = p.find("capacity"); n != p.end() && n->is_number_unsigned())
      f.poolCapacity = n->get<std::uint64_t>();
    if (auto g = p.find("gtt_ceiling"); g != p.end() && g->is_string())
      consumer = devices::parseGttConsumer(g->get<std::string>()).value_or(consumer);
  }
  // The devices' VRAM, as the daemon reads sysfs: the GRES beyond it is GTT.
  auto overview = c->call(rpc::api::Overview{}, {}, std::max(budget.leftMs(10'000), 1));
  if (!overview || !overview->ok || !overview->result.is_object()) {
    f.vramError = "the daemon's overview did not answer";
    return;
  }
  std::uint64_t vram = 0;
  bool any = false;
  const auto& devices = overview->result.value("devices", nlohmann::json::array());
  for (const auto& d : devices.is_array() ? devices : nlohmann::json::array()) {
    const auto& total = d.value("regions", nlohmann::json::object())
                            .value("vram", nlohmann::json::object())
                            .value("total_bytes", nlohmann::json());
    if (total.is_number_unsigned()) {
      vram += total.get<std::uint64_t>();
      any = true;
    }
  }
  if (any)
    f.vramTotalBytes = vram;
  else
    f.vramError = "no device exports mem_info_vram_total";
}

// The GTT ceiling `consumer`'s clients meet, summed over the devices: read
// as `tally gpu` and the daemon's headroom read it (host::Snapshot). Unknown
// when any device's is: a sum of the known ones would be a ceiling the
// kernel may never grant.
void readGttCeiling(const fs::RootPaths& paths, devices::GttConsumer consumer,
                    slurm::SlurmFacts& f) {
  auto proc = fs::Root::open(paths.proc);
  auto sys = fs::Root::open(paths.sys);
  if (!proc || !sys) {
    f.gttCeilingError = (proc ? sys : proc).error().message;
    return;
  }
  auto host = host::readSnapshot(*proc, *sys);
  if (host.devices.devices.empty()) {
    f.gttCeilingError =
        host.devicesError.value_or("no DRM device under " + paths.sys + "/class/drm");
    return;
  }
  std::uint64_t sum = 0;
  std::vector<std::string> which;
  for (const auto& d : host.devices.devices) {
    const char* name = nullptr;
    auto c = host.ceilings(d).forConsumer(consumer, &name);
    if (!c) {
      f.gttCeilingError = fmt::format(
          "{}'s {} GTT ceiling is unknown (tally doctor says why)", d.key,
          consumer == devices::GttConsumer::Smaller ? "smaller"
                                                    : devices::gttConsumerName(consumer));
      return;
    }
    sum += *c;
    which.push_back(fmt::format("{} {}", d.key, name ? name : "?"));
  }
  f.gttCeilingBytes = sum;
  f.gttCeilingSource = fmt::format("{}, the pool's gtt_ceiling = {}", fmt::join(which, " + "),
                                   devices::gttConsumerName(consumer));
}

// What Slurm hands out here (slurmctld's record of this node: its GRES and
// RealMemory) and what the host has (MemTotal).
void readNode(slurm::SlurmFacts& f, const TimeBudget& budget) {
  if (auto m = readWhole("/proc/meminfo")) {
    f.memTotalBytes = probes::parseMemInfo(*m).memTotal;
    if (!f.memTotalBytes) f.memTotalError = "/proc/meminfo has no MemTotal";
  } else {
    f.memTotalError = "/proc/meminfo: " + m.error().message;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) {
    f.nodeRecordError = f.realMemoryError = "gethostname failed";
    return;
  }
  std::string node(host);
  node = node.substr(0, node.find('.'));
  int ms = budget.leftMs(kCallCapMs);
  if (ms == 0) {
    f.nodeRecordError = f.realMemoryError = budget.spent("scontrol show node");
    return;
  }
  auto r = capture({"scontrol", "show", "node", node, "-o"}, 1u << 20, ms);
  if (!r || !WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) {
    f.nodeRecordError = f.realMemoryError =
        fmt::format("scontrol show node {}: {}", node,
                    r ? text::truncateUtf8(text::trim(r->err + r->out), 200) : r.error().message);
    return;
  }
  f.nodeRecord = r->out;
  if (auto cpus = slurm::cpusOfScontrol(r->out))
    f.nodeCpus = *cpus;
  else
    f.nodeCpusError = cpus.error().message;
  auto bytes = slurm::realMemoryOfScontrol(r->out);
  if (bytes)
    f.realMemoryBytes = *bytes;
  else
    f.realMemoryError = bytes.error().message;
}

// PrologFlags (slurmctld's config, as slurmd got it) and sshd's PAM stack.
void readContain(slurm::SlurmFacts& f, const TimeBudget& budget) {
  if (auto pam = readWhole("/etc/pam.d/sshd")) f.pamSlurmAdopt = slurm::pamAdoptsIntoJobs(*pam);
  int ms = budget.leftMs(kCallCapMs);
  if (ms == 0) {
    f.containError = budget.spent("scontrol show config");
    return;
  }
  auto r = capture({"scontrol", "show", "config"}, 1u << 20, ms);
  if (!r || !WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) {
    f.containError =
        fmt::format("scontrol show config: {}",
                    r ? text::truncateUtf8(text::trim(r->err + r->out), 200) : r.error().message);
  } else if (auto c = slurm::containOfScontrolConfig(r->out)) {
    f.contain = *c;
  } else {
    f.containError = c.error().message;
  }
}

// Where slurmd reads plugstack.conf: Slurm's /etc/slurm, or in a configless
// cluster (SlurmctldParameters=enable_configless) slurmd's cache of the
// controller's files, which slurmd links at /run/slurm/conf
// (<SlurmdSpoolDir>/conf-cache: slurmd.c, 22.05 through 26.05).
constexpr const char* kPlugstack = "/etc/slurm/plugstack.conf";
constexpr const char* kConfiglessPlugstack = "/run/slurm/conf/plugstack.conf";

}  // namespace

int runDoctorSlurm(const fs::RootPaths& paths, const DoctorOptions& opts) {
  auto timeoutUs = units::parseDurationUs(opts.slurmTimeout);
  if (!timeoutUs || *timeoutUs < 1'000'000 || *timeoutUs > 3'600'000'000) {
    fmt::print(stderr, "tally doctor: --timeout {}: {}\n", opts.slurmTimeout,
               timeoutUs ? "must be 1s..1h (NHC gives a check 30s)" : timeoutUs.error().message);
    return kExitUsage;
  }
  const TimeBudget budget(*timeoutUs, opts.slurmTimeout);
  slurm::SlurmFacts f;
  std::string plugstack = opts.plugstack;
  if (plugstack.empty()) {
    plugstack = kPlugstack;
    if (::access(kPlugstack, F_OK) != 0 && ::access(kConfiglessPlugstack, F_OK) == 0) {
      plugstack = kConfiglessPlugstack;
      f.plugstackConfigless = true;
    }
  }
  readPlugstack(plugstack, f);
  if (!f.plugstack && opts.plugstack.empty() && !f.plugstackConfigless &&
      ::access(kPlugstack, F_OK) != 0)
    f.plugstackError =
        *f.plugstackError +
        fmt::format(" (nor is there slurmd's configless copy, {})", kConfiglessPlugstack);
  std::string pluginDir = opts.pluginDir.empty() ? TALLY_SLURM_PLUGINDIR : opts.pluginDir;
  slurm::PluginArgs args;
  if (f.plugstack && f.plugstack->tally) {
    readPlugin(pluginDir, f);
    if (auto a = slurm::parsePluginArgs(f.plugstack->tally->args)) args = *a;
  }
  devices::GttConsumer consumer = devices::GttConsumer::Smaller;  // the pools' default
  askDaemon(args.socket, args.pool, f, consumer, budget);
  runSlurmd(f, budget);
  readNode(f, budget);
  readContain(f, budget);
  readGttCeiling(paths, consumer, f);
  auto checks = slurm::judgeSlurm(f);

  bool failed = false, judged = false;
  for (const auto& c : checks) {
    failed = failed || c.state == slurm::CheckState::Failed;
    judged = judged || c.state != slurm::CheckState::Unknown;
  }
  if (opts.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& c : checks)
      j.push_back({{"check", c.name}, {"state", slurm::checkStateName(c.state)}, {"said", c.said}});
    fmt::print("{}\n", j.dump(2));
  } else {
    for (const auto& c : checks)
      fmt::print("{:<10} {:<8} {}\n", c.name, slurm::checkStateName(c.state), c.said);
  }
  if (failed) return kExitDegraded;
  return judged ? kExitOk : kExitCheckFailed;
}

}  // namespace tally::cli
