// `tally daemon` and `tally config check`.
#include "cli/cmd_daemon.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "cli/roots.h"
#include "config/config.h"
#include "contain/host_layout.h"
#include "coverage/assess.h"
#include "daemon/headroom.h"
#include "daemon/metrics_publisher.h"
#include "daemon/server.h"
#include "daemon/service.h"
#include "daemon/systemd_units.h"
#include "devices/drm_devices.h"
#include "devices/ttm.h"
#include "fs/secure_dir.h"
#include "journal/journal.h"
#include "ledger/ledger.h"
#include "metrics/tally_metrics.h"
#include "probes/meminfo.h"
#include "report/gpu_report.h"
#include "util/clock.h"
#include "util/json_view.h"
#include "util/text.h"
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
      "Under systemd use Type=notify (READY/STATUS; WatchdogSec= is honoured). See "
      "docs/daemon.md.\n\n"
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
}

int runDaemon(const fs::RootPaths& paths, const DaemonOptions& o) {
  auto parsed = config::load(o.config);
  if (!parsed.config) {
    fmt::print(stderr,
               "{}tally daemon: fix the config ('tally config check {}' lists every problem)\n",
               config::formatProblems(parsed, o.config), o.config);
    return kExitDegraded;
  }
  config::Config cfg = *parsed.config;
  if (cfg.daemon.stateDir.empty()) cfg.daemon.stateDir = ledger::defaultStateDir();
  // The ledger lives only where nobody but root (or the daemon's user) can
  // change names: SQLite creates its -wal and -shm files there by name.
  if (auto s = ledger::createStateDir(cfg.daemon.stateDir); !s) {
    fmt::print(stderr, "tally daemon: {}\n", s.error().message);
    return kExitEnvironment;
  }
  if (auto s = fs::checkTrustedDir(cfg.daemon.stateDir, "[daemon] state_dir", fs::DirUse::Private);
      !s) {
    fmt::print(stderr, "tally daemon: {}\n", s.error().message);
    return kExitEnvironment;
  }
  auto db = ledger::Ledger::open(cfg.daemon.stateDir);
  if (!db) {
    fmt::print(stderr, "tally daemon: {}\n", db.error().message);
    return kExitEnvironment;
  }
  // Fail closed: a damaged ledger cannot promise to record what it grants.
  if (auto damage = db->damage(); !damage || !damage->empty()) {
    fmt::print(
        stderr,
        "tally daemon: the ledger {} is damaged ({}); leases are not granted on a ledger that "
        "cannot record them. "
        "Keep a copy (tally ledger export), then restore it from a backup or move it aside\n",
        db->path(), damage ? fmt::format("{}", fmt::join(*damage, "; ")) : damage.error().message);
    return kExitEnvironment;
  }
  auto roots = openRoots(paths);
  if (!roots) return kExitEnvironment;
  if (!roots->cgroup) {
    fmt::print(stderr, "tally daemon: warning: {}; leases cannot be metered, only admitted\n",
               roots->cgroupError.value_or("no cgroup v2 root"));
  }
  // One fd per client: a thousand waiting clients need more than the
  // default soft limit of 1024 (the daemon never uses select()).
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &nofile);
  }
  daemon::Server server(cfg, daemon::limitsFromConfig(cfg.daemon));
  if (auto s = server.listen(); !s) {
    fmt::print(stderr, "tally daemon: {}\n", s.error().message);
    return kExitEnvironment;
  }
  // The system manager, for attach --unit and MemoryMax on attached units.
  // Its absence is not fatal: everything else works without systemd.
  std::unique_ptr<daemon::SystemdUnits> units;
  if (auto bus = contain::SystemdBus::connect(geteuid() != 0)) {
    units = std::make_unique<daemon::SystemdUnits>(std::move(*bus));
    sd_bus_attach_event(units->bus(), server.event(), SD_EVENT_PRIORITY_NORMAL);
  } else {
    fmt::print(stderr,
               "tally daemon: note: no systemd manager ({}); attach --unit is unavailable\n",
               bus.error().message);
  }
  long page = sysconf(_SC_PAGESIZE);
  journal::SdJournal journal;
  daemon::ServiceEnv env{roots->proc,
                         roots->sys,
                         roots->cgroup ? &*roots->cgroup : nullptr,
                         server,
                         server,
                         units.get(),
                         page > 0 ? static_cast<std::uint64_t>(page) : 4096,
                         &journal,
                         daemon::limitsFromConfig(cfg.daemon)};
  daemon::Service service(cfg, *db, env);
  {
    // GTT -> memcg coverage on this kernel, before any lease is admitted.
    auto devs = devices::discoverDrmDevices(roots->sys);
    std::optional<coverage::ProbeOptions> probe;
    if (cfg.daemon.coverageProbe) {
      probe = coverage::ProbeOptions{};
      probe->bytes = cfg.daemon.coverageProbeBytes;
    }
    auto a =
        coverage::assess(roots->proc, roots->sys, roots->cgroup ? &*roots->cgroup : nullptr,
                         devs ? *devs : devices::DeviceMap{}, contain::kernelRelease(roots->proc),
                         coverage::ownCgroup(roots->proc), probe);
    fmt::print(stderr, "tally daemon: {} ({})\n", a.verdict.line, a.verdict.basis);
    service.setCoverage(a);
  }
  auto recovered = service.recover();
  if (!recovered) {
    // The open leases run somewhere with bounds the daemon must keep: without
    // them it would grant their pools twice.
    fmt::print(stderr, "tally daemon: {}; not starting (the leases it cannot read may still run)\n",
               recovered.error().message);
    return kExitEnvironment;
  }
  for (const auto& line : *recovered) fmt::print(stderr, "tally daemon: recovery: {}\n", line);

  // Metrics: rendered after every sample round, from the same overview as `tally metrics`.
  std::string textfilePath =
      o.metricsTextfile.empty() ? cfg.daemon.metricsTextfile : o.metricsTextfile;
  std::optional<daemon::Textfile> textfile;
  if (!textfilePath.empty()) {
    auto t = daemon::Textfile::open(textfilePath);
    if (!t) {
      fmt::print(stderr, "tally daemon: {}\n", t.error().message);
      return kExitEnvironment;
    }
    textfile.emplace(std::move(*t));
  }
  std::string listenAt = o.metricsListen.empty() ? cfg.daemon.metricsListen : o.metricsListen;
  std::unique_ptr<daemon::MetricsHttp> http;
  if (!listenAt.empty()) {
    auto at = daemon::parseListenAddress(listenAt);
    if (!at) {
      // Named as the operator set it: the flag, or the config key (checked at load already).
      fmt::print(stderr, "tally daemon: {} {}\n",
                 o.metricsListen.empty() ? "daemon.metrics_listen" : "--metrics-listen",
                 at.error().message);
      return kExitUsage;
    }
    auto started = daemon::MetricsHttp::start(server.event(), *at);
    if (!started) {
      fmt::print(stderr, "tally daemon: {}\n", started.error().message);
      return kExitEnvironment;
    }
    http = std::move(*started);
    fmt::print(stderr, "tally daemon: metrics on http://{}:{}/metrics\n",
               at->host.find(':') == std::string::npos ? at->host : "[" + at->host + "]",
               http->port());
  }
  if (textfile || http) {
    // The lambda outlives this block (the loop calls it): it owns its state.
    auto publish = [&service, &http, &textfile, textfileFailing = false]() mutable {
      std::string text = metrics::renderOverview(service.overview(clock::realtimeNs()));
      if (textfile) {
        auto s = textfile->write(text);
        // Said once when it starts failing and once when it recovers, not every second.
        if (!s && !textfileFailing)
          fmt::print(stderr, "tally daemon: {}; retrying every sample\n", s.error().message);
        if (s && textfileFailing)
          fmt::print(stderr, "tally daemon: metrics textfile {} written again\n", textfile->path());
        textfileFailing = !s;
      }
      if (http) http->publish(std::move(text));
    };
    publish();
    server.afterSample(publish);
    if (textfile) fmt::print(stderr, "tally daemon: metrics textfile {}\n", textfile->path());
  }
  if (auto v = db->verify(); v && !v->problems.empty()) {
    fmt::print(stderr,
               "tally daemon: WARNING: the ledger's hash chain is broken ({}); run "
               "'tally ledger verify'\n",
               text::counted(v->problems.size(), "problem", "problems"));
  }
  fmt::print(stderr, "tally daemon: serving {} on {}; ledger {}; {}\n",
             text::counted(cfg.pools.size(), "pool", "pools"), cfg.daemon.socket, db->path(),
             service.statusLine());
  int rc = server.run(service);
  fmt::print(
      stderr,
      "tally daemon: stopping; {} (live leases stay in the ledger and are re-adopted on restart)\n",
      service.statusLine());
  if (units) sd_bus_detach_event(units->bus());
  return rc;
}

void addConfigCommand(CLI::App& app, ConfigCheckOptions& o) {
  auto* cfg = app.add_subcommand("config", "Check the daemon's TOML config");
  cfg->require_subcommand(1);
  auto* check = cfg->add_subcommand(
      "check", "Validate a config: every problem with its line; unknown keys are errors");
  check->footer(
      "Besides the file itself, what the daemon would find on this host: the metrics textfile's\n"
      "directory must exist (a problem); pool devices not on this host and budgets above the\n"
      "host's memory or the devices' total are warnings.\n"
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
}

namespace {

// What the daemon would find on this host: problems it would refuse to start
// with, and warnings about settings that cannot mean what they say here.
struct HostFindings {
  std::vector<std::string> problems, warnings;
};

HostFindings checkOnHost(const config::Config& c, const fs::RootPaths& roots) {
  HostFindings f;
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
  auto proc = fs::Root::open(roots.proc);
  auto sys = fs::Root::open(roots.sys);
  host::Snapshot host;
  if (proc && sys) host = host::readSnapshot(*proc, *sys);
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
    auto totals = daemon::poolTotals(p, host);
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

}  // namespace

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
  HostFindings host = checkOnHost(c, roots);
  bool valid = host.problems.empty();
  const auto& d = c.daemon;
  std::string stateDir = d.stateDir.empty() ? ledger::defaultStateDir() : d.stateDir;
  if (o.json) {
    json pools = json::array();
    for (const auto& p : c.pools) {
      pools.push_back({{"name", p.name},
                       {"capacity", p.capacity},
                       {"memory_budget", jsonview::orNull(p.memoryBudget)},
                       {"gpu_memory_budget", jsonview::orNull(p.gpuMemoryBudget)},
                       {"devices", p.devices},
                       {"gtt_ceiling", devices::gttConsumerName(p.gttCeiling)}});
    }
    json dj = {
        {"socket", d.socket},
        {"socket_group", d.socketGroup ? json(*d.socketGroup) : json(nullptr)},
        {"state_dir", stateDir},
        {"sample_interval_us", d.sampleIntervalUs},
        {"near_bound_margin_percent", d.nearBoundMarginPercent},
        {"near_bound_interval_us", d.nearBoundIntervalUs},
        {"queue_timeout_us", d.queueTimeoutUs},
        {"samples_full_resolution_us", d.samplesFullResolutionUs},
        {"samples_max_age_us", d.samplesMaxAgeUs},
        {"samples_max_rows", d.samplesMaxRows},
        {"client_grace_us", d.clientGraceUs},
        {"coverage_probe", d.coverageProbe},
        {"coverage_probe_size_bytes", d.coverageProbeBytes},
        {"keep_gpu_memory_max", d.keepGpuMemoryMax},
        {"metrics_textfile", d.metricsTextfile.empty() ? json(nullptr) : json(d.metricsTextfile)},
        {"metrics_listen", d.metricsListen.empty() ? json(nullptr) : json(d.metricsListen)},
        {"max_connections", d.maxConnections},
        {"max_connections_per_uid", d.maxConnectionsPerUid},
        {"max_queued", d.maxQueued},
        {"max_queued_per_connection", d.maxQueuedPerConnection},
        {"idle_timeout_us", d.idleTimeoutUs},
        {"request_timeout_us", d.requestTimeoutUs}};
    fmt::print("{}\n", json{{"file", o.file},
                            {"valid", valid},
                            {"problems", host.problems},
                            {"warnings", host.warnings},
                            {"daemon", dj},
                            {"pools", pools}}
                           .dump(2));
    return valid ? kExitOk : kExitDegraded;
  }
  for (const auto& p : host.problems) fmt::print(stderr, "{}: {}\n", o.file, p);
  for (const auto& w : host.warnings) fmt::print(stderr, "{}: warning: {}\n", o.file, w);
  if (!valid) return kExitDegraded;
  auto dur = [](std::uint64_t us) { return units::humanDuration(us); };
  fmt::print("{}: valid\n", o.file);
  fmt::print("[daemon]\n");
  fmt::print("  socket                    {} (group {})\n", d.socket,
             d.socketGroup.value_or("the daemon's"));
  fmt::print("  state_dir                 {}\n", stateDir);
  fmt::print("  sample_interval           {}\n", dur(d.sampleIntervalUs));
  fmt::print("  queue_timeout             {}\n",
             d.queueTimeoutUs ? dur(d.queueTimeoutUs) : std::string("0 (until granted)"));
  fmt::print("  samples_full_resolution   {}\n", dur(d.samplesFullResolutionUs));
  fmt::print("  samples_max_age           {}\n", dur(d.samplesMaxAgeUs));
  fmt::print("  samples_max_rows          {}\n", d.samplesMaxRows);
  fmt::print("  client_grace              {}\n", dur(d.clientGraceUs));
  fmt::print("  coverage_probe            {} ({})\n", d.coverageProbe ? "on" : "off",
             units::humanBytes(d.coverageProbeBytes));
  fmt::print("  keep_gpu_memory_max       {}\n", d.keepGpuMemoryMax ? "yes" : "no");
  fmt::print("  metrics_textfile          {}\n",
             d.metricsTextfile.empty() ? std::string("off") : d.metricsTextfile);
  fmt::print("  metrics_listen            {}\n",
             d.metricsListen.empty() ? std::string("off") : d.metricsListen);
  fmt::print("  max_connections           {} ({} per uid)\n", d.maxConnections,
             d.maxConnectionsPerUid);
  fmt::print("  max_queued                {} ({} per connection)\n", d.maxQueued,
             d.maxQueuedPerConnection);
  fmt::print("  idle_timeout              {}\n", dur(d.idleTimeoutUs));
  fmt::print("  request_timeout           {}\n", dur(d.requestTimeoutUs));
  for (const auto& p : c.pools) {
    fmt::print("[pools.{}]\n", p.name);
    fmt::print("  capacity                  {}\n", p.capacity);
    fmt::print("  memory_budget             {}\n",
               p.memoryBudget ? units::humanBytes(*p.memoryBudget) : std::string("none"));
    fmt::print("  gpu_memory_budget         {}\n",
               p.gpuMemoryBudget ? units::humanBytes(*p.gpuMemoryBudget) : std::string("none"));
    fmt::print("  devices                   {}\n",
               p.devices.empty() ? std::string("every GPU with mem_info_*")
                                 : fmt::format("{}", fmt::join(p.devices, ", ")));
    fmt::print("  gtt_ceiling               {}\n", devices::gttConsumerName(p.gttCeiling));
  }
  return kExitOk;
}

}  // namespace tally::cli
