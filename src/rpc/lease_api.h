// The daemon's requests as types: one struct per method's params, one encoder
// (what the CLI and the Slurm plugin send) and one decoder (what the daemon
// accepts). Every byte a client sends reaches the service through a decoder
// here: each field's type, size and range is checked, an unknown field is
// refused, and an error names the field ("invalid-params": "\"pools\"[2]
// must be a string"). Free text is cut on a UTF-8 boundary, never mid-character.
//
// The wire shape of each method is in docs/daemon.md ("RPC reference").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "enforce/gpu_bound.h"
#include "lease/attributes.h"
#include "lease/declaration.h"
#include "lease/kind.h"
#include "lease/lease_id.h"
#include "util/result.h"

namespace tally::rpc::api {

using json = nlohmann::json;

// Sizes a request may carry (docs/daemon.md, "Limits").
inline constexpr std::size_t kMaxPools = 16;
using lease::kMaxLeaseId;
inline constexpr std::size_t kMaxUnitName = 256;  // systemd's own limit
inline constexpr std::size_t kMaxSummary = 512;   // a bound event's summary (cut, not refused)
inline constexpr std::size_t kMaxRecordBytes = 128 * 1024;
inline constexpr std::uint64_t kMaxPid = 4194304;  // PID_MAX_LIMIT
inline constexpr std::uint64_t kMaxTimeoutUs = 366ULL * 86'400'000'000ULL;
inline constexpr int kMinPriority = -100, kMaxPriority = 100;
using lease::kMaxOverSamples;

enum class Method {
  Hello,
  Acquire,
  Attach,
  Started,
  Complete,
  Resume,
  Release,
  Cancel,
  Leases,
  Lease,
  Pools,
  Bound,
  Subscribe,
  Seats,
  Overview,
  Metrics,
  Exited,
  Reload,
};
std::optional<Method> parseMethod(std::string_view name);
const char* methodName(Method m);
std::string methodList();  // "hello, acquire, ..." for the unknown-method error

// What acquire (a run lease) and attach ask for: the lease's declaration,
// and where and how it waits for its grant.
struct Declared {
  std::vector<std::string> pools;  // 1..kMaxPools distinct names
  lease::Declaration declaration;
  std::optional<std::uint64_t> timeoutUs;  // the queue wait; absent = the daemon's queue_timeout
  int priority = 0;                        // kMinPriority..kMaxPriority
  // Refuse at once, with the reason, rather than queue when the lease cannot
  // be granted now (tally attach without --wait: a running workload must not
  // go unmetered while it waits).
  bool noWait = false;
  // The site's scheduler placed it (a Slurm job's lease, against its GRES):
  // admitted against the pools' capacity and declared budgets only, never
  // refused for measured headroom (a placed job that fails is neither
  // requeued nor drained for); what headroom lacked is recorded with its
  // grant. Only with no_wait (it is never queued), and only root's.
  bool placed = false;
};

// Each request's params carry their method: Client::call(params) sends them
// under it, so no call site names a method as a free string.
struct Acquire {
  static constexpr Method kMethod = Method::Acquire;
  Declared declared;
};

// Exactly one of unit, cgroup (canonical, cgroup::canonicalPath) and pid.
struct Attach {
  static constexpr Method kMethod = Method::Attach;
  Declared declared;
  lease::AttachTarget target;
  // Attach even when the workload is already over a declared limit (the
  // daemon would kill it if it stays over); without it such an attach is
  // refused with the figures.
  bool force = false;
  // The attacher will report how the workload's processes end (exited):
  // when its cgroup empties, the outcome waits for that word, up to
  // kExitReportWaitUs, so the row carries it.
  bool reportsExit = false;
  // A child lease of the running lease `parent` (its id): the cgroup lies
  // inside the parent's, holds no pool (the parent's pools count it), and is
  // bounded by the smaller of its own and the parent's gpu_memory_max. It
  // ends with its parent, if not before.
  std::string parent;
  // A child lease kept while its cgroup is empty: placed before any process
  // is there, and ended with its parent (or when its cgroup is removed), not
  // when it empties. A Slurm extern step's user part on 26.05, where
  // pam_slurm_adopt's ssh sessions come and go and nothing else runs. Only
  // with "parent" and a "cgroup" target.
  bool keepWhenEmpty = false;
  // The cgroup is already leased by its caller: that lease is the answer
  // (attach-or-join: a Slurm job's lease, asked for by each of its steps
  // when no extern step made it). Only with a "cgroup" target.
  bool join = false;
};
inline constexpr std::uint64_t kExitReportWaitUs = 5'000'000;

// A run lease's client says where the lease runs (paths canonical).
struct Started {
  static constexpr Method kMethod = Method::Started;
  std::string lease;
  std::string unit;  // "" for a cgroupfs lease
  std::string cgroup;
  std::string countersCgroup;  // "" = the cgroup itself
};

// A run lease's client reports the outcome record (lease/record.h's shape).
// The fields the daemon and the ledger's readers use are checked by type;
// the whole record is at most kMaxRecordBytes.
struct Complete {
  static constexpr Method kMethod = Method::Complete;
  std::string lease;
  json record;
};

// A run lease's client reports what its GPU bound noticed or did.
struct Bound {
  static constexpr Method kMethod = Method::Bound;
  std::string lease;
  enforce::BoundEvent event;  // atNs is the daemon's receipt time, not the client's
};

// An attach lease's attacher reports how the workload's own processes ended
// (the Slurm plugin: the step's tasks' wait status, which only slurmstepd
// reaps), so the outcome row carries it. Exactly one of the two.
struct Exited {
  static constexpr Method kMethod = Method::Exited;
  std::string lease;
  std::optional<int> exitCode;  // 0..255
  std::optional<int> signal;    // 1..64
};

// release, cancel, resume, lease: one lease by id.
struct LeaseRef {
  std::string lease;
  // release only: the run lease's client could not contain its workload (the
  // refusal, in its words). Its lease ends as containment-refused, counted
  // and alerted on, never as a release by its user.
  std::optional<std::string> containmentRefused{};
};
template <Method M>
struct LeaseRefOf : LeaseRef {
  static constexpr Method kMethod = M;
};
using Resume = LeaseRefOf<Method::Resume>;
using Release = LeaseRefOf<Method::Release>;
using Cancel = LeaseRefOf<Method::Cancel>;

// lease: one lease's view with its ledger rows and a chart of its samples.
// `live`: a live lease's view alone (an ended lease's rows come either way),
// and a live child's parent's as "parent_view": what the Slurm plugin reads
// as each step ends (the step and its job in one call), whose cost must not
// grow with the age of the step's job (its rows, its samples).
struct LeaseQuery {
  static constexpr Method kMethod = Method::Lease;
  std::string lease;
  bool live = false;
};

// Methods without params: any field is refused (decodeEmpty).
template <Method M>
struct NoParams {
  static constexpr Method kMethod = M;
};
using Hello = NoParams<Method::Hello>;

// subscribe: the events from now on; with since_ns or after_seq the ledger's
// rows written since that time or after that row are sent first, as the events
// they were when written (each marked "replayed"), so a follower that
// reconnects, or asks for the last hour, misses nothing the ledger holds.
struct Subscribe {
  static constexpr Method kMethod = Method::Subscribe;
  std::optional<std::uint64_t> sinceNs;  // realtime ns
  std::optional<std::int64_t> afterSeq;  // a ledger row's seq (the last one seen)
};
// leases, seats: one page of the live leases, in lease-id order, those after
// `after` (none: from the first), at most `limit` (default and most
// kMaxPageLeases); the first page also names the first queued requests.
// The reply's "page" says how many live leases there are and the id to ask
// after for the next page (null: this was the last).
struct ListPage {
  std::optional<std::string> after;
  std::optional<std::uint64_t> limit;
};
inline constexpr std::size_t kMaxPageLeases = 512;
struct ListLeases : ListPage {
  static constexpr Method kMethod = Method::Leases;
};
using ListPools = NoParams<Method::Pools>;
struct Seats : ListPage {
  static constexpr Method kMethod = Method::Seats;
};
using Overview = NoParams<Method::Overview>;
using Reload = NoParams<Method::Reload>;
using Metrics = NoParams<Method::Metrics>;

json encode(const Acquire& a);
json encode(const Attach& a);
json encode(const Started& s);
json encode(const Complete& c);
json encode(const Exited& e);
json encode(const Bound& b);
json encode(const LeaseRef& r);
json encode(const LeaseQuery& q);
json encode(const Subscribe& s);
json encode(const ListPage& p);
template <Method M>
json encode(const NoParams<M>&) {
  return json::object();
}

Result<Acquire> decodeAcquire(const json& params);
Result<Attach> decodeAttach(const json& params);
Result<Started> decodeStarted(const json& params);
Result<Complete> decodeComplete(const json& params);
Result<Bound> decodeBound(const json& params);
Result<Exited> decodeExited(const json& params);
Result<LeaseRef> decodeLeaseRef(const json& params);
Result<LeaseQuery> decodeLeaseQuery(const json& params);
Result<Subscribe> decodeSubscribe(const json& params);
Result<ListPage> decodeListPage(const json& params);
// Methods without params (hello, pools, overview, metrics):
// any field is refused.
Status decodeEmpty(const json& params);

}  // namespace tally::rpc::api
