// The client commands as the command line declares them: their options,
// their --help texts, what each one validates before a daemon is asked
// (cmd_client.cpp runs them).
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "cli/cmd_client.h"
#include "cli/container_engine.h"
#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "cli/option_values.h"
#include "cli/print_line.h"
#include "cli/socket_path.h"
#include "lease/attributes.h"
#include "lease/spec.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"
#include "report/gpu_report.h"
#include "rpc/client.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"
#include "util/clock.h"
#include "util/json_view.h"
#include "util/text.h"
#include "util/units.h"
#include "views/daemon_status.h"
#include "views/timeline.h"
#include "views/top.h"

namespace tally::cli {

void addSocketOption(CLI::App* cmd, std::string& socket) {
  cmd->add_option("--socket", socket,
                  "the daemon's socket (default: $TALLY_SOCKET, else the socket in "
                  "/etc/tally/tally.toml, else /run/tally/tally.sock)");
}

void addReplyTimeoutOption(CLI::App* cmd, std::string& timeout) {
  cmd->add_option("--timeout", timeout,
                  "how long the daemon has to answer (exit 3 if it does not; a queued request\n"
                  "then waits for its grant under the queue's own timeout)")
      ->default_str("10s");
}

// An empty ID would match the ledger's rows that belong to no lease.
const CLI::Validator kNonEmptyLeaseId(
    [](std::string& id) {
      return id.empty() ? std::string("a lease id is required (tally leases lists them)")
                        : std::string();
    },
    "");

ClientCommands addClientCommands(CLI::App& app, ClientOptions& o) {
  ClientCommands c;
  c.leases = app.add_subcommand("leases", "Live and queued leases of the daemon");
  c.leases->footer(kReadingExitStatus);
  addSocketOption(c.leases, o.socket);
  addReplyTimeoutOption(c.leases, o.replyTimeout);
  c.leases->add_flag("--json", o.json, "print the leases as JSON");

  auto* lease = app.add_subcommand("lease", "One lease: show it, or release it");
  lease->require_subcommand(1);
  c.leaseShow =
      lease->add_subcommand("show", "A lease's state, meters and ledger rows (live or ended)");
  c.leaseShow->add_option("ID", o.leaseId, "the lease id")->required()->check(kNonEmptyLeaseId);
  c.leaseShow->add_flag("--json", o.json, "print as JSON");
  c.leaseShow->add_option("--svg", o.svg,
                          "also write the memory timeline (host and GPU against their limits) "
                          "as an SVG image");
  c.leaseShow->add_option("--state-dir", o.stateDir,
                          "the ledger to read when no daemon answers (default: $TALLY_STATE_DIR, "
                          "/var/lib/tally for root, else ~/.local/state/tally)");
  c.leaseShow->footer(
      "A live lease: its state, pools, declared limits, attributes, age and meters. An ended "
      "one:\n"
      "its outcome, limits and peaks from the ledger, through the daemon or, when none answers, "
      "from\n"
      "the local ledger (a standalone 'tally run' lease too). Exit status: 0 ok, 3 neither a "
      "daemon\n"
      "nor a ledger has it, 5 not found.");
  addSocketOption(c.leaseShow, o.socket);
  addReplyTimeoutOption(c.leaseShow, o.replyTimeout);
  c.logs = app.add_subcommand("logs", "A detached job's output, from the journal");
  c.logs->add_option("ID", o.leaseId, "the lease id tally run --detach printed")
      ->required()
      ->check(kNonEmptyLeaseId);
  c.logs->add_flag("--follow,-f", o.follow, "keep printing new lines as they come");
  c.logs->add_option("--lines,-n", o.lines, "only the last N lines");
  c.logs->footer(
      "A 'tally run --pool --detach' job runs as a transient service (tally-job-<token>.service);\n"
      "its output is in the journal: tally run's lines under that unit, the workload's under the\n"
      "lease's scope (tally-<id>.scope). tally logs asks the daemon which unit the job ran as\n"
      "(live or ended) and runs journalctl on both (--user for a user manager's job).\n"
      "Exit status: journalctl's; 3 no daemon, 5 not a detached job or no such lease.");
  addSocketOption(c.logs, o.socket);
  addReplyTimeoutOption(c.logs, o.replyTimeout);
  c.leaseRelease = lease->add_subcommand("release", "End a lease (its owner or root)");
  c.leaseRelease->footer(
      "A queued request is cancelled. A granted lease that never started is withdrawn. An "
      "attached\n"
      "lease ends now with its final counters recorded; the workload goes on outside the lease.\n"
      "A running 'tally run' lease is stopped: SIGTERM to its processes, SIGKILL after 10 s; its\n"
      "client records the outcome. Exit status: 0 ok, 3 no daemon or no answer, 5 refused (not "
      "yours, not "
      "found).");
  c.leaseRelease->add_option("ID", o.leaseId, "the lease id")->required()->check(kNonEmptyLeaseId);
  c.leaseRelease->add_flag("--json", o.json, "print the reply as JSON");
  addSocketOption(c.leaseRelease, o.socket);
  addReplyTimeoutOption(c.leaseRelease, o.replyTimeout);

  c.pools = app.add_subcommand("pools",
                               "Pools: holders, queue, budgets declared/used, measured headroom");
  c.pools->footer(
      "Headroom is measured (MemAvailable; device mem_info_* free) minus what holders declared but "
      "do not use yet;\n"
      "it can delay a grant, never allow one past a budget. '-' = not measurable here.");
  addSocketOption(c.pools, o.socket);
  addReplyTimeoutOption(c.pools, o.replyTimeout);
  c.pools->add_flag("--json", o.json, "print the pools as JSON");

  c.attach = app.add_subcommand("attach",
                                "Lease a workload that already runs: a unit, a container, a "
                                "cgroup or a process's cgroup");
  c.attach->footer(
      "The daemon admits the lease like any other (pools, budgets, queue), then meters the "
      "workload's\n"
      "cgroup: memory from the cgroup, GPU memory from DRM fdinfo of its processes. --memory-max "
      "on a\n"
      "systemd unit is applied with SetUnitProperties (runtime) and read back from memory.max; on "
      "a\n"
      "plain cgroup it is written to memory.max. The lease ends when the cgroup empties (inotify "
      "on\n"
      "cgroup.events) or on 'tally lease release ID', with the final counters recorded.\n\n"
      "Examples:\n"
      "  tally attach --unit llama-server.service --pool gpu --gpu-memory-max 48GiB --name llama\n"
      "  tally attach --container comfyui --pool gpu --gpu-memory-max 24G\n"
      "  tally attach --pid $(pidof ollama) --pool gpu --gpu-memory-max 20G\n"
      "  tally attach --cgroup /machine.slice/libpod-3f2a.scope --pool gpu --memory-max 16G "
      "--gpu-memory-max 16G\n"
      "Exit status: 0 attached (the lease id is printed), 2 usage, 3 no daemon or no answer, 5 the "
      "daemon said no\n(the sentence says why: over a limit, a conflict, not allowed, timed out).");
  auto* unit = c.attach->add_option(
      "--unit", o.unit, "a running systemd unit (.service, .scope, .slice) of the system manager");
  auto* cgroup = c.attach->add_option("--cgroup", o.cgroup,
                                      "a cgroup v2 path, e.g. /system.slice/llama.service");
  auto* pid = c.attach->add_option("--pid", o.pid, "a process: its cgroup is leased");
  auto* container = c.attach->add_option(
      "--container", o.container,
      "a running podman or docker container, by name or id: its whole cgroup is leased and\n"
      "its name recorded (the engine is asked as you: a rootless container is its owner's)");
  c.attach
      ->add_option("--engine", o.engine,
                   "the engine --container asks (default: podman, then docker)")
      ->check(CLI::IsMember({"podman", "docker"}))
      ->needs(container);
  unit->excludes(cgroup)->excludes(pid)->excludes(container);
  cgroup->excludes(pid)->excludes(container);
  pid->excludes(container);
  auto* pool = c.attach->add_option("--pool", o.pools,
                                    "a pool to hold (repeat for several; granted all at once)");
  auto* parent = c.attach->add_option(
      "--parent", o.parent,
      "a running lease (its id) whose cgroup holds this one: a child lease, holding no pool\n"
      "(the parent's count it), bounded by the smaller of its own --gpu-memory-max and the\n"
      "parent's, ended with the parent if not before (a Slurm step in its job)");
  pool->excludes(parent);
  c.attach->add_option("--memory-max", o.memoryMax,
                       "declared host memory (counts against memory_budget; applied as MemoryMax)");
  c.attach->add_option(
      "--gpu-memory-max", o.gpuMemoryMax,
      "declared GPU memory, GTT+VRAM (counts against gpu_memory_budget); the daemon kills the\n"
      "workload's cgroup when its GPU memory stays over it (docs/enforcement.md)");
  c.attach->add_option("--gpu-memory-high", o.gpuMemoryHigh,
                       "GPU memory level that raises an event when crossed; never kills");
  c.attach
      ->add_option("--gpu-memory-action", o.gpuAction,
                   "what --gpu-memory-max does: refuse = the kernel fails the allocation that\n"
                   "would cross it (ENOMEM) where the daemon's in-kernel charge is active, the\n"
                   "sampled kill as backstop; kill = the sampled kill only; report = events only")
      ->check(CLI::IsMember({"refuse", "kill", "report"}))
      ->default_str(enforce::actionName(enforce::kDefaultAction));
  c.attach
      ->add_option("--gpu-over-samples", o.gpuOverSamples,
                   "consecutive daemon samples over --gpu-memory-max before acting")
      ->check(CLI::Range(1u, 100u))
      ->default_str("2");
  c.attach->add_option("--name", o.name, "label for the lease");
  c.attach->add_option(
      "--attr", o.attrs,
      "KEY=VALUE the operator declares about the workload, shown in seat rows and metrics as\n"
      "declared (e.g. --attr model=qwen3-32b --attr context_window=32768); repeatable, up to 16");
  c.attach->add_option("--priority", o.priority, "queue priority, -100..100 (higher first)")
      ->default_str("0");
  c.attach->add_flag("--wait", o.wait,
                     "when the pool cannot grant it now, queue for it (the workload runs unmetered "
                     "meanwhile);\nwithout it such an attach is refused at once with the reason");
  c.attach->add_option("--queue-timeout", o.queueTimeout,
                       "queue for at most this long (e.g. 30s; implies --wait)");
  c.attach->add_flag(
      "--force", o.force,
      "attach even when the workload already uses more than a declared limit: without it such\n"
      "an attach is refused with the figures (exit 2); with it, the workload is killed if it\n"
      "stays over");
  c.attach->add_flag("--json", o.json, "print the lease as JSON");
  addSocketOption(c.attach, o.socket);
  addReplyTimeoutOption(c.attach, o.replyTimeout);

  c.events = app.add_subcommand(
      "events",
      "Follow the daemon's events, with their time: leases (queued, granted, started, ended with "
      "the outcome), GPU bound (high, kill, refused, report) and coverage");
  c.events->footer(
      "Subscribes to the daemon and prints each event as it happens, one line each (JSON with "
      "--json,\n"
      "which carries at_ns and, for an event the ledger holds, its row's seq):\n"
      "  2026-12-02 15:30:01.123  lease 1f0c2a9b3e7d (llama): granted in gpu\n"
      "  2026-12-02 15:31:12.480  gpu-memory-kill lease 1f0c2a9b3e7d (llama): killed by tally: "
      "GPU memory ...\n"
      "--since replays the ledger's rows from then first, as the events they were (\"replayed\": "
      "true);\n"
      "--until stops at that time (in the past: replay only). When the daemon restarts, events "
      "says so,\n"
      "reconnects, and replays what the ledger recorded meanwhile: nothing the ledger holds is "
      "missed.\n"
      "Filters (each repeatable; every one given must match): --lease, --pool, --kind.\n"
      "Exit status: 0 done (interrupted, --count reached, --until or --timeout passed), 1 "
      "--timeout passed\n"
      "before --count events, 2 a bad option, 3 no daemon at the start.");
  c.events->add_option("--count", o.count,
                       "exit after this many events (default: follow until interrupted)");
  c.events->add_option("--timeout", o.eventsTimeout, "stop following after this long (e.g. 30s)");
  c.events->add_option("--since", o.since,
                       "first replay the ledger's events from then: 2026-12-02, '2026-12-02 "
                       "14:05', or ago: 10m, 2h");
  c.events->add_option("--until", o.until, "stop at this time (same forms as --since)");
  c.events->add_option("--lease", o.eventLeases,
                       "only this lease: its id, the id's first characters, or its name");
  c.events->add_option("--pool", o.eventPools, "only leases in this pool");
  c.events->add_option("--kind", o.eventKinds,
                       "only this kind: queued, granted, started, adopted, readopted, released, "
                       "outcome, lost,\nwithdrawn, gpu-memory-high, gpu-memory-high-cleared, "
                       "gpu-memory-kill, gpu-memory-max-exceeded,\nrefused, coverage");
  c.events->add_flag("--utc", o.utc, "times in UTC (default: local time)");
  c.events->add_flag("--json", o.json, "one JSON object per event");
  addSocketOption(c.events, o.socket);

  c.seats = app.add_subcommand(
      "seats", "One row per lease: running, host and GPU memory against limits, fresh or stale");
  c.seats->footer(
      "A seat row is measured (cgroup memory.current/peak/max, DRM fdinfo per region), declared "
      "(limits,\n"
      "--attr attributes), or absent with the reason. 'running' is cgroup.events populated, read "
      "now.\n"
      "A row not sampled within 2 x sample_interval is stale: it shows no figures at all ('-'),\n"
      "never the last value as if it were current. The JSON rows are the daemon's 'seats' RPC "
      "reply.\n" +
      std::string(kReadingExitStatus));
  c.seats->add_flag("--json", o.json,
                    "print the rows as JSON (with observed_at_ns and sample_interval_us)");
  addSocketOption(c.seats, o.socket);
  addReplyTimeoutOption(c.seats, o.replyTimeout);

  // Under `tally daemon` (added before the client commands), served like them.
  CLI::App* daemon = nullptr;
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == "daemon") daemon = sub;
  if (daemon) {
    c.daemonStatus = daemon->add_subcommand(
        "status",
        "What the running daemon says of itself: uptime, leases, in-kernel charge, coverage, "
        "ledger");
    c.daemonStatus->footer(
        "The in-kernel charge line says whether GPU memory is charged to the lease that creates "
        "it and the\ncrossing allocation refused (BPF), and if not exactly why and what to do; "
        "tally doctor says the\nsame of this host without a daemon.\n"
        "Exit status: 0 the daemon answers and its ledger writes, 1 its ledger cannot write (new "
        "leases and\nreleases are refused), 3 the daemon cannot be reached or did not answer.");
    c.daemonStatus->add_flag("--json", o.json,
                             "print the daemon, kernel_charge, coverage and ledger objects");
    c.daemonStatus->add_flag("--utc", o.utc, "times in UTC (default: local time)");
    addSocketOption(c.daemonStatus, o.socket);
    addReplyTimeoutOption(c.daemonStatus, o.replyTimeout);
  }

  c.metrics =
      app.add_subcommand("metrics", "Print the daemon's metrics in the Prometheus text format");
  c.metrics->footer(
      "Leases (host and GPU memory, limits, running, fresh), pools (holders, queue, budgets, "
      "headroom),\n"
      "devices (GTT/VRAM used and total), unattributed GPU memory, coverage, and counters of GPU "
      "bound\n"
      "events and lease outcomes. A figure tally did not measure has no sample (never 0).\n"
      "The daemon can also keep a node_exporter textfile (--metrics-textfile) and serve GET "
      "/metrics on\n"
      "loopback (--metrics-listen 127.0.0.1:9464). Check: tally metrics | promtool check "
      "metrics\n" +
      std::string(kReadingExitStatus));
  addSocketOption(c.metrics, o.socket);
  addReplyTimeoutOption(c.metrics, o.replyTimeout);
  return c;
}

// A listing names the first queued requests only (daemon/views.h): the rest
// are counted, on stderr so --json stays one document.

}  // namespace tally::cli
