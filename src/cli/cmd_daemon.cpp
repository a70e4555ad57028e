// `tally daemon` and `tally config check`.
#include "cli/cmd_daemon.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "bpf/kernel_charge_bpf.h"
#include "cli/exit_codes.h"
#include "config/config.h"
#include "config/listing.h"
#include "config/suggest.h"
#include "daemon/host_check.h"
#include "daemon/startup.h"
#include "host/snapshot.h"
#include "ledger/ledger.h"
#include "util/units.h"

namespace tally::cli {

void addDaemonCommand(CLI::App& app, DaemonOptions& o) {
  auto* cmd = app.add_subcommand(
      "daemon", "Serve pools: admission with memory budgets, metered leases, the ledger");
  cmd->footer(
      "One event loop serves the socket ([daemon] socket, mode 0660), meters every live lease "
      "each\n"
      "sample_interval, watches lease cgroups' cgroup.events, and records lifecycle rows and "
      "outcomes\n"
      "in the hash-chained ledger under [daemon] state_dir. On start it re-adopts the leases the "
      "ledger\n"
      "says are open (same unit, same cgroup inode) and closes the ones that vanished as 'lost'.\n"
      "Under systemd use Type=notify (READY/STATUS; WatchdogSec= is honoured). SIGHUP reads "
      "the config\nagain (tally daemon reload --help says what changes). See docs/daemon.md.\n\n"
      "Example: tally daemon --config /etc/tally/tally.toml\n"
      "Exit status: 0 stopped by SIGTERM/SIGINT, 1 the config has problems, 3 the socket, state "
      "dir or\n"
      "/proc cannot be used.");
  cmd->add_option("--config", o.config, "the TOML config (pools, budgets, socket, state dir)")
      ->default_str(kDefaultConfig);
  cmd->add_option(
      "--metrics-textfile", o.metricsTextfile,
      "keep Prometheus metrics in this file, replaced atomically after every sample round, for\n"
      "node_exporter's textfile collector (e.g. /var/lib/prometheus/node-exporter/tally.prom)");
  cmd->add_option(
      "--metrics-listen", o.metricsListen,
      "serve GET /metrics on this loopback HOST:PORT (e.g. 127.0.0.1:9464); off by default");
  auto* load = cmd->add_subcommand(
      "load-kernel-charge",
      "Load and attach the kernel charge and bound (BPF) for a hardened daemon");
  load->footer(
      "Loads the programs (docs/enforcement.md, \"In the kernel\") and pins them under\n"
      "/sys/fs/bpf/tally, replacing what an earlier start pinned; the daemon then uses their maps\n"
      "with CAP_BPF alone. Loading needs CAP_SYS_ADMIN besides CAP_BPF and CAP_PERFMON (libbpf\n"
      "lists the kernel's module BTF to attach to drm's functions): the shipped tally.service "
      "runs\n"
      "it as its privileged ExecStartPre=+. It prints what is on, or why not, and exits 0 either\n"
      "way: the daemon starts without it and says so.\n"
      "Example: tally daemon load-kernel-charge");
  load->callback([&o] { o.loadKernelCharge = true; });
}

int runDaemon(const fs::RootPaths& paths, const DaemonOptions& o) {
  if (o.loadKernelCharge) {
    auto sys = fs::Root::open(paths.sys);
    if (!sys) {
      fmt::print(stderr, "tally daemon load-kernel-charge: {}\n", sys.error().message);
      return kExitEnvironment;
    }
    // The maps are sized from the host and the config the daemon will read
    // (its limits); without a readable config, from its defaults.
    auto parsed = config::load(o.config);
    config::Config cfg = parsed.config ? *parsed.config : config::Config{};
    if (!parsed.config)
      fmt::print(stderr,
                 "tally daemon load-kernel-charge: {} not used ({}); the maps get the default "
                 "room\n",
                 o.config,
                 parsed.problems.empty() ? "unreadable" : parsed.problems.front().message);
    auto st = bpf::startKernelCharge(*sys, daemon::kernelChargeLoadOptions(*sys, cfg), true);
    fmt::print("tally: kernel charge: {}\n", bpf::describe(st.verdict));
    return kExitOk;
  }
  switch (daemon::serve({o.config, o.metricsTextfile, o.metricsListen, paths, o.build})) {
    case daemon::Ended::Stopped:
      return kExitOk;
    case daemon::Ended::ConfigProblems:
      return kExitDegraded;
    case daemon::Ended::Usage:
      return kExitUsage;
    case daemon::Ended::Environment:
      return kExitEnvironment;
  }
  return kExitEnvironment;
}

void addConfigCommand(CLI::App& app, ConfigCheckOptions& o) {
  auto* cfg =
      app.add_subcommand("config", "Check the daemon's TOML config, or suggest one for this host");
  cfg->require_subcommand(1);
  auto* check = cfg->add_subcommand(
      "check", "Validate a config: every problem with its line; unknown keys are errors");
  check->footer(
      "Besides the file itself, every check the daemon makes at start, on this host, in one "
      "pass:\n"
      "the socket group exists, the state directory is trusted (root's, not group- or "
      "world-writable),\n"
      "the metrics textfile's directory exists, and each [leases.*] could be granted by its "
      "pools\n"
      "(problems); pool devices not on this host and budgets above the host's memory or the\n"
      "devices' total are warnings. An unknown key says the known key nearest to it.\n"
      "Exit status: 0 valid (every effective setting is printed; warnings on stderr), 1 problems\n"
      "found (one per line as FILE:LINE: ...).\n\n"
      "Example config:\n"
      "  [daemon]\n"
      "  socket = \"/run/tally/tally.sock\"\n"
      "  state_dir = \"/var/lib/tally\"\n"
      "  sample_interval = \"1s\"\n\n"
      "  [pools.gpu]\n"
      "  capacity = 4\n"
      "  gpu_memory_budget = \"96GiB\"\n"
      "  memory_budget = \"64GiB\"\n"
      "  devices = [\"0000:c6:00.0\"]\n"
      "  gtt_ceiling = \"smaller\"   # or \"graphics\" (Mesa, Vulkan), \"compute\" (ROCm)");
  check->add_option("FILE", o.file, "the config file")->default_str(kDefaultConfig);
  check->add_flag("--json", o.json, "print the effective config (or the problems) as JSON");

  auto* suggest = cfg->add_subcommand(
      "suggest", "Print a config whose pools fit this host (MemTotal, GTT ceilings, VRAM)");
  suggest->footer(
      "Like slurmd -C: the figures come from this host, each commented with its source. GTT is "
      "system RAM\nthe memory cgroup does not see, so the GPU budget (the devices' GTT ceilings, "
      "at most MemTotal\nless the reserve, plus VRAM) and the host memory budget (what is left) "
      "never together promise\nmore RAM than there is. Each pool's default share is its budget "
      "over its capacity, so a bare\n'tally run --pool gpu -- CMD' is granted. Nothing is "
      "declared until you install the file:\n"
      "  tally config suggest > tally.toml && tally config check tally.toml\n"
      "  sudo install -m 0644 tally.toml /etc/tally/tally.toml && sudo systemctl reload tally\n"
      "Exit status: 0 printed, 2 a bad option, 3 /proc/meminfo cannot be read.");
  suggest->add_option("--capacity", o.capacity, "leases a pool holds at once")
      ->default_val(4)
      ->check(CLI::Range(1, 1'000'000));
  suggest->add_option("--reserve", o.reserve,
                      "memory kept out of every budget for the system and unleased work, e.g. "
                      "16G (default: an eighth of MemTotal, at least 4 GiB)");
  suggest->callback([&o] { o.suggest = true; });
}

int runConfigSuggest(const fs::RootPaths& roots, const ConfigCheckOptions& o) {
  config::SuggestOptions opts;
  opts.capacity = o.capacity;
  if (!o.reserve.empty()) {
    auto r = units::parseSize(o.reserve);
    if (!r) {
      fmt::print(stderr, "tally config suggest: --reserve {}: {}\n", o.reserve, r.error().message);
      return kExitUsage;
    }
    opts.reserve = *r;
  }
  auto proc = fs::Root::open(roots.proc);
  auto sys = fs::Root::open(roots.sys);
  if (!proc || !sys) {
    fmt::print(stderr, "tally config suggest: {}\n", (!proc ? proc : sys).error().message);
    return kExitEnvironment;
  }
  host::Snapshot snapshot = host::readSnapshot(*proc, *sys);
  config::HostFigures figures;
  figures.memTotal = snapshot.meminfo.memTotal;
  for (const auto& d : snapshot.devices.devices) {
    const devices::DeviceMemory* gtt = d.region("gtt");
    const devices::DeviceMemory* vram = d.region("vram");
    if (!gtt && !vram) continue;  // no memory figures: nothing a budget could name
    auto ceilings = snapshot.ceilings(d);
    auto ceiling = ceilings.forConsumer(devices::GttConsumer::Smaller);
    if (gtt && !ceiling) {
      figures.leftOut.push_back(fmt::format("{}: its GTT ceiling is unknown ({})", d.key,
                                            ceilings.graphics.unknown.value_or("no figure")));
      continue;
    }
    if (vram && !vram->totalBytes) {
      figures.leftOut.push_back(fmt::format("{}: its VRAM size is unknown", d.key));
      continue;
    }
    figures.gpus.push_back(
        {d.pdev.value_or(d.key), d.pdev.has_value(), gtt ? ceiling : std::optional<std::uint64_t>(),
         ceilings.smallerInWords(), vram ? vram->totalBytes : std::optional<std::uint64_t>()});
  }
  auto text = config::suggestConfig(figures, opts);
  if (!text) {
    fmt::print(stderr, "tally config suggest: {}\n", text.error().message);
    return figures.memTotal ? kExitUsage : kExitEnvironment;
  }
  fmt::print("{}", *text);
  return kExitOk;
}

int runConfigCheck(const fs::RootPaths& roots, const ConfigCheckOptions& o) {
  auto parsed = config::load(o.file);
  using json = nlohmann::ordered_json;
  if (!parsed.config) {
    if (o.json) {
      json probs = json::array();
      for (const auto& p : parsed.problems)
        probs.push_back({{"line", p.line}, {"message", p.message}});
      fmt::print("{}\n", json{{"file", o.file}, {"valid", false}, {"problems", probs}}.dump(2));
    } else {
      fmt::print(stderr, "{}", config::formatProblems(parsed, o.file));
    }
    return kExitDegraded;
  }
  const auto& c = *parsed.config;
  host::Snapshot snapshot;
  auto proc = fs::Root::open(roots.proc);
  auto sys = fs::Root::open(roots.sys);
  if (proc && sys) snapshot = host::readSnapshot(*proc, *sys);
  std::string stateDir = c.daemon.stateDir.empty() ? ledger::defaultStateDir() : c.daemon.stateDir;
  auto host = daemon::checkOnHost(c, snapshot, stateDir);
  bool valid = host.problems.empty();
  if (o.json) {
    json doc = {{"file", o.file},
                {"valid", valid},
                {"problems", host.problems},
                {"warnings", host.warnings}};
    doc.update(config::effectiveJson(c, stateDir));
    fmt::print("{}\n", doc.dump(2));
    return valid ? kExitOk : kExitDegraded;
  }
  for (const auto& p : host.problems) fmt::print(stderr, "{}: {}\n", o.file, p);
  for (const auto& w : host.warnings) fmt::print(stderr, "{}: warning: {}\n", o.file, w);
  if (!valid) return kExitDegraded;
  fmt::print("{}: valid\n", o.file);
  for (const auto& line : config::effectiveText(c, stateDir)) fmt::print("{}\n", line);
  return kExitOk;
}

}  // namespace tally::cli
