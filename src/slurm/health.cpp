#include "slurm/health.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "slurm/gres.h"
#include "slurm/step.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::slurm {

const char* checkStateName(CheckState s) {
  switch (s) {
    case CheckState::Ok:
      return "ok";
    case CheckState::Failed:
      return "FAILED";
    case CheckState::Unknown:
      return "unknown";
  }
  return "unknown";
}

std::vector<SlurmCheck> judgeSlurm(const SlurmFacts& f) {
  std::vector<SlurmCheck> out;
  auto add = [&](std::string name, CheckState s, std::string said) {
    out.push_back({std::move(name), s, std::move(said)});
  };

  // 1. The plugstack.conf line and its arguments.
  std::optional<PluginArgs> args;
  if (f.plugstackError) {
    add("plugstack", CheckState::Failed,
        fmt::format("cannot read {}: {}; without tally_spank.so there a step's GPU memory is "
                    "unbounded",
                    f.plugstackPath, *f.plugstackError));
  } else if (!f.plugstack || !f.plugstack->tally) {
    add("plugstack", CheckState::Failed,
        fmt::format("{} (with its includes) loads no tally_spank.so: steps run without tally. "
                    "Add: required tally_spank.so socket=/run/tally/tally.sock (docs/slurm.md)",
                    f.plugstackPath));
  } else {
    const auto& t = *f.plugstack->tally;
    auto parsed = parsePluginArgs(t.args);
    std::string line = fmt::format("{} {}{}{}", t.required ? "required" : "optional", t.path,
                                   t.args.empty() ? "" : " ", fmt::join(t.args, " "));
    if (!parsed) {
      add("plugstack", CheckState::Failed,
          fmt::format("{}: {}; every step that declares GPU memory is refused until it is fixed",
                      line, parsed.error().message));
    } else {
      args = *parsed;
      if (f.plugstackConfigless)
        line +=
            fmt::format(" (configless: {}, slurmd's copy of the controller's)", f.plugstackPath);
      add("plugstack", CheckState::Ok,
          t.required ? line
                     : line +
                           " (optional: if the plugin fails to load, Slurm runs every step "
                           "without it; docs/slurm.md prefers required)");
    }
  }

  // 2. The plugin built for the Slurm that runs here.
  auto running = f.slurmdVersion ? releaseOfSlurmd(*f.slurmdVersion) : std::nullopt;
  if (f.plugstack && f.plugstack->tally) {
    if (f.pluginError) {
      add("plugin", CheckState::Failed,
          fmt::format("{}: {}; SPANK cannot load it, so no step here is leased", f.pluginPath,
                      *f.pluginError));
    } else if (!f.pluginVersion) {
      add("plugin", CheckState::Unknown, fmt::format("{}: its version was not read", f.pluginPath));
    } else if (!running) {
      add("plugin", CheckState::Unknown,
          fmt::format("{} is built for Slurm {}; slurmd's version is unknown ({})", f.pluginPath,
                      releaseOfNumber(*f.pluginVersion), f.slurmdError.value_or("slurmd -V")));
    } else if (releaseOfNumber(*f.pluginVersion) != *running) {
      add("plugin", CheckState::Failed,
          fmt::format("{} is built for Slurm {}, and slurmd here is {}: SPANK loads only a plugin "
                      "of its own release, so no step here is leased. Install the build for {} "
                      "(docs/slurm.md, Slurm releases)",
                      f.pluginPath, releaseOfNumber(*f.pluginVersion), *running, *running));
    } else {
      add("plugin", CheckState::Ok,
          fmt::format("{} built for Slurm {}, as slurmd", f.pluginPath, *running));
    }
  }

  // 3. The daemon answers.
  std::string socket = args ? args->socket : PluginArgs{}.socket;
  if (f.daemonAnswered) {
    add("daemon", CheckState::Ok, fmt::format("answers at {}", socket));
  } else {
    // The client's error names the socket and how to start the daemon.
    add("daemon", CheckState::Failed,
        fmt::format("{}; every step on this node is refused until it answers (each job here is "
                    "a lease: its GRES, or plugstack.conf's no_gres)",
                    f.daemonError.value_or("no answer at " + socket)));
  }

  // The node's GRES, as slurmctld's record of the node counts it.
  std::optional<GresFound> gres;
  std::optional<std::string> gresError;
  if (args) {
    if (!f.nodeRecord) {
      gresError = f.nodeRecordError.value_or("scontrol show node gave nothing");
    } else {
      for (const auto& name : args->gres) {
        auto c = gresOfScontrol(*f.nodeRecord, name);
        if (!c) {
          gresError = c.error().message;
          break;
        }
        if (*c) {
          gres = GresFound{name, **c};
          break;
        }
      }
    }
  }

  // 4. The pool's budget is the node's GRES count: Slurm places, tally enforces.
  if (args && f.daemonAnswered) {
    if (gresError) {
      add("budget", CheckState::Unknown, "the node's GRES is unknown: " + *gresError);
    } else if (!gres) {
      add("budget", CheckState::Failed,
          fmt::format("slurmctld's record of this node names no {} GRES (scontrol show node): "
                      "Slurm places no GPU memory here. Add Gres={}:<bytes> to the node in "
                      "slurm.conf and gres.conf",
                      fmt::join(args->gres, " or "), args->gres.front()));
    } else if (!f.poolFound) {
      add("budget", CheckState::Failed,
          fmt::format("the daemon has no pool {} (plugstack.conf pool=): every leased step is "
                      "refused. Add [pools.{}] with gpu_memory_budget = {}",
                      args->pool, args->pool, gres->count));
    } else if (!f.poolBudget) {
      add("budget", CheckState::Failed,
          fmt::format("pool {} has no gpu_memory_budget; set it to the node's {} GRES, {} ({})",
                      args->pool, gres->name, gres->count, units::humanBytes(gres->count)));
    } else if (*f.poolBudget != gres->count) {
      add("budget", CheckState::Failed,
          fmt::format("pool {}'s gpu_memory_budget {} ({}) is not the node's {} GRES {} ({}): "
                      "Slurm places by one and tally grants by the other. Set gpu_memory_budget "
                      "= {}",
                      args->pool, *f.poolBudget, units::humanBytes(*f.poolBudget), gres->name,
                      gres->count, units::humanBytes(gres->count), gres->count));
    } else {
      add("budget", CheckState::Ok,
          fmt::format("pool {}'s gpu_memory_budget = the node's {} GRES, {}", args->pool,
                      gres->name, units::humanBytes(gres->count)));
    }
  }

  // 5. Memory is not handed out twice: the GRES beyond the devices' VRAM is
  // GTT, system RAM (all of it on an APU), so RealMemory + that part must fit
  // in the host's RAM, or Slurm places the same bytes as memory and as GPU memory.
  if (args && gres) {
    if (!f.realMemoryBytes || !f.memTotalBytes) {
      add("memory", CheckState::Unknown,
          fmt::format("whether RealMemory and the {} GRES fit in RAM is unknown: {}", gres->name,
                      f.realMemoryBytes ? f.memTotalError.value_or("MemTotal unread")
                                        : f.realMemoryError.value_or("RealMemory unread")));
    } else {
      std::uint64_t vram = f.vramTotalBytes.value_or(0);
      std::uint64_t gtt = gres->count > vram ? gres->count - vram : 0;
      std::uint64_t need = *f.realMemoryBytes + gtt;
      std::string vramWords =
          f.vramTotalBytes ? fmt::format("beyond the devices' {} of VRAM", units::humanBytes(vram))
                           : std::string("(VRAM unknown, counted as none)");
      if (need > *f.memTotalBytes) {
        std::uint64_t fits = *f.memTotalBytes > gtt ? (*f.memTotalBytes - gtt) >> 20 : 0;
        add("memory", CheckState::Failed,
            fmt::format("RealMemory {} + the {} of {} GRES {} (GTT: host RAM) = {}, more than "
                        "this host's MemTotal {}: Slurm can place the same RAM as memory and as "
                        "GPU memory. Set RealMemory to at most {} (MiB), less what the OS needs, "
                        "or lower the GRES",
                        units::humanBytes(*f.realMemoryBytes), units::humanBytes(gtt), gres->name,
                        vramWords, units::humanBytes(need), units::humanBytes(*f.memTotalBytes),
                        fits));
      } else {
        add("memory", CheckState::Ok,
            fmt::format("RealMemory {} + the {} of {} GRES {} fit in MemTotal {}",
                        units::humanBytes(*f.realMemoryBytes), units::humanBytes(gtt), gres->name,
                        vramWords, units::humanBytes(*f.memTotalBytes)));
      }
    }
  }

  // 6. The kernel can give what Slurm places: the GRES beyond VRAM is GTT,
  // and the driver refuses every allocation past its GTT ceiling, however
  // much of its count a job still has.
  if (args && gres) {
    std::uint64_t vram = f.vramTotalBytes.value_or(0);
    std::uint64_t gtt = gres->count > vram ? gres->count - vram : 0;
    if (!f.gttCeilingBytes) {
      add("ceiling", CheckState::Unknown,
          fmt::format("whether the kernel lets a job hold the {} of {} GRES beyond VRAM as GTT is "
                      "unknown: {}",
                      units::humanBytes(gtt), gres->name,
                      f.gttCeilingError.value_or("no GTT ceiling read")));
    } else if (gtt > *f.gttCeilingBytes) {
      std::string beyond = f.vramTotalBytes
                               ? fmt::format("the devices' {} of VRAM", units::humanBytes(vram))
                               : std::string("VRAM (unknown, counted as none)");
      add("ceiling", CheckState::Failed,
          fmt::format("the {} GRES {} is {} of GTT beyond {}, more than the kernel lets the "
                      "pool's clients hold ({}, {}): a job granted its whole count fails "
                      "allocating past it. Lower the GRES to {} or raise the GTT ceiling "
                      "(docs/gpu.md, \"GTT ceiling\")",
                      gres->name, units::humanBytes(gres->count), units::humanBytes(gtt), beyond,
                      units::humanBytes(*f.gttCeilingBytes), f.gttCeilingSource,
                      vram + *f.gttCeilingBytes));
    } else {
      add("ceiling", CheckState::Ok,
          fmt::format("the {} of {} GRES beyond VRAM fits under the kernel's GTT ceiling {} ({})",
                      units::humanBytes(gtt), gres->name, units::humanBytes(*f.gttCeilingBytes),
                      f.gttCeilingSource));
    }
  }

  // 8 (said before 7's policy, after the pool): where the job's lease is
  // made. With Contain, by the extern step as the job starts here (and its
  // user part, where pam_slurm_adopt puts ssh sessions, leased within it);
  // without, by its first step. pam_slurm_adopt needs Contain.
  if (args) {
    if (!f.contain) {
      add("contain", CheckState::Unknown,
          "whether PrologFlags has Contain is unknown: " +
              f.containError.value_or("scontrol show config not read"));
    } else if (!*f.contain && f.pamSlurmAdopt) {
      add("contain", CheckState::Failed,
          "sshd's PAM stack loads pam_slurm_adopt, which needs PrologFlags=Contain: without it "
          "ssh sessions land in no job and use GPU memory outside every lease. Add "
          "PrologFlags=Contain to slurm.conf");
    } else if (!*f.contain) {
      add("contain", CheckState::Ok,
          "no PrologFlags=Contain: each job's lease is made by its first step on this node");
    } else {
      add("contain", CheckState::Ok,
          "PrologFlags=Contain: each job's lease is made by its extern step as the job starts "
          "here");
    }
  }

  // 9. Every job here is a lease (no_gres), CPU-only ones too: the pool's
  // capacity must hold as many jobs as Slurm may run at once, at least one
  // per CPU, or the job past it is refused (placed or not).
  if (args && f.daemonAnswered && f.poolFound && f.poolCapacity) {
    if (!f.nodeCpus) {
      add("capacity", CheckState::Unknown,
          "whether pool " + args->pool + "'s capacity holds the node's jobs is unknown: " +
              f.nodeCpusError.value_or("scontrol names no CPUTot"));
    } else if (*f.poolCapacity < *f.nodeCpus) {
      add("capacity", CheckState::Failed,
          fmt::format("pool {}'s capacity {} is below the node's {} CPUs, and every job here is "
                      "a lease (no_gres): the job past {} running at once is refused. Set "
                      "capacity to at least {} (more where jobs share CPUs)",
                      args->pool, *f.poolCapacity, *f.nodeCpus, *f.poolCapacity, *f.nodeCpus));
    } else {
      add("capacity", CheckState::Ok,
          fmt::format("pool {} holds {} jobs at once, at least the node's {} CPUs", args->pool,
                      *f.poolCapacity, *f.nodeCpus));
    }
  }

  // 7. What a job without the GRES gets (no_gres) can be granted by the
  // pool: a budgeted pool takes only leases that declare gpu_memory_max.
  if (args && f.daemonAnswered && f.poolFound) {
    const NoGresPolicy& p = args->noGres;
    const std::string gresName = args->gres.front();
    if (p.kind == NoGresPolicy::Kind::kMeter && f.poolBudget) {
      add("no_gres", CheckState::Failed,
          fmt::format("no_gres=meter, but pool {} has a gpu_memory_budget, and a budgeted pool "
                      "grants only leases that declare gpu_memory_max: every job without the {} "
                      "GRES would be refused. Set no_gres=refuse (no GPU memory without the "
                      "GRES)",
                      args->pool, gresName));
    } else if (p.kind == NoGresPolicy::Kind::kCap && f.poolBudget) {
      // The budget is the node's GRES (check 4), all of which Slurm may
      // place: a cap counted in it could refuse a job Slurm placed.
      add("no_gres", CheckState::Failed,
          fmt::format("no_gres={} counts in pool {}'s gpu_memory_budget {}, which is the GRES "
                      "Slurm places: a job without the {} GRES holding its cap could make a job "
                      "Slurm placed be refused. Set no_gres=refuse (a cap beside a budget is not "
                      "supported yet)",
                      units::humanBytes(p.capBytes), args->pool, units::humanBytes(*f.poolBudget),
                      gresName));
    } else if (p.kind == NoGresPolicy::Kind::kCap) {
      add("no_gres", CheckState::Ok,
          fmt::format("a job without the {} GRES may hold {} of GPU memory here (pool {} has no "
                      "GPU budget)",
                      gresName, units::humanBytes(p.capBytes), args->pool));
    } else if (p.kind == NoGresPolicy::Kind::kMeter) {
      add("no_gres", CheckState::Ok,
          fmt::format("a job without the {} GRES is metered here, not bounded (no_gres=meter)",
                      gresName));
    } else {
      add("no_gres", CheckState::Ok,
          fmt::format("a job without the {} GRES gets no GPU memory here (no_gres=refuse): "
                      "its allocations are refused where the kernel charge runs (else it is "
                      "killed holding any), and its step's stderr says how to ask",
                      gresName));
    }
  }
  return out;
}

}  // namespace tally::slurm
