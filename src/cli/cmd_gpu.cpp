#include "cli/cmd_gpu.h"

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/print_line.h"
#include "cli/roots.h"
#include "cli/user_names.h"
#include "host/snapshot.h"
#include "report/gpu_json.h"
#include "report/gpu_table.h"
#include "scanner/scan.h"

namespace tally::cli {

void addGpuCommand(CLI::App& app, GpuOptions& opts) {
  auto* gpu =
      app.add_subcommand("gpu", "GPU memory per process, cgroup and container, from DRM fdinfo");
  gpu->footer(
      "Every DRM client (one open of a /dev/dri node) is counted once, however many fds and\n"
      "processes hold it; a client held by several processes is charged to the holder that\n"
      "started first and flagged as shared. Resident figures per region come from\n"
      "drm-resident-<r>, else drm-memory-<r>, else amdgpu's 5.14 'gtt mem:' form.\n"
      "A process whose fds cannot be read is listed as unreadable, never as zero:\n"
      "run as root (or with CAP_SYS_PTRACE) to see every process.\n\n"
      "Examples:\n"
      "  tally gpu                      table of GPU processes\n"
      "  tally gpu --by container       sums per podman/docker/k8s/slurm/systemd workload\n"
      "  tally gpu --cgroup /system.slice/llama.service --json\n\n"
      "Diagnostic/testing: --proc-root, --sys-root, --cgroup-root read another tree (tally "
      "--help).\n"
      "Exit status: 0 ok (also with no DRM device), 2 usage, 3 a root or the --cgroup subtree is "
      "unreadable.");
  gpu->add_flag("--json", opts.json, "print the JSON document (schema 1) instead of a table");
  gpu->add_option("--by", opts.by, "group the table by process, cgroup or container")
      ->check(CLI::IsMember({"process", "cgroup", "container"}))
      ->default_str("process");
  gpu->add_option("--cgroup", opts.cgroup,
                  "scan only the processes of this cgroup v2 subtree (path under --cgroup-root)");
}

int runGpu(const fs::RootPaths& paths, const GpuOptions& opts) {
  auto roots = openRoots(paths);
  if (!roots) return kExitEnvironment;
  // One snapshot of the host for the scan and the report alike.
  auto host = host::readSnapshot(roots->proc, roots->sys);
  scanner::Scanner scanner(roots->proc, roots->sys);
  scanner.useHost(&host.devices, &host.kfd);
  Result<scanner::Scan> scan = [&]() -> Result<scanner::Scan> {
    if (opts.cgroup.empty()) return scanner.scanHost();
    if (!roots->cgroup) return Error{ENOENT, *roots->cgroupError + " (check --cgroup-root)"};
    return scanner.scanCgroup(*roots->cgroup, opts.cgroup);
  }();
  if (!scan) {
    fmt::print(stderr, "tally gpu: {}\n", scan.error().message);
    return kExitEnvironment;
  }
  auto agg = gpumem::aggregate(*scan, host);
  if (opts.json) {
    fmt::print("{}\n", report::gpuJson(*scan, agg, host).dump(2));
  } else {
    auto by = opts.by == "cgroup"      ? report::GroupBy::kCgroup
              : opts.by == "container" ? report::GroupBy::kContainer
                                       : report::GroupBy::kProcess;
    // Process names and cgroup paths are whatever a local user made them.
    UserNames names;
    printBlock(
        report::gpuTable(*scan, agg, host, by, [&](std::uint32_t uid) { return names.of(uid); }));
  }
  return kExitOk;
}

}  // namespace tally::cli
