// Pure aggregation of a Scan: per-client region figures, sums per process,
// per cgroup and per container (owned clients only, so every client counts
// once), and per device (attributed vs the device's own counters).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attribution/container.h"
#include "devices/gtt_ceiling.h"
#include "gpumem/gpu_memory.h"
#include "gpumem/regions.h"
#include "host/snapshot.h"
#include "scanner/scan.h"

namespace tally::gpumem {

struct CgroupGroup {
  std::string path;
  std::optional<attribution::Workload> workload;
  std::vector<pid_t> pids;
  std::vector<std::size_t> ownedClients;
  RegionMap regions;
  std::optional<KfdFigure> kfd;
  GpuMemory counted;  // the owned clients and KFD, by the lease meter's rule
};

struct ContainerGroup {
  std::string name;  // workload display name, or the cgroup path when unrecognised
  std::optional<attribution::Workload> workload;
  std::vector<std::string> cgroups;
  std::vector<pid_t> pids;
  RegionMap regions;
  std::size_t clients = 0;
  std::optional<KfdFigure> kfd;
  GpuMemory counted;
};

struct DeviceSummary {
  const devices::DrmDevice* device = nullptr;
  RegionMap attributed;  // every client on the device, once
  std::size_t clients = 0;
  // device used - attributed resident, for regions both sides know. Signed:
  // negative means clients over-report (shared buffers counted per importer).
  std::map<std::string, std::int64_t> unattributed;
  std::optional<std::string> unattributedNote;  // why figures are absent or partial
  devices::GttCeilings gttCeilings;
  devices::RocmPlacement rocm;  // where ROCm's VRAM-flagged memory lives on it
  // The driver prints no memory figure (devices::driverFigures): its clients'
  // GPU memory is unknown, and no gpu_memory_max can be checked on it.
  bool silent = false;
  std::optional<std::uint64_t> gttHeadroomBytes;  // against the smaller ceiling
  const char* gttHeadroomCeiling = nullptr;       // "graphics" or "compute"
  std::optional<std::string> gttHeadroomUnknown;
};

struct Aggregate {
  std::vector<ClientRegions> clientRegions;  // parallel to scan.clients
  std::vector<RegionMap> processRegions;     // parallel to scan.processes (owned clients)
  // GPU memory by the one counting rule (gpumem/gpu_memory.h), the same the
  // lease meter uses: each client alone, each process's owned clients and
  // KFD, and every client of the scan once (for a cgroup-scoped scan, what a
  // lease on that cgroup is metered at).
  std::vector<GpuMemory> clientCounted;              // parallel to scan.clients
  std::vector<GpuMemory> processCounted;             // parallel to scan.processes
  std::vector<std::optional<KfdFigure>> processKfd;  // parallel to scan.processes
  GpuMemory scopeCounted;
  // parallel to scan.processes: the workload of each process's cgroup,
  // recognised once per cgroup and shared by every output.
  std::vector<std::optional<attribution::Workload>> processWorkloads;
  std::vector<CgroupGroup> cgroups;        // sorted by path
  std::vector<ContainerGroup> containers;  // sorted by name
  std::vector<DeviceSummary> devices;      // parallel to scan.devices.devices
};

Aggregate aggregate(const scanner::Scan& scan, const host::Snapshot& host);

}  // namespace tally::gpumem
