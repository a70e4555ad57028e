// `tally attach`: the workload named (a container found through its engine),
// the declared limits checked, then one request the daemon admits like any
// other, waited for across a daemon restart when it queues.
#include "cli/cmd_attach.h"

#include <fmt/format.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "cli/container_engine.h"
#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "cli/option_values.h"
#include "cli/socket_path.h"
#include "lease/spec.h"
#include "rpc/client.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"

namespace tally::cli {
namespace {

// How long a queued attach waits for a restarted daemon to come back.
constexpr std::uint64_t kAttachReconnectUs = 60'000'000;

}  // namespace

CLI::App* addAttachCommand(CLI::App& app, AttachOptions& o) {
  auto* attach = app.add_subcommand("attach",
                                    "Lease a workload that already runs: a unit, a container, a "
                                    "cgroup or a process's cgroup");
  attach->footer(
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
  auto* unit = attach->add_option(
      "--unit", o.unit, "a running systemd unit (.service, .scope, .slice) of the system manager");
  auto* cgroup = attach->add_option("--cgroup", o.cgroup,
                                    "a cgroup v2 path, e.g. /system.slice/llama.service");
  auto* pid = attach->add_option("--pid", o.pid, "a process: its cgroup is leased");
  auto* container = attach->add_option(
      "--container", o.container,
      "a running podman or docker container, by name or id: its whole cgroup is leased and\n"
      "its name recorded (the engine is asked as you: a rootless container is its owner's)");
  attach
      ->add_option("--engine", o.engine,
                   "the engine --container asks (default: podman, then docker)")
      ->check(CLI::IsMember({"podman", "docker"}))
      ->needs(container);
  unit->excludes(cgroup)->excludes(pid)->excludes(container);
  cgroup->excludes(pid)->excludes(container);
  pid->excludes(container);
  auto* pool = attach->add_option("--pool", o.pools,
                                  "a pool to hold (repeat for several; granted all at once)");
  auto* parent = attach->add_option(
      "--parent", o.parent,
      "a running lease (its id) whose cgroup holds this one: a child lease, holding no pool\n"
      "(the parent's count it), bounded by the smaller of its own --gpu-memory-max and the\n"
      "parent's, ended with the parent if not before (a Slurm step in its job)");
  pool->excludes(parent);
  attach->add_option("--memory-max", o.memoryMax,
                     "declared host memory (counts against memory_budget; applied as MemoryMax)");
  attach->add_option(
      "--gpu-memory-max", o.gpuMemoryMax,
      "declared GPU memory, GTT+VRAM (counts against gpu_memory_budget); the daemon kills the\n"
      "workload's cgroup when its GPU memory stays over it (docs/enforcement.md)");
  attach->add_option("--gpu-memory-high", o.gpuMemoryHigh,
                     "GPU memory level that raises an event when crossed; never kills");
  attach
      ->add_option("--gpu-memory-action", o.gpuAction,
                   "what --gpu-memory-max does: refuse = the kernel fails the allocation that\n"
                   "would cross it (ENOMEM) where the daemon's kernel charge is active, the\n"
                   "sampled kill as backstop; kill = the sampled kill only; report = events only")
      ->check(CLI::IsMember(enforce::actionNames()))
      ->default_str(enforce::actionName(enforce::kDefaultAction));
  attach
      ->add_option("--gpu-over-samples", o.gpuOverSamples,
                   "consecutive daemon samples over --gpu-memory-max before acting")
      ->check(CLI::Range(1u, 100u))
      ->default_str("2");
  attach->add_option("--name", o.name, "label for the lease");
  attach->add_option(
      "--attr", o.attrs,
      "KEY=VALUE the operator declares about the workload, shown in seat rows and metrics as\n"
      "declared (e.g. --attr model=qwen3-32b --attr context_window=32768); repeatable, up to 16");
  attach->add_option("--priority", o.priority, "queue priority, -100..100 (higher first)")
      ->default_str("0");
  attach->add_flag("--wait", o.wait,
                   "when the pool cannot grant it now, queue for it (the workload runs unmetered "
                   "meanwhile);\nwithout it such an attach is refused at once with the reason");
  attach->add_option("--queue-timeout", o.queueTimeout,
                     "queue for at most this long (e.g. 30s; implies --wait)");
  attach->add_flag(
      "--force", o.force,
      "attach even when the workload already uses more than a declared limit: without it such\n"
      "an attach is refused with the figures (exit 2); with it, the workload is killed if it\n"
      "stays over");
  attach->add_flag("--json", o.json, "print the lease as JSON");
  addSocketOption(attach, o.socket);
  addReplyTimeoutOption(attach, o.replyTimeout);
  return attach;
}

int runAttach(const AttachOptions& o) {
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
  // A usage mistake, said before anything is asked (exit 2, as --help says).
  if (!o.name.empty() && !lease::validLeaseName(o.name)) {
    fmt::print(stderr, "tally attach: --name '{}' must be 1-64 of [A-Za-z0-9._-]\n",
               o.name.substr(0, 80));
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
    if (o.name.empty() && lease::validLeaseName(found->name))
      request.declared.declaration.name = found->name;
  } else {
    fmt::print(stderr,
               "tally attach: name the workload with --unit, --container, --cgroup or --pid\n");
    return kExitUsage;
  }
  if (!memoryLimitOption("attach", "--memory-max", o.memoryMax, d.declaration.memoryMax))
    return kExitUsage;
  for (auto [flag, text, out] :
       {std::tuple{"--gpu-memory-max", &o.gpuMemoryMax, &d.declaration.gpuMemoryMax},
        std::tuple{"--gpu-memory-high", &o.gpuMemoryHigh, &d.declaration.gpuMemoryHigh}}) {
    if (!sizeOption("attach", flag, *text, *out)) return kExitUsage;
  }
  if (!gpuLimitsOption("attach", d.declaration.gpuMemoryMax, d.declaration.gpuMemoryHigh))
    return kExitUsage;
  if (d.declaration.gpuMemoryMax || d.declaration.gpuMemoryHigh) {
    if (auto a = enforce::parseAction(o.gpuAction)) d.declaration.gpuAction = *a;
    d.declaration.gpuOverSamples = o.gpuOverSamples;
  }
  if (!durationOption("attach", "--queue-timeout", o.queueTimeout, d.timeoutUs)) return kExitUsage;
  // A running workload goes unmetered while its attach waits: never by surprise.
  d.noWait = !o.wait && !d.timeoutUs;
  if (!o.name.empty()) d.declaration.name = o.name;
  d.priority = o.priority;
  if (!attributesOption("attach", o.attrs, d.declaration.attributes)) return kExitUsage;
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

}  // namespace tally::cli
