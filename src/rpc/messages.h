// The daemon's replies and events as types, typed both ways: the daemon
// encodes each reply and event from one of these structs, and a client
// decodes it through the same struct (util/json_fields.h: each field checked,
// what is missing or mistyped is an error naming the field, never a guess).
// The views a person reads (leases, pools, seats, overview: the daemon's
// documents, shaped by docs/daemon.md) travel as documents under one checked
// key; what a client acts on is typed here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bpf/kernel_charge.h"
#include "enforce/gpu_bound.h"
#include "enforce/plan.h"
#include "util/result.h"

namespace tally::rpc::api {

using json = nlohmann::json;

// hello
struct HelloReply {
  int protocol = 0;
  std::int64_t daemonPid = 0;
  std::uint32_t uid = 0;
  std::string stateDir;
};
json encode(const HelloReply& r);
Result<HelloReply> decodeHelloReply(const json& result);

// acquire, attach, resume, started (and lease, for a live lease): the lease
// as the daemon holds it. The fields a client acts on are typed; the rest of
// the daemon's view of it (meters, declarations, times) rides in `view`.
struct LeaseReply {
  std::string lease, name, kind, state;
  std::vector<std::string> pools;
  std::optional<std::string> unit, cgroup;
  // The hand-over (docs/coverage.md): the MemoryMax a run lease's scope must
  // have where the kernel charges GTT (--memory-max + --gpu-memory-max).
  std::optional<std::uint64_t> memoryMaxEffective;
  std::string coverage;           // "host" or "host+gtt"
  bool gpuBoundAdvisory = false;  // gpu_memory_max only reports (the kernel bounds GTT)
  // What the lease declares as the daemon holds it ("declared"): a run
  // lease's client takes a figure it did not give from here (a pool's
  // default_memory_max / default_gpu_memory_max), so its scope is bounded
  // as its row says.
  std::optional<std::uint64_t> declaredMemoryMax, declaredGpuMemoryMax;
  json view = json::object();

  // The kernel state the daemon planned the lease for, as a run lease's
  // client plans its run with it (enforce::plan gives both the same
  // MemoryMax and the same bound): the coverage, and keep_gpu_memory_max as
  // the advisory flag shows it (an advisory bound is one not kept). The
  // in-kernel refusal is the daemon's, not the client's.
  enforce::KernelState kernelState() const;
};
json encode(const LeaseReply& r);
Result<LeaseReply> decodeLeaseReply(const json& result);

// release and cancel: what became of the lease ("released", "withdrawn",
// "stopping", "cancelled").
struct ReleaseReply {
  std::string lease, state;
};
json encode(const ReleaseReply& r);
Result<ReleaseReply> decodeReleaseReply(const json& result);

// reload: what the config reload changed, one line each (none: nothing did);
// a refused reload is an error reply that says why nothing changed.
struct ReloadReply {
  std::vector<std::string> changes;
};
inline constexpr std::size_t kMaxReloadChanges = 4096, kMaxReloadLineBytes = 4096;
json encode(const ReloadReply& r);
Result<ReloadReply> decodeReloadReply(const json& result);

// complete: the outcome's ledger row, on disk. `kernelCharge`: what the
// kernel charged the lease, where the daemon armed it (its refusals are in no
// figure the client read itself, so its summary line says them from here).
struct CompleteReply {
  std::string lease;
  std::int64_t seq = 0;
  std::string hash;
  std::optional<bpf::LeaseCharge> kernelCharge;
};
json encode(const CompleteReply& r);
// The kernel's figures as a record's gpu.kernel_charge and this reply carry them.
Result<bpf::LeaseCharge> decodeKernelCharge(const json& charge, const std::string& name);
Result<CompleteReply> decodeCompleteReply(const json& result);

// bound: the event is recorded.
struct BoundReply {
  bool recorded = false;
};
json encode(const BoundReply& r);
Result<BoundReply> decodeBoundReply(const json& result);

// subscribe: the event kinds that follow, and whether the ledger's rows
// are replayed first (since_ns / after_seq): then a "replayed" event
// (ReplayedEvent) ends the replay, before the live events.
struct SubscribeReply {
  std::vector<std::string> events;
  bool replaying = false;
};
inline constexpr std::size_t kMaxReplayed = 10000;
json encode(const SubscribeReply& r);
Result<SubscribeReply> decodeSubscribeReply(const json& result);

// metrics: the Prometheus exposition.
struct MetricsReply {
  std::string text;
};
json encode(const MetricsReply& r);
Result<MetricsReply> decodeMetricsReply(const json& result);

// leases, pools, seats, overview, lease (an ended one): a document for people
// (docs/daemon.md), checked to be an object carrying `key` ("leases",
// "pools", "seats", "seats" again for overview, "lease").
Result<json> decodeDocument(const json& result, const char* key);

// Event "queued" (to a waiting acquire or attach's own client): where it
// stands and what it waits for, in numbers (the daemon sends it when either
// changes, and at least every 30 s). Decoded field by field, leniently: what
// is missing or mistyped is left empty, never guessed.
struct Queued {
  std::string lease;
  std::uint64_t position = 0, queued = 0;
  std::string waitingFor, pool, detail;
  std::optional<std::uint64_t> needed, free;
  std::string unit;  // of needed and free: "bytes" or "leases"
};
json encode(const Queued& q);
Queued decodeQueued(const json& event);
// "position 2 of 3: pool gpu's GPU memory budget: needs 40.0 GiB, 16.0 GiB of 96.0 GiB left"
std::string describe(const Queued& q);
// What it waits for, without its place: "pool gpu's capacity: 4 of 4 held".
std::string waitWords(const Queued& q);
// How a refusal of a request that must not wait (no_wait) begins; the rest is waitWords.
inline constexpr const char* kCannotBeGrantedNow = "it cannot be granted now: ";

// Event "lease": a lease's lifecycle, one per ledger row (granted, started,
// adopted, readopted, released, outcome, lost, withdrawn: ledger/kinds.h),
// and kQueuedKind when a request joins the queue (no row stands for it).
inline constexpr const char* kQueuedKind = "queued";
// A request that left the queue without a grant (no row stands for it
// either): its queue timeout passed, or its owner (or root) cancelled it.
inline constexpr const char* kQueueTimeoutKind = "queue-timeout";
inline constexpr const char* kCancelledKind = "cancelled";
// A reload's new pools can never grant it (admission::Engine::reconfigure).
inline constexpr const char* kReloadRefusedKind = "refused-by-reload";
struct LeaseEvent {
  std::string lease, kind, name;
  std::vector<std::string> pools;
  std::string message;
  std::optional<std::string> outcome;  // the outcome's class, on an outcome
  std::optional<std::uint32_t> owner;  // whose lease (uid); `tally events --user` matches it
  bool terminal() const;               // the lease's last row (ledger::isTerminal)
};
json encode(const LeaseEvent& e);
Result<LeaseEvent> decodeLeaseEvent(const json& event);

// Event "gpu-bound": what a lease's GPU bound noticed or did.
struct GpuBoundEvent {
  std::string lease, name, source;
  enforce::BoundEvent event;
  std::optional<std::uint32_t> owner;  // whose lease (uid)
};
json encode(const GpuBoundEvent& e);
Result<GpuBoundEvent> decodeGpuBoundEvent(const json& event);

// Event "replayed": a subscriber's replay is over; `rows` events were
// replayed, at most kMaxReplayed (`truncated`: more matched, ask again after
// the last seq). `error`: the ledger could not be read further.
struct ReplayedEvent {
  std::uint64_t rows = 0;
  bool truncated = false;
  std::optional<std::string> error;
};
json encode(const ReplayedEvent& e);
Result<ReplayedEvent> decodeReplayedEvent(const json& event);

}  // namespace tally::rpc::api
