#include "cli/cmd_client.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

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
namespace {

using json = nlohmann::json;

using jsonview::bytesOrDash;

// How long a queued attach waits for a restarted daemon to come back.
constexpr std::uint64_t kAttachReconnectUs = 60'000'000;

void printLeases(const json& leases) {
  fmt::print("{:<12}  {:<16}  {:<7}  {:<8}  {:<14}  {:>10}  {:>10}  {:>10}  {:>10}  {}\n", "LEASE",
             "NAME", "KIND", "STATE", "POOLS", "MEM-MAX", "MEM-NOW", "GPU-MAX", "GPU-NOW",
             "AGE/QUEUE");
  for (const auto& l : leases) {
    std::string pools;
    for (const auto& p : l["pools"])
      pools += fmt::format("{}{}", pools.empty() ? "" : ",", p.get<std::string>());
    std::string state = l.value("state", "?");
    std::string where =
        state == "queued"
            ? fmt::format("#{} ({})", l["position"].is_number() ? l["position"].dump() : "?",
                          l["waiting_for"].is_string() ? l["waiting_for"].get<std::string>() : "-")
            : ageText(l.contains("started_at_ns") ? l["started_at_ns"] : l["granted_at_ns"]);
    json mem = l.contains("memory") ? l["memory"]["current_bytes"] : json();
    json gpu = l.contains("gpu") ? l["gpu"]["current_bytes"] : json();
    printLine(
        fmt::format("{:<12}  {:<16}  {:<7}  {:<8}  {:<14}  {:>10}  {:>10}  {:>10}  {:>10}  {}",
                    l.value("lease", ""), l.value("name", ""), l.value("kind", ""), state, pools,
                    bytesOrDash(l["declared"]["memory_max"]), bytesOrDash(mem),
                    bytesOrDash(l["declared"]["gpu_memory_max"]), bytesOrDash(gpu), where));
  }
}

void printPools(const json& pools) {
  fmt::print("{:<12}  {:>9}  {:>6}  {:>21}  {:>21}  {:>10}  {:>10}\n", "POOL", "HOLDERS", "QUEUE",
             "MEMORY DECL/BUDGET", "GPU DECL/BUDGET", "HOST-FREE", "GPU-FREE");
  for (const auto& p : pools) {
    auto pair = [](const json& declared, const json& budget) {
      if (!budget.is_number_unsigned()) return std::string("- (no budget)");
      return fmt::format("{}/{}", bytesOrDash(declared), bytesOrDash(budget));
    };
    fmt::print("{:<12}  {:>9}  {:>6}  {:>21}  {:>21}  {:>10}  {:>10}\n", p.value("pool", ""),
               fmt::format("{}/{}", p["holders"].size(), p.value("capacity", 0)), p["queue"].size(),
               pair(p["memory_declared"], p["memory_budget"]),
               pair(p["gpu_memory_declared"], p["gpu_memory_budget"]),
               bytesOrDash(p["headroom"]["host_bytes"]), bytesOrDash(p["headroom"]["gpu_bytes"]));
  }
}

}  // namespace

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
      ->default_str("refuse");
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
static void notListed(const nlohmann::json& result) {
  const auto& q = jsonview::get(result, "queued");
  auto total = jsonview::count(jsonview::get(q, "total"));
  auto listed = jsonview::count(jsonview::get(q, "listed"));
  if (total && listed && *total > *listed)
    fmt::print(stderr,
               "{} more queued requests are not listed (the first {}, in grant order, are)\n",
               *total - *listed, *listed);
}

// Every page of a listing (leases, seats), one request each, the rows of all
// of them in one document: the first page's reply with every page's rows.
// A daemon that pages no more (no "page") answered in one.
template <class Page>
static std::optional<nlohmann::json> allPages(const char* cmd, const ClientOptions& o, int& rc) {
  Page page;
  std::optional<nlohmann::json> all;
  std::size_t live = 0;        // live rows so far: the queue the first page named stays after them
  std::set<std::string> seen;  // a request queued on the first page and granted since: once
  for (std::size_t pages = 0; pages < 100'000; ++pages) {
    // Past a burst, at a pace under the daemon's queries_per_second_per_uid
    // (20 a second by default): 20,000 leases are 40 pages.
    if (pages >= 30) std::this_thread::sleep_for(std::chrono::milliseconds(60));
    auto m = callDaemon(cmd, o, page, rc);
    if (!m) return std::nullopt;
    auto doc = rpc::api::decodeDocument(m->result, cmd);
    if (!doc) {
      rc = badReply(cmd, doc.error());
      return std::nullopt;
    }
    const auto& facts = jsonview::get(m->result, "page");
    auto listed = jsonview::count(jsonview::get(facts, "listed")).value_or(0);
    if (!all) {
      all = std::move(*doc);
      for (const auto& row : (*all)[cmd]) seen.insert(row.value("lease", std::string()));
    } else {
      auto& rows = (*all)[cmd];
      for (auto& row : (*doc)[cmd]) {
        if (!seen.insert(row.value("lease", std::string())).second) continue;
        rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(live), std::move(row));
        ++live;
      }
      listed = 0;  // counted row by row above
    }
    live += listed;
    const auto& next = jsonview::get(facts, "next");
    if (!next.is_string()) break;
    page.after = next.template get<std::string>();
  }
  if (all) all->erase("page");
  return all;
}

int runClientCommand(const ClientCommands& c, const ClientOptions& o) {
  int rc = kExitOk;
  if (c.events->parsed()) return followEvents(o);
  if (c.leases->parsed()) {
    auto all = allPages<rpc::api::ListLeases>("leases", o, rc);
    if (!all) return rc;
    if (o.json)
      fmt::print("{}\n", (*all)["leases"].dump(2));
    else
      printLeases((*all)["leases"]);
    notListed(*all);
    return kExitOk;
  }
  if (c.logs->parsed()) {
    auto m = callDaemon("logs", o, rpc::api::LeaseQuery{o.leaseId, false}, rc);
    if (!m) return rc;
    // Live: the lease's attributes; ended: those its granted row recorded.
    json attrs = m->result.value("attributes", json::object());
    if (attrs.empty() && m->result.contains("ledger")) {
      for (const auto& row : m->result["ledger"]) {
        if (row.value("kind", "") == "granted" && row["body"].is_object())
          attrs = row["body"].value("declared", json::object()).value("attributes", json::object());
      }
    }
    std::string unit = attrs.is_object() ? attrs.value(lease::kJobUnitKey, "") : "";
    std::string manager =
        attrs.is_object() ? attrs.value(lease::kJobManagerKey, "system") : "system";
    if (!lease::isDetachedJobUnit(unit)) {
      fmt::print(stderr,
                 "tally logs: lease {} is not a detached job: its output went where the tally run "
                 "that held it wrote (a terminal, or its unit's journal). Jobs started with "
                 "tally run --pool P --detach have their output here\n",
                 o.leaseId);
      return kExitRefused;
    }
    // journald files each line under the unit of the process that wrote it:
    // tally run's own under the job's service, the workload's under the
    // lease's scope (where the workload runs). Both, in time order.
    std::string scope = m->result.value("unit", "");
    if (scope.empty()) scope = fmt::format("tally-{}.scope", o.leaseId);
    std::vector<std::string> args = {"journalctl", "--no-pager"};
    if (manager == "user") args.push_back("--user");
    args.insert(args.end(), {"-u", unit, "-u", scope});
    if (o.follow) args.push_back("--follow");
    if (o.lines) args.insert(args.end(), {"--lines", std::to_string(o.lines)});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    ::execvp(argv[0], argv.data());
    fmt::print(stderr, "tally logs: cannot run journalctl: {}\n", std::strerror(errno));
    return kExitEnvironment;
  }
  if (c.leaseShow->parsed()) {
    // The daemon knows live leases and its ledger's; without a daemon the
    // local ledger still has every ended lease (a standalone tally run's too).
    json r;
    if (auto m = callDaemon("lease show", o, rpc::api::LeaseQuery{o.leaseId, false}, rc)) {
      r = m->result;
    } else if (rc == kExitEnvironment || rc == kExitRefused) {
      auto fromLedger = leaseFromLedger(o);
      if (!fromLedger) return rc;
      fmt::print(stderr, "tally lease show: read from the ledger at {}\n", fromLedger->second);
      r = std::move(fromLedger->first);
    } else {
      return rc;
    }
    if (o.json) {
      fmt::print("{}\n", r.dump(2));
      return kExitOk;
    }
    for (const auto& line : leaseShowLines(r)) printLine(line);
    // The memory timeline from the ledger's samples (the daemon's; a standalone
    // run keeps only its peaks), against the limits, with its events marked.
    auto t = leaseTimeline(r);
    if (!t.host.points.empty()) {
      for (const auto* s : {&t.host, &t.gpu}) {
        fmt::print("\n");
        for (const auto& line : views::timelineText(*s, t.marks, 80, 6)) printLine(line);
      }
    } else {
      fmt::print("  (no samples in the ledger: a standalone 'tally run' records its peaks only)\n");
    }
    if (!o.svg.empty()) {
      std::FILE* f = std::fopen(o.svg.c_str(), "w");
      std::string svg = views::timelineSvg({t.host, t.gpu}, t.marks);
      bool ok = f && std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
      if (f) ok = std::fclose(f) == 0 && ok;
      if (!ok) {
        fmt::print(stderr, "tally lease show: cannot write {}\n", o.svg);
        return kExitEnvironment;
      }
      fmt::print(stderr, "tally lease show: the timeline is in {}\n", o.svg);
    }
    return kExitOk;
  }
  if (c.leaseRelease->parsed()) {
    auto m = callDaemon("lease release", o, rpc::api::Release{{o.leaseId}}, rc);
    if (!m) return rc;
    auto r = rpc::api::decodeReleaseReply(m->result);
    if (!r) return badReply("lease release", r.error());
    if (o.json)
      fmt::print("{}\n", m->result.dump(2));
    else
      fmt::print("lease {}: {}\n", r->lease, r->state);
    return kExitOk;
  }
  if (c.pools->parsed()) {
    auto m = callDaemon("pools", o, rpc::api::ListPools{}, rc);
    if (!m) return rc;
    auto doc = rpc::api::decodeDocument(m->result, "pools");
    if (!doc) return badReply("pools", doc.error());
    if (o.json)
      fmt::print("{}\n", (*doc)["pools"].dump(2));
    else
      printPools((*doc)["pools"]);
    return kExitOk;
  }
  if (c.seats->parsed()) {
    auto all = allPages<rpc::api::Seats>("seats", o, rc);
    if (!all) return rc;
    if (o.json) {
      fmt::print("{}\n", all->dump(2));
      return kExitOk;
    }
    for (const auto& line : views::seatTable((*all)["seats"], 1000))
      printLine(text::trimRight(line));
    notListed(*all);
    return kExitOk;
  }
  if (c.daemonStatus && c.daemonStatus->parsed()) {
    auto m = callDaemon("daemon status", o, rpc::api::Overview{}, rc);
    if (!m) return rc;
    auto st = views::daemonStatus(m->result, clock::realtimeNs(), o.utc);
    if (o.json) {
      nlohmann::json out = nlohmann::json::object();
      for (const char* k : {"daemon", "sample_interval_us", "kernel_charge", "coverage", "ledger"})
        if (m->result.contains(k)) out[k] = m->result[k];
      fmt::print("{}\n", out.dump(2));
    } else {
      for (const auto& line : st.lines) printLine(line);
    }
    return st.ledgerWrites ? kExitOk : kExitDegraded;
  }
  if (c.metrics->parsed()) {
    auto m = callDaemon("metrics", o, rpc::api::Metrics{}, rc);
    if (!m) return rc;
    auto r = rpc::api::decodeMetricsReply(m->result);
    if (!r) return badReply("metrics", r.error());
    fmt::print("{}", r->text);
    return kExitOk;
  }
  if (c.attach->parsed()) {
    rpc::api::Attach request;
    rpc::api::Declared& d = request.declared;
    d.pools = o.pools;
    request.parent = o.parent;
    if (d.pools.empty() && o.parent.empty()) {
      fmt::print(stderr,
                 "tally attach: name the pool the lease holds with --pool (or, for a child "
                 "lease inside a running lease, that lease with --parent)\n");
      return kExitUsage;
    }
    if (!o.unit.empty())
      request.target.unit = o.unit;
    else if (!o.cgroup.empty())
      request.target.cgroup = o.cgroup;
    else if (o.pid)
      request.target.pid = static_cast<pid_t>(o.pid);
    else if (!o.container.empty()) {
      auto found = inspectContainer(o.container, o.engine);
      if (!found) {
        fmt::print(stderr, "tally attach: {}\n", found.error().message);
        return kExitRefused;
      }
      request.target.pid = found->pid;
      request.target.container = lease::Container{found->engine, found->id, found->name};
      // Named as the engine names it, unless --name says otherwise.
      if (o.name.empty() && lease::validLeaseName(found->name)) request.declared.name = found->name;
    } else {
      fmt::print(stderr,
                 "tally attach: name the workload with --unit, --container, --cgroup or --pid\n");
      return kExitUsage;
    }
    if (!memoryLimitOption("attach", "--memory-max", o.memoryMax, d.memoryMax)) return kExitUsage;
    for (auto [flag, text, out] :
         {std::tuple{"--gpu-memory-max", &o.gpuMemoryMax, &d.gpuMemoryMax},
          std::tuple{"--gpu-memory-high", &o.gpuMemoryHigh, &d.gpuMemoryHigh}}) {
      if (!sizeOption("attach", flag, *text, *out)) return kExitUsage;
    }
    if (!gpuLimitsOption("attach", d.gpuMemoryMax, d.gpuMemoryHigh)) return kExitUsage;
    if (d.gpuMemoryMax || d.gpuMemoryHigh) {
      d.gpuAction = enforce::parseAction(o.gpuAction);
      d.gpuOverSamples = o.gpuOverSamples;
    }
    if (!durationOption("attach", "--queue-timeout", o.queueTimeout, d.timeoutUs))
      return kExitUsage;
    // A running workload goes unmetered while its attach waits: never by surprise.
    d.noWait = !o.wait && !d.timeoutUs;
    if (!o.name.empty()) d.name = o.name;
    d.priority = o.priority;
    if (!attributesOption("attach", o.attrs, d.attributes)) return kExitUsage;
    request.force = o.force;
    auto timeoutMs = replyTimeoutMs("attach", o);
    if (!timeoutMs) return kExitUsage;
    // A queued attach outlives a daemon restart: it is sent again once the
    // daemon is back (its queue did not survive; the request joins its end).
    auto waited = rpc::callWaiting(
        socketPath(o.socket), request,
        [](const rpc::Message& ev) {
          auto q = rpc::api::decodeQueued(ev.raw);
          fmt::print(stderr, "tally attach: queued as lease {}: {}\n",
                     q.lease.empty() ? "?" : q.lease, rpc::api::describe(q));
        },
        *timeoutMs, kAttachReconnectUs, -1,
        [](const std::string& what) { fmt::print(stderr, "tally attach: {}\n", what); });
    if (!waited) {
      fmt::print(stderr, "tally attach: {}\n", waited.error().message);
      return kExitEnvironment;
    }
    std::optional<rpc::Message> m = std::move(waited->reply);
    if (!m->ok) {
      std::string hint;
      if (d.noWait && m->error.message.rfind(rpc::api::kCannotBeGrantedNow, 0) == 0)
        hint = ". Retry when that frees, or pass --wait (or --queue-timeout) to queue for it";
      fmt::print(stderr, "tally attach: {}{}\n", rpc::errorSentence(m->error), hint);
      return exitForDaemonError(m->error.code);
    }
    auto r = rpc::api::decodeLeaseReply(m->result);
    if (!r) return badReply("attach", r.error());
    if (o.json)
      fmt::print("{}\n", m->result.dump(2));
    else
      fmt::print("{}\n", r->lease);
    fmt::print(stderr, "tally attach: lease {} on {} ({})\n", r->lease, r->cgroup.value_or("?"),
               r->state);
    return kExitOk;
  }
  return kExitUsage;
}

}  // namespace tally::cli
