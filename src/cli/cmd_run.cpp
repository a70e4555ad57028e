// `tally run`: one lease, contained, verified, metered and recorded.
#include "cli/cmd_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "cli/cmd_client.h"
#include "cli/option_values.h"
#include "cli/roots.h"
#include "cli/socket_path.h"
#include "contain/choose.h"
#include "contain/detached_job.h"
#include "contain/host_layout.h"
#include "coverage/handover.h"
#include "devices/unmeterable.h"
#include "host/snapshot.h"
#include "lease/attributes.h"
#include "lease/outcome.h"
#include "lease/record.h"
#include "lease/unit_names.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"
#include "run/daemon_lease.h"
#include "run/journal_observer.h"
#include "run/runner.h"
#include "util/text.h"
#include "util/unique_fd.h"
#include "util/units.h"

namespace tally::cli {
namespace {

using lease::kRunExitRefused;
using lease::kRunExitUsage;

// Sizes and durations are parsed here, not by CLI11, so a bad value names the
// option and the accepted forms.
std::optional<lease::LeaseSpec> buildSpec(const RunOptions& o) {
  lease::LeaseSpec spec;
  spec.id = lease::newLeaseId();
  spec.command = o.command;
  lease::Declaration& d = spec.declaration;
  if (!attributesOption("run", o.attrs, d.attributes)) return std::nullopt;
  if (spec.command.empty()) {
    fmt::print(stderr, "tally run: no command given; usage: tally run [options] -- CMD ARGS...\n");
    return std::nullopt;
  }
  d.name = o.name.empty() ? std::string(fs::baseName(spec.command.front())) : o.name;
  if (!lease::validLeaseName(d.name)) {
    if (!o.name.empty()) {
      fmt::print(stderr, "tally run: --name '{}' must be 1-64 of [A-Za-z0-9._-]\n", o.name);
      return std::nullopt;
    }
    d.name = "lease";
  }
  if (!memoryLimitOption("run", "--memory-max", o.memoryMax, d.memoryMax) ||
      !memoryLimitOption("run", "--memory-high", o.memoryHigh, spec.memoryHigh) ||
      !sizeOption("run", "--memory-swap-max", o.memorySwapMax, spec.memorySwapMax) ||
      !sizeOption("run", "--gpu-memory-max", o.gpuMemoryMax, d.gpuMemoryMax) ||
      !sizeOption("run", "--gpu-memory-high", o.gpuMemoryHigh, d.gpuMemoryHigh) ||
      !gpuLimitsOption("run", d.gpuMemoryMax, d.gpuMemoryHigh)) {
    return std::nullopt;
  }
  if (auto action = enforce::parseAction(o.gpuAction)) d.gpuAction = *action;
  d.gpuOverSamples = o.gpuOverSamples;
  if (o.oomPolicy == "kill")
    spec.oomPolicy = lease::OomPolicy::Kill;
  else if (o.oomPolicy == "stop")
    spec.oomPolicy = lease::OomPolicy::Stop;
  else
    spec.oomPolicy = lease::OomPolicy::Continue;
  auto interval = units::parseDurationUs(o.sampleInterval);
  if (!interval) {
    fmt::print(stderr, "tally run: --sample-interval {}\n", interval.error().message);
    return std::nullopt;
  }
  if (*interval < 10'000) {
    fmt::print(stderr, "tally run: --sample-interval {} is below the 10ms minimum\n",
               o.sampleInterval);
    return std::nullopt;
  }
  spec.sampleIntervalUs = *interval;
  if (!text::endsWith(o.slice, ".slice") || o.slice.size() <= 6) {
    fmt::print(stderr,
               "tally run: --slice '{}' is not a slice name (e.g. tally.slice, gpu-batch.slice)\n",
               o.slice);
    return std::nullopt;
  }
  spec.slice = o.slice;
  spec.manager = o.system     ? lease::Manager::System
                 : o.user     ? lease::Manager::User
                 : o.cgroupfs ? lease::Manager::Cgroupfs
                              : lease::Manager::Auto;
  if (!o.cgroupParent.empty()) {
    if (!o.cgroupfs) {
      fmt::print(stderr, "tally run: --cgroup-parent needs --cgroupfs\n");
      return std::nullopt;
    }
    spec.cgroupParent = o.cgroupParent;
  }
  return spec;
}

// tally run --pool P --detach: the same tally run, as a transient service
// (contain/detached_job.h); this client returns once the daemon has the lease.
int runDetached(const RunOptions& o, const lease::LeaseSpec& spec) {
  if (o.pools.empty()) {
    fmt::print(stderr,
               "tally run: --detach needs --pool: a detached job's lease is held through the "
               "daemon (tally run --pool P --detach -- CMD)\n");
    return kRunExitUsage;
  }
  if (o.cgroupfs) {
    fmt::print(stderr, "tally run: --detach runs the job as a systemd service; drop --cgroupfs\n");
    return kRunExitUsage;
  }
  // The same manager a lease's scope would use: the system's for root, the caller's own otherwise.
  const bool user = o.user || (!o.system && ::geteuid() != 0);
  auto bus = contain::SystemdBus::connect(user);
  if (!bus) {
    fmt::print(stderr, "tally run: --detach needs a systemd manager: {}; the command was not run\n",
               bus.error().message);
    return kRunExitRefused;
  }
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    fmt::print(stderr, "tally run: cannot find this tally binary (/proc/self/exe): {}\n",
               std::strerror(errno));
    return kRunExitRefused;
  }
  exe[n] = '\0';
  contain::DetachedJob job;
  job.unit = contain::detachedUnitName();
  const std::string manager = user ? "user" : "system";
  job.argv = {exe,      "run",
              "--attr", fmt::format("{}={}", lease::kJobUnitKey, job.unit),
              "--attr", fmt::format("{}={}", lease::kJobManagerKey, manager)};
  for (const auto& w : o.optionWords)
    if (w != "--detach") job.argv.push_back(w);
  job.argv.push_back("--");
  job.argv.insert(job.argv.end(), spec.command.begin(), spec.command.end());
  job.description = text::truncateUtf8(
      fmt::format("tally job {}: {}", spec.declaration.name, fmt::join(spec.command, " ")), 200);
  job.environment = {fmt::format("{}=1", contain::kDetachedEnv),
                     "TALLY_SOCKET=" + socketPath(o.socket)};
  if (const char* sd = std::getenv("TALLY_STATE_DIR"))
    job.environment.push_back(std::string("TALLY_STATE_DIR=") + sd);
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd)) job.workingDirectory = cwd;
  if (user) {
    // Without lingering the user manager, and every job in it, stops at the
    // last logout: the very thing --detach is for.
    const char* name = std::getenv("USER");
    if (!name || ::access(fmt::format("/var/lib/systemd/linger/{}", name).c_str(), F_OK) != 0) {
      fmt::print(stderr,
                 "tally run: warning: your user manager stops when your last session ends, and "
                 "this job with it; to keep it running after you log out: loginctl enable-linger "
                 "{} (as root)\n",
                 name ? name : "$USER");
    }
  }
  auto started = contain::startDetached(**bus, job, 120'000'000);
  if (!started) {
    fmt::print(stderr, "tally run: {}; the command was not run\n", started.error().message);
    return kRunExitRefused;
  }
  if (!started->ready) {
    fmt::print(stderr, "tally run: the detached job did not start: {}\n", started->status);
    return kRunExitRefused;
  }
  // STATUS=lease <id> granted (...) | lease <id> queued: ...
  std::string id;
  if (text::startsWith(started->status, "lease ")) id = started->status.substr(6, 12);
  // The workload's own lines are filed under the lease's scope, tally run's under the service.
  std::string journal =
      fmt::format("journalctl {}-u {}{} -f", user ? "--user " : "", job.unit,
                  id.empty() ? std::string() : " -u " + lease::leaseScopeName(id));
  fmt::print(stderr, "tally run: {}; detached as {}\n", started->status, job.unit);
  fmt::print(stderr, "tally run: output: tally logs {} (or {})\n", id.empty() ? "ID" : id, journal);
  if (!id.empty()) fmt::print(stderr, "tally run: stop it: tally lease release {}\n", id);
  if (!id.empty()) fmt::print("{}\n", id);
  return 0;
}

// A detached job's tally run tells systemd (Type=notify) when the daemon
// knows its lease, or why it has none; outside one, nothing is sent.
void notifySystemd(bool detached, const std::string& state) {
  if (detached) (void)sd_notify(0, state.c_str());
}

}  // namespace

void addRunCommand(CLI::App& app, RunOptions& o) {
  auto* run = app.add_subcommand(
      "run", "Run a command as a lease: its own cgroup, declared memory bounds, metered, recorded");
  run->footer(
      "The command starts only after its cgroup exists and reads back exactly what was declared:\n"
      "the process is in the lease's cgroup, memory.max/high/swap.max equal the declared sizes\n"
      "(\"max\" when not declared: tally never adds a limit), memory.oom.group matches the OOM "
      "policy.\n"
      "Otherwise it never runs and tally exits 125 saying what is missing.\n\n"
      "Containment: a transient systemd scope tally-<id>.scope in its own slice "
      "<slice>-<id>.slice\n"
      "(system manager for root, user manager otherwise), or with --cgroupfs (or when no systemd\n"
      "manager answers) a cgroup tally creates in a delegated cgroup v2 subtree.\n"
      "Sizes: bytes, or K/M/G/T (1024-based; KiB, MiB... spellings too). Durations: 500ms, 1s, "
      "2m.\n\n"
      "Examples:\n"
      "  tally run --memory-max 48G -- python serve.py\n"
      "  tally run --name llama --memory-max 64G --memory-high 60G --gpu-memory-max 40G --json -- "
      "./llama-server\n"
      "  tally run --user --memory-max 2G -- make -j8\n\n"
      "Exit status mirrors the workload: its exit code, or 128+N when signal N ended it (an OOM "
      "kill is\n"
      "137, and the outcome says oom-killed). tally's own: 2 usage error, 125 containment refused "
      "(the\n"
      "command never ran; also a workload whose wait status was lost), 126 command not "
      "executable,\n"
      "127 command not found.\n"
      "SIGINT/SIGTERM/SIGHUP stop the whole lease (SIGTERM, SIGKILL after 10 s; a second signal "
      "kills at once).\n"
      "Outcomes are appended to the ledger <state-dir>/ledger.sqlite (see 'tally ledger').\n\n"
      "With --pool the lease comes from the tally daemon: tally waits in the pool's queue "
      "(showing\n"
      "its position), then runs the scope as above; the daemon meters it and records the outcome "
      "in\n"
      "its ledger. No daemon reachable with --pool: exit 125, nothing runs. Without --pool tally "
      "run\n"
      "works standalone, with no daemon at all.\n\n"
      "A --pool job lives as long as this tally run: a lost terminal (SIGHUP) stops it. With\n"
      "--detach it runs as a transient service instead (tally-job-<token>.service: the system\n"
      "manager for root, your user manager otherwise), which holds the lease; tally returns once\n"
      "the daemon has the lease, output goes to the journal (tally logs ID), and\n"
      "'tally lease release ID' stops it:\n"
      "  tally run --pool batch --detach --name train -- python train.py");
  run->add_option("--name", o.name, "label for the lease (default: the command's basename)");
  run->add_option("--attr", o.attrs,
                  "KEY=VALUE the operator declares about the workload (e.g. model=qwen3-32b), "
                  "recorded and shown\n"
                  "in seat rows and metrics as declared; repeatable, up to 16");
  run->add_option("--memory-max", o.memoryMax, "hard memory limit (MemoryMax=, memory.max)");
  run->add_option("--memory-high", o.memoryHigh, "throttle limit (MemoryHigh=, memory.high)");
  run->add_option("--memory-swap-max", o.memorySwapMax,
                  "swap limit (MemorySwapMax=, memory.swap.max)");
  run->add_option("--oom-policy", o.oomPolicy,
                  "on an OOM kill: kill the whole lease, stop it, or continue")
      ->check(CLI::IsMember({"kill", "stop", "continue"}))
      ->default_str("kill");
  run->add_option("--gpu-memory-max", o.gpuMemoryMax,
                  "GPU memory bound (GTT+VRAM of the lease's DRM clients, fdinfo): over it for "
                  "--gpu-over-samples\n"
                  "samples in a row, tally kills the whole lease (docs/enforcement.md)");
  run->add_option("--gpu-memory-high", o.gpuMemoryHigh,
                  "GPU memory level that raises an event when crossed; never kills");
  run->add_option("--gpu-memory-action", o.gpuAction,
                  "what --gpu-memory-max does: refuse = the kernel fails the allocation that\n"
                  "would cross it (ENOMEM) where the daemon's kernel charge is active, with\n"
                  "the sampled kill as backstop (the kill alone elsewhere); kill = the sampled\n"
                  "kill only; report = events only (`tally doctor` says if refusal is active)")
      ->check(CLI::IsMember(enforce::actionNames()))
      ->default_str(enforce::actionName(enforce::kDefaultAction));
  run->add_option("--gpu-over-samples", o.gpuOverSamples,
                  "consecutive samples over --gpu-memory-max before acting")
      ->check(CLI::Range(1u, 100u))
      ->default_str("2");
  run->add_option("--sample-interval", o.sampleInterval, "how often the meters sample")
      ->default_str("1s");
  run->add_option("--slice", o.slice, "parent slice of the lease's own slice")
      ->default_str("tally.slice");
  auto* user = run->add_flag("--user", o.user, "use the calling user's systemd manager");
  auto* system =
      run->add_flag("--system", o.system, "use the system manager (needs root or polkit)");
  auto* cgroupfs =
      run->add_flag("--cgroupfs", o.cgroupfs,
                    "create the lease cgroup directly in a delegated cgroup v2 subtree");
  user->excludes(system)->excludes(cgroupfs);
  system->excludes(cgroupfs);
  run->add_option(
      "--cgroup-parent", o.cgroupParent,
      "with --cgroupfs: the delegated subtree (default: the parent of tally's own cgroup)");
  run->add_option("--state-dir", o.stateDir,
                  "where the ledger lives (default: $TALLY_STATE_DIR, /var/lib/tally for root, "
                  "else ~/.local/state/tally)");
  run->add_flag("--json", o.json, "print the outcome record (JSON) on stdout");
  run->add_flag("--quiet,-q", o.quiet,
                "do not print the start line ('tally: lease ID running as UNIT (limits)') on "
                "stderr");
  auto* pool = run->add_option("--pool", o.pools,
                               "acquire the lease from the tally daemon first, holding this pool "
                               "(repeat for several);\n"
                               "the daemon queues it under the pool's capacity and budgets, meters "
                               "it and records the outcome")
                   ->group("Daemon (pools)");
  run->add_option("--priority", o.priority, "queue priority, -100..100 (higher first)")
      ->default_str("0")
      ->group("Daemon (pools)");
  run->add_option("--queue-timeout", o.queueTimeout,
                  "give up when not granted within this long (default: the daemon's)")
      ->group("Daemon (pools)");
  run->add_flag("--detach", o.detach,
                "with --pool: run as a transient service that outlives this terminal; output "
                "in the journal (tally logs ID)");
  run->add_option("--reconnect-timeout", o.reconnectTimeout,
                  "how long to wait for a restarted daemon before printing the outcome instead")
      ->default_str("60s")
      ->group("Daemon (pools)");
  addSocketOption(run, o.socket);
  (void)pool;
  // main() hands over what follows "--" untouched; without "--" the command
  // may not contain options (tally run sleep 5 works, sh -c needs "--").
  run->add_option("command", o.command,
                  "the command and its arguments; put them after -- when they have options")
      ->expected(-1);
}

int runRun(const fs::RootPaths& paths, const RunOptions& opts) {
  auto spec = buildSpec(opts);
  if (!spec) return kRunExitUsage;
  if (opts.detach) return runDetached(opts, *spec);
  const bool detachedJob = std::getenv(contain::kDetachedEnv) != nullptr;
  if (!opts.pools.empty() && !detachedJob && !opts.quiet) {
    fmt::print(stderr,
               "tally run: this job ends if this terminal goes (SIGHUP); to let it run on "
               "without one, add --detach (its output goes to the journal: tally logs ID)\n");
  }

  // Standalone leases are recorded in the local ledger; pool leases by the
  // daemon. A ledger that exists is opened now (its coverage row plans the
  // run). One that does not is made only once the command ran: a refusal is
  // said on stderr and never creates a ledger (as root: the system's, which
  // is the daemon's), but it must be creatable before anything runs.
  std::optional<ledger::Ledger> ledger;
  std::string stateDir;
  if (opts.pools.empty()) {
    stateDir = opts.stateDir.empty() ? ledger::defaultStateDir() : opts.stateDir;
    if (ledger::ledgerExists(stateDir)) {
      auto opened = ledger::Ledger::open(stateDir);
      if (!opened) {
        fmt::print(stderr, "tally run: {}; the command was not run\n", opened.error().message);
        return kRunExitRefused;
      }
      ledger.emplace(std::move(*opened));
    } else if (auto s = ledger::canCreateLedger(stateDir); !s) {
      fmt::print(stderr, "tally run: {}; the command was not run\n", s.error().message);
      return kRunExitRefused;
    }
  }
  auto reconnect = units::parseDurationUs(opts.reconnectTimeout);
  if (!reconnect) {
    fmt::print(stderr, "tally run: --reconnect-timeout {}\n", reconnect.error().message);
    return kRunExitUsage;
  }
  std::optional<std::uint64_t> queueTimeout;
  if (!durationOption("run", "--queue-timeout", opts.queueTimeout, queueTimeout))
    return kRunExitUsage;
  auto roots = openRoots(paths);
  if (!roots) return kRunExitRefused;
  const fs::Root* cgroupRoot = roots->cgroup ? &*roots->cgroup : nullptr;
  auto layout = contain::readHostLayout(roots->proc, cgroupRoot, roots->cgroupError.value_or(""));
  // Standalone hand-over (docs/coverage.md): when the daemon proved on this
  // very kernel that GTT is charged to memcg, MemoryMax must hold host memory
  // and GTT both. A row from another kernel proves nothing here.
  // Standalone, no daemon makes the bound advisory: it acts as declared.
  if (ledger) {
    auto rec = ledger::lastCoverage(*ledger);
    spec->kernel.gttCharged =
        rec && rec->kernel == layout.kernel &&
        rec->coverage == coverage::coverageName(coverage::Coverage::HostAndGtt);
    spec->kernel.keepGpuMemoryMax = true;
    if (const auto plan = spec->plan(); plan.memoryMaxWithGpu) {
      fmt::print(stderr,
                 "tally run: the ledger records that kernel {} charges GTT to memcg: MemoryMax = "
                 "--memory-max + --gpu-memory-max = {}\n",
                 layout.kernel, *plan.memoryMax);
    }
  }

  // The stop signals are read through a signalfd, so they are blocked before
  // the fork; the held child unblocks them before it execs.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stopSignals, sig);
  sigprocmask(SIG_BLOCK, &stopSignals, nullptr);
  UniqueFd signalFd(signalfd(-1, &stopSignals, SFD_CLOEXEC | SFD_NONBLOCK));

  std::optional<run::DaemonLease> daemonLease;
  if (!opts.pools.empty()) {
    daemonLease.emplace(socketPath(opts.socket), *reconnect);
    rpc::api::Acquire request;
    rpc::api::Declared& d = request.declared;
    d.pools = opts.pools;
    d.declaration = spec->declaration;
    d.priority = opts.priority;
    d.timeoutUs = queueTimeout;
    auto id = daemonLease->acquire(
        request, signalFd.get(), [detachedJob](const std::string& lease, const std::string& words) {
          notifySystemd(detachedJob,
                        fmt::format("READY=1\nSTATUS=lease {} queued: {}", lease, words));
        });
    if (!id) {
      fmt::print(stderr, "tally run: {}; the command was not run\n", id.error().message);
      notifySystemd(detachedJob, "STATUS=" + id.error().message);
      return kRunExitRefused;
    }
    spec->id = *id;
    fmt::print(stderr, "tally run: lease {} granted ({})\n", *id, fmt::join(opts.pools, ", "));
    notifySystemd(detachedJob, fmt::format("READY=1\nSTATUS=lease {} granted ({})", *id,
                                           fmt::join(opts.pools, ", ")));
    // The hand-over (docs/coverage.md): the run is planned for the kernel
    // state the daemon planned its lease for (where the kernel charges GTT to
    // memcg, MemoryMax holds host memory and GTT both, and the daemon may have
    // made gpu_memory_max advisory).
    const auto& g = daemonLease->grant();
    // A figure this run did not declare, its pool did (default_memory_max,
    // default_gpu_memory_max): the run is bounded by what its lease says.
    for (auto [mine, granted, what] :
         {std::tuple{&spec->declaration.memoryMax, g.declaredMemoryMax, "memory_max"},
          std::tuple{&spec->declaration.gpuMemoryMax, g.declaredGpuMemoryMax, "gpu_memory_max"}}) {
      if (*mine || !granted) continue;
      *mine = granted;
      fmt::print(stderr, "tally run: {} {} is the pool's default (declared in its config)\n", what,
                 units::humanBytes(*granted));
    }
    spec->kernel = g.kernelState();
    if (const auto plan = spec->plan(); plan.memoryMaxWithGpu) {
      fmt::print(stderr,
                 "tally run: this kernel charges GTT to memcg (coverage {}): MemoryMax = "
                 "--memory-max + --gpu-memory-max = {}\n",
                 g.coverage, *plan.memoryMax);
    }
  }

  // Fail closed: a standalone bound on a device whose driver prints no memory
  // figure would never fire (a pool lease is checked by the daemon).
  std::optional<std::string> unmeterable;
  if (spec->declaration.gpuMemoryMax && !daemonLease)
    unmeterable = devices::gpuBoundRefusal(host::readSnapshot(roots->proc, roots->sys).devices, {});
  auto choice = unmeterable ? contain::Choice{nullptr, *unmeterable, ""}
                            : contain::chooseContainment(*spec, roots->proc, cgroupRoot, layout);
  if (!choice.note.empty()) fmt::print(stderr, "tally run: {}\n", choice.note);
  long page = sysconf(_SC_PAGESIZE);
  run::JournalObserver journalObserver(spec->id, spec->declaration.name);
  run::RunEnv env{roots->proc,
                  roots->sys,
                  cgroupRoot,
                  signalFd.get(),
                  page > 0 ? static_cast<std::uint64_t>(page) : 4096,
                  daemonLease ? static_cast<run::LeaseObserver*>(&*daemonLease) : &journalObserver,
                  {}};
  if (!opts.quiet) {
    env.onStart = [](const lease::LeaseRecord& r) {
      fmt::print(stderr, "{}\n", lease::startLine(r));
      std::fflush(stderr);  // before the workload writes anything
    };
  }
  auto record = run::runLease(*spec, env, choice.lease.get(), choice.refusal);
  choice.lease.reset();

  auto doc = lease::recordJson(record);
  // A standalone run is its user's own (a pool lease's owner is the daemon's word).
  if (!daemonLease && doc["lease"].is_object()) doc["lease"]["owner_uid"] = ::getuid();
  std::string recordText = doc.dump();
  if (!stateDir.empty() && !ledger &&
      record.outcome.cls != lease::OutcomeClass::ContainmentRefused) {
    // The command ran: its record is the first the ledger holds.
    auto opened = ledger::Ledger::open(stateDir);
    if (opened)
      ledger.emplace(std::move(*opened));
    else
      fmt::print(stderr, "tally run: WARNING: {}; the record follows\n{}\n", opened.error().message,
                 recordText);
  }
  if (ledger) {
    if (auto s = ledger->appendOutcome(record.spec.id, recordText); !s) {
      // Nothing lost: the record goes to stderr when the ledger refuses it.
      fmt::print(stderr, "tally run: WARNING: {}; the record follows\n{}\n", s.error().message,
                 recordText);
    }
  } else if (daemonLease && !daemonLease->recorded()) {
    if (record.outcome.cls == lease::OutcomeClass::ContainmentRefused)
      daemonLease->withdraw(record.outcome.summary);
    else
      fmt::print(stderr,
                 "tally run: WARNING: the daemon did not record lease {}; the record follows\n{}\n",
                 record.spec.id, recordText);
  }
  if (!daemonLease) journalObserver.ended(doc);
  for (const auto& w : record.warnings) fmt::print(stderr, "tally run: warning: {}\n", w);
  if (opts.json)
    fmt::print("{}\n", doc.dump(2));
  else
    fmt::print(stderr, "{}\n", lease::summaryLine(record));
  return record.outcome.exitStatus;
}

}  // namespace tally::cli
