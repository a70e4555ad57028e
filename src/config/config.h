// The daemon's configuration: one TOML file with a [daemon] table and one
// [pools.<name>] table per pool. Parsed into raw integers (bytes, µs); every
// problem is reported with its line, and a key tally does not know is an
// error (a misspelt budget must not silently mean "no budget").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devices/gtt_consumer.h"
#include "enforce/cadence.h"
#include "rpc/lease_api.h"
#include "util/result.h"

namespace tally::config {

struct Pool {
  std::string name;
  std::uint64_t capacity = 1;                    // holders at once
  std::optional<std::uint64_t> memoryBudget;     // Σ declared memory_max of holders
  std::optional<std::uint64_t> gpuMemoryBudget;  // Σ declared gpu_memory_max of holders
  std::vector<std::string> devices;  // PCI BDFs the GPU budget refers to; empty = every GPU
  // Which GTT ceiling the pool's GPU headroom is measured against
  // (devices/gtt_ceiling.h): the smaller of graphics and compute, or the one
  // the pool's workloads use.
  devices::GttConsumer gttCeiling = devices::GttConsumer::Smaller;
  std::size_t line = 0;  // where its table starts in the file
  // Who may ask for the pool besides root (allow_users, allow_groups: names
  // or numeric ids). Both empty: every user who reaches the socket.
  std::vector<std::string> allowUsers{}, allowGroups{};
  // Each user's share of the pool (Slurm's QOS MaxTRESPerUser): live leases,
  // and the sums of their declared memory_max / gpu_memory_max. A request
  // past its owner's share waits for that owner's own leases, never holds
  // back another user's. Absent: no share, the pool's limits alone.
  std::optional<std::uint64_t> perUserCapacity{}, perUserMemoryBudget{}, perUserGpuMemoryBudget{};
  // What a request that declares no memory_max / gpu_memory_max gets in this
  // pool (the operator declared it here), so a bare `tally run --pool` works.
  std::optional<std::uint64_t> defaultMemoryMax{}, defaultGpuMemoryMax{};
};

inline constexpr const char* kSystemSocket = "/run/tally/tally.sock";

struct Daemon {
  std::string socket = kSystemSocket;
  std::optional<std::string> socketGroup;  // group owning the 0660 socket; default: the daemon's
  std::string stateDir;                    // default: ledger::defaultStateDir()
  std::uint64_t sampleIntervalUs = 1'000'000;
  // A lease within this percent of its gpu_memory_max (or rising fast toward
  // it) is sampled every nearBoundIntervalUs instead (enforce/cadence.h).
  unsigned nearBoundMarginPercent = enforce::Cadence{}.marginPercent;
  std::uint64_t nearBoundIntervalUs = enforce::Cadence{}.nearUs;
  // Default for requests that give none: a queue that can never be served
  // ends. 0 (wait forever) only when the config says "0".
  std::uint64_t queueTimeoutUs = 3'600'000'000;               // 1h
  std::uint64_t samplesFullResolutionUs = 3'600'000'000ULL;   // every sample kept this long
  std::uint64_t samplesMaxAgeUs = 30ULL * 86'400'000'000ULL;  // one per minute kept until then
  std::uint64_t samplesMaxRows = 1'000'000;                   // hard cap, oldest dropped first
  std::uint64_t clientGraceUs = 60'000'000;  // a run lease's client may be away this long
  // GTT -> memcg coverage at start (docs/coverage.md): run the active probe
  // (root; allocates coverageProbeBytes of GTT in a throw-away cgroup), and
  // whether gpu_memory_max still kills once the kernel charges GTT.
  bool coverageProbe = false;
  // The kernel charge and bound (bpf/, docs/enforcement.md):
  // loaded where the kernel allows (true), or never (false: fdinfo meters
  // and the sampled kill bounds, as on a kernel without BPF).
  bool kernelCharge = true;
  // Buffer objects one lease may hold in the kernel charge's object map
  // (bpf/sizing.h): past it a bounded lease's allocation is refused, an
  // unbounded one's object left to fdinfo. It keeps one lease from filling
  // the map for every other.
  std::uint64_t kernelObjectsPerLease = 65536;
  std::uint64_t coverageProbeBytes = 64ULL << 20;
  bool keepGpuMemoryMax = false;
  // Metrics besides `tally metrics`: a node_exporter textfile, and GET
  // /metrics on a loopback HOST:PORT. Empty = off (the default).
  std::string metricsTextfile;
  std::string metricsListen;
  // metrics_listen may be a non-loopback address (config/listen_address.h).
  bool metricsBeyondLoopback = false;
  // Who may read /metrics besides root (names or numeric ids); empty: every
  // local user who reaches the address. Loopback only (config.cpp checks).
  std::vector<std::string> metricsAllowUsers{};
  // Client limits (daemon/limits.h has every limit and its default).
  std::uint64_t maxConnections = 1024;
  std::uint64_t maxConnectionsPerUid = 64;
  std::uint64_t maxQueued = 16384;
  std::uint64_t maxQueuedPerConnection = 64;
  std::uint64_t maxQueuedPerUid = 256;
  std::uint64_t maxLeasesPerUid = 256;
  std::uint64_t maxChildrenPerLease = 64;
  std::uint64_t maxReplaysPerUid = 4;
  std::uint64_t maxCgroupsWalkedPerUid = 4096;
  std::uint64_t queriesPerSecondPerUid = 20;
  std::uint64_t queryTimePerSecondPerUidUs = 100'000;  // of the daemon's loop, per user
  std::uint64_t ledgerRowsPerMinutePerUid = 600;
  std::uint64_t ledgerBytesPerMinutePerUid = 4u << 20;
  // Priorities above 0 are root's, and this group's members' (none: root's only).
  std::optional<std::string> priorityGroup;
  std::uint64_t idleTimeoutUs = 60'000'000;
  std::uint64_t requestTimeoutUs = 10'000'000;  // a request line must arrive whole within this
};

// A config file larger than this is refused before it is read whole (a
// mistaken path such as /dev/zero fails at once, not after gigabytes).
inline constexpr std::size_t kMaxConfigBytes = 1u << 20;

// A workload leased every time it runs ([leases.<name>]): each start of the
// unit becomes a lease, as if root had run `tally attach --unit` with these
// declarations, across unit and daemon restarts (daemon/declared_leases.h).
struct DeclaredLease {
  std::string name;  // the table's name; the lease's name unless `name` is given
  std::size_t line = 0;
  // The attach request, decoded by the RPC's own decoder: a declaration
  // means exactly what the same `tally attach` would.
  rpc::api::Attach attach;
  const std::string& unit() const { return attach.target.unit; }
};

struct Config {
  std::string path;  // where it was read from, for messages
  Daemon daemon;
  std::vector<Pool> pools;            // in file order
  std::vector<DeclaredLease> leases;  // in file order
  const Pool* pool(std::string_view name) const;
};

// One problem, with the 1-based line it is on (0 when it has no line).
struct Problem {
  std::size_t line = 0;
  std::string message;
};

struct Parsed {
  std::optional<Config> config;   // set when there are no problems
  std::vector<Problem> problems;  // in line order
};

// Pure: text in, config or problems out. `path` only labels messages.
Parsed parse(std::string_view text, const std::string& path);
// Reads and parses a file; a file that cannot be read is one problem.
Parsed load(const std::string& path);

// "FILE:LINE: message" lines, for stderr.
std::string formatProblems(const Parsed& p, const std::string& path);

}  // namespace tally::config
