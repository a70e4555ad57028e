// `tally doctor`: the command line; the report is doctor/report.h's.
#include "cli/cmd_doctor.h"

#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "cli/print_line.h"
#include "doctor/report.h"
#include "util/units.h"

namespace tally::cli {

void addDoctorCommand(CLI::App& app, DoctorOptions& opts) {
  auto* doctor = app.add_subcommand(
      "doctor", "What this host offers a lease, and whether MemoryMax covers GTT here");
  doctor->footer(
      "Sections, each with the evidence read: cgroup v2 (controllers, where leases live, memory\n"
      "delegation), systemd (reachable, version), dmem (regions, delegation), GPU devices "
      "(GTT/VRAM,\n"
      "GTT ceiling), and GTT -> memcg coverage: static signs (memory.stat gpu_active, ttm_memcg,\n"
      "a dmem GTT region, GPUActive) and, with --active, a probe that allocates a GTT buffer in a\n"
      "throw-away cgroup and compares memory.current with the client's drm-total-gtt (root only).\n"
      "The kernel charge (BPF): each device it covers, what it could not do exactly, what it "
      "never\n"
      "sees; with --active, the charge probe: per allocation path the host has (amdgpu "
      "GEM_CREATE,\n"
      "KFD, dumb buffers, xe), N bytes allocated in a throw-away cgroup armed as a lease, the\n"
      "charge compared with the driver's own figures (fdinfo, mem_info), then one more refused at\n"
      "the bound. A charge that differs, or an allocation not refused, is degraded (exit 1).\n"
      "The last line is the verdict: what a lease's MemoryMax covers on this kernel.\n\n"
      "Exit status (a health check: docs/doctor.md): 0 leases can be contained and metered "
      "here,\n"
      "whoever bounds GTT (the kernel, or tally from DRM fdinfo: today's normal AMD state); 1\n"
      "degraded (leases cannot be contained: no cgroup v2 memory controller, memory not "
      "delegated\n"
      "where they live, no systemd and no delegated subtree); 2 a check could not run (the "
      "probe\n"
      "failed, /proc or /sys unreadable) or a usage error. The coverage verdict is reported, "
      "never\n"
      "an error.\n\n"
      "--slurm checks what a Slurm node needs of tally, each with its evidence: plugstack.conf\n"
      "loads tally_spank.so with arguments that parse; the plugin was built for the Slurm\n"
      "release slurmd runs (slurmd -V); the daemon answers at its socket=; the pool's\n"
      "gpu_memory_budget equals the node's GRES count as slurmctld places it (scontrol show\n"
      "node); RealMemory plus the GRES's GTT part fit in MemTotal; that GTT part fits under\n"
      "the kernel's GTT ceiling for the pool's clients. Exit 0 all hold, 1 one\n"
      "failed (drain the node: docs/slurm.md has the NHC and HealthCheckProgram lines), 2 none\n"
      "could be judged. The whole check ends within --timeout (20s, inside NHC's 30 s): the\n"
      "daemon is asked first, and what slurmctld has not answered by then is unknown, so a\n"
      "slow controller drains no node. Run it as root, as slurmd runs.");
  doctor->add_flag("--json", opts.json, "print the report as JSON");
  doctor->add_flag("--active", opts.active,
                   "run the active GTT -> memcg probe (root; allocates --probe-size of GTT)");
  doctor
      ->add_option("--probe-size", opts.probeSize,
                   "GTT buffer the probe allocates (and each charge probe allocation)")
      ->default_str("64MiB");
  doctor->add_flag("--require-kernel-charge", opts.requireKernelBound,
                   "with --active: exit 2 unless the kernel charge runs here, refuses, and its "
                   "probe ran on a path");
  // Its name before the feature had one name (kept so scripts keep working; not listed).
  doctor->add_flag("--require-kernel-bound", opts.requireKernelBound)->group("");
  doctor->add_flag("--slurm", opts.slurm,
                   "check this node as its Slurm expects it instead (a health check: exit 1 "
                   "drains; see below)");
  doctor->add_option("--plugstack", opts.plugstack,
                     "with --slurm: Slurm's plugstack.conf (default: /etc/slurm/plugstack.conf, "
                     "else slurmd's configless cache, /run/slurm/conf/plugstack.conf)");
  doctor->add_option("--plugin-dir", opts.pluginDir,
                     "with --slurm: Slurm's PluginDir, where a plugstack path without a '/' is");
  doctor
      ->add_option("--timeout", opts.slurmTimeout,
                   "with --slurm: the whole check's time (inside NHC's 30 s). What slurmctld has "
                   "not answered by then is unknown, not FAILED: a slow controller drains no node")
      ->default_str("20s");
  doctor
      ->add_option("--probe-cgroup", opts.probeCgroup,
                   "parent of the probe's throw-away cgroup (needs +memory in its subtree_control)")
      ->default_str("/");
}

int runDoctor(const fs::RootPaths& paths, const DoctorOptions& opts) {
  if (opts.slurm) return runDoctorSlurm(paths, opts);
  doctor::Options o;
  o.queryManager = paths.proc == "/proc" && paths.sys == "/sys";
  if (opts.active) {
    auto size = units::parseSize(opts.probeSize);
    if (!size || *size < (1ULL << 20) || *size > (1ULL << 32)) {
      fmt::print(stderr, "tally doctor: --probe-size {}: must be 1MiB..4GiB\n", opts.probeSize);
      return kExitUsage;
    }
    o.probe = coverage::ProbeOptions{};
    o.probe->bytes = *size;
    o.probe->cgroupParent = opts.probeCgroup;
    o.chargeProbe = coverage::ChargeProbeOptions{};
    o.chargeProbe->bytes = *size;
    o.chargeProbe->cgroupParent = opts.probeCgroup;
    o.requireKernelBound = opts.requireKernelBound;
  } else if (opts.requireKernelBound) {
    fmt::print(stderr, "tally doctor: --require-kernel-charge needs --active (its probe)\n");
    return kExitUsage;
  }
  auto report = doctor::examine(paths, o);
  if (!report) {
    fmt::print(stderr, "tally: {}\n", report.error().message);
    return kExitCheckFailed;
  }
  if (opts.json)
    fmt::print("{}\n", doctor::renderJson(*report).dump(2));
  else
    printBlock(doctor::renderText(*report));  // device names, probe cgroups: kernel text
  return doctor::exitStatus(report->health());
}

}  // namespace tally::cli
