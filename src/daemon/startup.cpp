// tally daemon's start-up, in order: the config, the state directory and
// the ledger (fail closed on damage), the roots, the socket, the systemd
// manager, GTT -> memcg coverage, recovery of the open leases, the metrics
// outputs, then the event loop until SIGTERM/SIGINT.
#include "daemon/startup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <set>

#include "bpf/kernel_charge_bpf.h"
#include "cgroup/tree_watch.h"
#include "config/config.h"
#include "contain/host_layout.h"
#include "contain/systemd_lease.h"
#include "coverage/assess.h"
#include "daemon/host_check.h"
#include "daemon/metrics_publisher.h"
#include "daemon/pool_access.h"
#include "daemon/server.h"
#include "daemon/service.h"
#include "daemon/systemd_units.h"
#include "devices/drm_devices.h"
#include "fs/secure_dir.h"
#include "journal/journal.h"
#include "ledger/ledger.h"
#include "metrics/tally_metrics.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::daemon {

bpf::LoadOptions kernelChargeLoadOptions(const fs::Root& sys, const config::Config& cfg) {
  bpf::LoadOptions o;
  o.devices = bpf::discoverDeviceRules(sys);
  std::uint64_t admitted = cfg.daemon.maxQueued;
  for (const auto& p : cfg.pools) admitted += p.capacity;
  o.sizing = bpf::sizeMaps(bpf::hostGpuMemory(sys), admitted, cfg.daemon.kernelObjectsPerLease);
  return o;
}

Ended serve(const StartOptions& o) {
  // SIGHUP is a reload once the loop runs (Server::onHangup); a SIGHUP that
  // comes while the daemon starts waits for it, and never stops the start.
  sigset_t hangup;
  sigemptyset(&hangup);
  sigaddset(&hangup, SIGHUP);
  sigprocmask(SIG_BLOCK, &hangup, nullptr);
  auto parsed = config::load(o.config);
  if (!parsed.config) {
    fmt::print(stderr,
               "{}tally daemon: fix the config ('tally config check {}' lists every problem)\n",
               config::formatProblems(parsed, o.config), o.config);
    return Ended::ConfigProblems;
  }
  config::Config cfg = *parsed.config;
  if (cfg.daemon.stateDir.empty()) cfg.daemon.stateDir = ledger::defaultStateDir();
  // The ledger lives only where nobody but root (or the daemon's user) can
  // change names: SQLite creates its -wal and -shm files there by name.
  if (auto s = ledger::createStateDir(cfg.daemon.stateDir); !s) {
    fmt::print(stderr, "tally daemon: {}\n", s.error().message);
    return Ended::Environment;
  }
  if (auto s = fs::checkTrustedDir(cfg.daemon.stateDir, "[daemon] state_dir", fs::DirUse::Private);
      !s) {
    fmt::print(stderr, "tally daemon: {}\n", s.error().message);
    return Ended::Environment;
  }
  auto db = ledger::Ledger::open(cfg.daemon.stateDir);
  if (!db) {
    fmt::print(stderr, "tally daemon: {}\n", db.error().message);
    return Ended::Environment;
  }
  db->deferHead();  // the witness moves after each turn's replies (Service::endOfTurn)
  // Fail closed: a damaged ledger cannot promise to record what it grants.
  if (auto damage = db->damage(); !damage || !damage->empty()) {
    fmt::print(
        stderr,
        "tally daemon: the ledger {} is damaged ({}); leases are not granted on a ledger that "
        "cannot record them. "
        "Keep a copy (tally ledger export), then restore it from a backup or move it aside\n",
        db->path(), damage ? fmt::format("{}", fmt::join(*damage, "; ")) : damage.error().message);
    return Ended::Environment;
  }
  auto proc = fs::Root::open(o.roots.proc);
  auto sys = fs::Root::open(o.roots.sys);
  if (!proc || !sys) {
    fmt::print(stderr, "tally daemon: {}\n", (!proc ? proc : sys).error().message);
    return Ended::Environment;
  }
  std::optional<fs::Root> cgroupRoot;
  std::string cgroupError;
  if (auto cg = fs::Root::open(o.roots.cgroup)) {
    cgroupRoot.emplace(std::move(*cg));
  } else {
    cgroupError = cg.error().message;
    fmt::print(stderr, "tally daemon: warning: {}; leases cannot be metered, only admitted\n",
               cgroupError);
  }
  const fs::Root* cgRoot = cgroupRoot ? &*cgroupRoot : nullptr;
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
    return Ended::Environment;
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
  // The kernel charge and bound (bpf/): loaded where the kernel and the
  // unit allow, its maps and links pinned so it outlives this process; the
  // line says what is on and, where something is off, why and what to do.
  bpf::LoadOptions chargeOptions = kernelChargeLoadOptions(*sys, cfg);
  bpf::Started kernelCharge;
  if (cfg.daemon.kernelCharge) {
    kernelCharge = bpf::startKernelCharge(*sys, chargeOptions);
  } else {
    kernelCharge.verdict.why = "daemon.kernel_charge = false in the config";
  }
  fmt::print(stderr, "tally daemon: kernel charge: {}\n", bpf::describe(kernelCharge.verdict));
  long page = sysconf(_SC_PAGESIZE);
  journal::SdJournal journal;
  daemon::ServiceEnv env{*proc,
                         *sys,
                         cgRoot,
                         server,
                         server,
                         units.get(),
                         page > 0 ? static_cast<std::uint64_t>(page) : 4096,
                         &journal,
                         daemon::limitsFromConfig(cfg.daemon)};
  env.kernelCharge = kernelCharge.charge.get();
  env.build = o.build;
  // A reload (SIGHUP, `tally daemon reload`) reads the file it started from,
  // through the same gate as `tally config check`.
  env.readConfig = [path = o.config, &proc, &sys] { return readChecked(path, *proc, *sys); };
  // A host where no lease can be contained is said now, loudly, not found
  // out at the first refused run (daemon status and the metrics say it too).
  env.cannotContain =
      contain::readHostLayout(*proc, cgroupRoot ? &*cgroupRoot : nullptr, cgroupError).problems;
  if (!env.cannotContain.empty())
    fmt::print(stderr,
               "tally daemon: WARNING: no lease can be contained on this host: {}. Run leases end "
               "as containment-refused and attaches are not bounded until this is fixed (tally "
               "doctor says how)\n",
               fmt::join(env.cannotContain, "; "));
  // The leases' cgroup trees followed by inotify: one instance, at most half
  // the watches root may hold. Without it every walk is whole (as before).
  std::optional<std::uint64_t> maxUserWatches;
  if (auto text = proc->read("sys/fs/inotify/max_user_watches", 64))
    maxUserWatches = text::parseU64(text::trim(*text));
  auto treeWatcher =
      cgroup::TreeWatcher::open(cgroup::TreeWatcher::defaultMaxWatches(maxUserWatches));
  // Unref'd before the watcher it calls goes (declared after it).
  struct SourceUnref {
    void operator()(sd_event_source* s) const { sd_event_source_unref(s); }
  };
  std::unique_ptr<sd_event_source, SourceUnref> treeWatchSource;
  if (treeWatcher) {
    env.treeWatcher = treeWatcher->get();
    auto onTreeChange = [](sd_event_source*, int, uint32_t, void* w) {
      static_cast<cgroup::TreeWatcher*>(w)->drain();
      return 0;
    };
    sd_event_source* source = nullptr;
    if (sd_event_add_io(server.event(), &source, env.treeWatcher->fd(), EPOLLIN, onTreeChange,
                        env.treeWatcher) >= 0)
      treeWatchSource.reset(source);  // else drained at each sample round only
  } else {
    fmt::print(stderr,
               "tally daemon: note: {}; each lease's cgroup tree is walked whole at every "
               "sample\n",
               treeWatcher.error().message);
  }
  daemon::Service service(cfg, *db, env);
  service.setKernelCharge(kernelCharge.verdict);
  {
    // GTT -> memcg coverage on this kernel, before any lease is admitted.
    auto devs = devices::discoverDrmDevices(*sys);
    std::optional<coverage::ProbeOptions> probe;
    if (cfg.daemon.coverageProbe) {
      probe = coverage::ProbeOptions{};
      probe->bytes = cfg.daemon.coverageProbeBytes;
    }
    auto a = coverage::assess(*proc, *sys, cgRoot, devs ? *devs : devices::DeviceMap{},
                              contain::kernelRelease(*proc), coverage::ownCgroup(*proc), probe);
    fmt::print(stderr, "tally daemon: {} ({})\n", a.verdict.line, a.verdict.basis);
    service.setCoverage(a);
  }
  auto recovered = service.recover();
  if (!recovered) {
    // The open leases run somewhere with bounds the daemon must keep: without
    // them it would grant their pools twice.
    fmt::print(stderr, "tally daemon: {}; not starting (the leases it cannot read may still run)\n",
               recovered.error().message);
    return Ended::Environment;
  }
  for (const auto& line : *recovered) fmt::print(stderr, "tally daemon: recovery: {}\n", line);
  // Declared leases ([leases.*]): systemd's unit signals reach the service.
  if (units) units->onChange([&service](const std::string& unit) { service.unitChanged(unit); });
  for (const auto& line : service.startDeclared())
    fmt::print(stderr, "tally daemon: declared lease {}\n", line);

  // Metrics: rendered after every sample round, from the same overview as `tally metrics`.
  std::string textfilePath =
      o.metricsTextfile.empty() ? cfg.daemon.metricsTextfile : o.metricsTextfile;
  std::optional<daemon::Textfile> textfile;
  if (!textfilePath.empty()) {
    auto t = daemon::Textfile::open(textfilePath);
    if (!t) {
      fmt::print(stderr, "tally daemon: {}\n", t.error().message);
      return Ended::Environment;
    }
    textfile.emplace(std::move(*t));
  }
  std::string listenAt = o.metricsListen.empty() ? cfg.daemon.metricsListen : o.metricsListen;
  std::unique_ptr<daemon::MetricsHttp> http;
  if (!listenAt.empty()) {
    auto at = daemon::parseListenAddress(listenAt, cfg.daemon.metricsBeyondLoopback);
    if (!at) {
      // Named as the operator set it: the flag, or the config key (checked at load already).
      fmt::print(stderr, "tally daemon: {} {}\n",
                 o.metricsListen.empty() ? "daemon.metrics_listen" : "--metrics-listen",
                 at.error().message);
      return Ended::Usage;
    }
    // Who may read them: said at start, in so many words.
    daemon::HttpLimits httpLimits;
    if (!cfg.daemon.metricsAllowUsers.empty()) {
      auto lookup = daemon::systemLookup();
      std::set<uid_t> uids;
      for (const auto& name : cfg.daemon.metricsAllowUsers) {
        if (auto uid = lookup.user(name))
          uids.insert(*uid);
        else
          fmt::print(stderr,
                     "tally daemon: daemon.metrics_allow_users: no user '{}'; it reads nothing\n",
                     name);
      }
      httpLimits.allowUids = std::move(uids);
    }
    auto started = daemon::MetricsHttp::start(server.event(), *at, httpLimits);
    if (!started) {
      fmt::print(stderr, "tally daemon: {}\n", started.error().message);
      return Ended::Environment;
    }
    http = std::move(*started);
    fmt::print(
        stderr, "tally daemon: metrics on http://{}:{}/metrics{}\n",
        at->host.find(':') == std::string::npos ? at->host : "[" + at->host + "]", http->port(),
        !config::isLoopback(*at)
            ? std::string(" (beyond loopback, as daemon.metrics_beyond_loopback allows: anyone who "
                          "reaches this port reads every lease's name, attributes and figures; "
                          "firewall it to your Prometheus)")
        : cfg.daemon.metricsAllowUsers.empty()
            ? std::string(
                  " (every local user can read every lease's name, attributes and figures "
                  "there, which the socket's group may withhold; daemon.metrics_allow_users "
                  "restricts it)")
            : fmt::format(" (root and {} only: daemon.metrics_allow_users)",
                          fmt::join(cfg.daemon.metricsAllowUsers, ", ")));
  }
  if (textfile || http) {
    // The lambda outlives this block (the loop calls it): it owns its state.
    auto publish = [&service, &http, &textfile, textfileFailing = false,
                    lastWritten = std::string()]() mutable {
      std::string text = metrics::renderOverview(service.overview(clock::realtimeNs()));
      // Rewritten only when it changed (node_exporter reads it on its own clock).
      if (textfile && (text != lastWritten || textfileFailing)) {
        auto s = textfile->write(text);
        // Said once when it starts failing and once when it recovers, not every second.
        if (!s && !textfileFailing)
          fmt::print(stderr, "tally daemon: {}; retrying every sample\n", s.error().message);
        if (s && textfileFailing)
          fmt::print(stderr, "tally daemon: metrics textfile {} written again\n", textfile->path());
        textfileFailing = !s;
        if (s) lastWritten = text;
      }
      if (http) http->publish(std::move(text));
    };
    publish();
    server.afterSample(publish);
    if (textfile) fmt::print(stderr, "tally daemon: metrics textfile {}\n", textfile->path());
  }
  // Fail closed on damage nobody accepted: running leases stay bounded, new
  // ones wait for an operator's decision (docs/daemon.md, "Ledger").
  {
    auto open = db->unacceptedDamage();
    if (!open.empty()) {
      fmt::print(stderr,
                 "tally daemon: the ledger {} is damaged ({}): {}. No new lease is granted until "
                 "an operator runs 'tally ledger verify' and restores the ledger or accepts the "
                 "damage ('tally ledger acknowledge'); running leases stay bounded\n",
                 db->path(), text::counted(open.size(), "problem", "problems"),
                 fmt::join(open, "; "));
    }
    service.setLedgerDamage(std::move(open));
  }
  fmt::print(stderr, "tally daemon: serving {} on {}; ledger {}; {}\n",
             text::counted(cfg.pools.size(), "pool", "pools"), cfg.daemon.socket, db->path(),
             service.statusLine());
  server.onHangup([&service] { (void)service.reload(); });  // said in the journal either way
  int rc = server.run(service);
  fmt::print(
      stderr,
      "tally daemon: stopping; {} (live leases stay in the ledger and are re-adopted on restart)\n",
      service.statusLine());
  if (units) sd_bus_detach_event(units->bus());
  return rc == 0 ? Ended::Stopped : Ended::Environment;
}

}  // namespace tally::daemon
