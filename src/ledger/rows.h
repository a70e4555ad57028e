// The bodies of the ledger's lease rows as types: one writer (encode) and one
// reader (decode) per row kind, so what the daemon records at a grant is what
// it reads back after a restart, field for field. The outcome and lost rows'
// body is the lease record (lease/record.h), a document of its own.
//
// A decoder accepts rows written by every earlier tally (a field they lack is
// absent, and reads as its default) and refuses a field of the wrong type,
// naming it: a ledger is trusted, so such a row means damage.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "enforce/gpu_bound.h"
#include "lease/attributes.h"
#include "lease/declaration.h"
#include "lease/kind.h"
#include "lease/shortfall.h"
#include "ledger/kinds.h"
#include "probes/cgroup_memory.h"
#include "util/result.h"

namespace tally::ledger {

class Ledger;
struct Event;

// granted: who asked for what, and how its GPU bound is enforced.
//
// The declaration is the RPC's own object (lease::declarationJson) under
// "declared", with "source": "declared" and an absent limit written null;
// its name is also the row's "name". Rows before the declaration was one
// object spelt the bound's action and pace only as "gpu_bound"'s "action"
// and "consecutive_samples": both spellings read.
struct GrantedRow {
  lease::LeaseKind kind = lease::LeaseKind::Run;
  uid_t owner = 0;
  pid_t peerPid = 0;
  std::vector<std::string> pools;
  int priority = 0;
  lease::Declaration declaration;
  // How the GPU bound is enforced, present when the lease has one
  // (gpu_memory_max or _high): the action after the hand-over (advisory:
  // report) or a child's parent's, and its pace.
  std::optional<enforce::Action> boundAction;
  unsigned boundConsecutive = enforce::kDefaultConsecutive;
  std::uint64_t requestedAtNs = 0;
  lease::AttachTarget target;  // attach only
  std::string parent;          // a child lease's parent lease id ("" = none)
  // attach: its attacher reports how the processes ended (reports_exit); a
  // restarted daemon still waits for that word rather than calling it lost.
  bool reportsExit = false;
  // attach: a child kept while its cgroup is empty (keep_when_empty); a
  // restarted daemon re-adopts it empty rather than ending it.
  bool keepWhenEmpty = false;
  // Placed by the site's scheduler (rpc::api::Declared::placed), and what
  // measured headroom lacked when it was granted anyway.
  bool placed = false;
  std::optional<lease::Shortfall> shortfall;
};
nlohmann::json encode(const GrantedRow& r);
// {"unit": ...} | {"cgroup": ...} | {"pid": ...}; null when empty.
nlohmann::json targetJson(const lease::AttachTarget& t);
Result<GrantedRow> decodeGranted(const nlohmann::json& body);

// started (a run lease's client placed it), adopted (the daemon took an
// attached workload's cgroup), readopted (a restarted daemon found it again).
struct PlacedRow {
  std::string unit;  // "" when no systemd unit owns the cgroup
  std::string cgroup;
  std::uint64_t inode = 0;     // the cgroup directory's, to tell a re-created one apart
  std::string countersCgroup;  // where the final counters are read ("" = cgroup)
  std::optional<std::uint64_t> oomKillsAtAdoption;      // adopted
  std::optional<probes::MemoryLimit> appliedMemoryMax;  // adopted: memory.max as read back
};
nlohmann::json encode(const PlacedRow& r);
Result<PlacedRow> decodePlaced(const nlohmann::json& body);

// released: who asked for the end.
struct ReleasedRow {
  uid_t byUid = 0;
  pid_t byPid = 0;
};
nlohmann::json encode(const ReleasedRow& r);

// withdrawn: why a granted lease never ran.
struct WithdrawnRow {
  std::string reason;
};
nlohmann::json encode(const WithdrawnRow& r);

// gpu-bound: what the bound noticed or did, and from which figure.
struct BoundRow {
  enforce::BoundEvent event;
  std::string source;  // "drm-fdinfo", "drm-fdinfo+kfd-sysfs"
};
nlohmann::json encode(const BoundRow& r);
Result<BoundRow> decodeBound(const nlohmann::json& body);

// coverage (lease id ""): what this kernel does with GTT, found at daemon start.
struct CoverageRow {
  std::string kernel;
  std::string coverage;  // coverage::coverageName: "host", "host+gtt", "unknown"
  std::string basis, verdict, tallyDoes;
  nlohmann::json staticSigns, activeProbe;  // coverage/'s own JSON (null: not run)
  bool keepGpuMemoryMax = false;
  std::optional<std::pair<std::string, std::string>> changedFrom;  // kernel, coverage
};
nlohmann::json encode(const CoverageRow& r);
// The newest coverage row (kernel and coverage only), absent when none was recorded.
std::optional<CoverageRow> lastCoverage(Ledger& ledger);

// A lease's samples for a chart (`tally lease show`): at most kChartPoints
// points, computed by the database (Ledger::chart), each the highest figures
// of its span of time (a spike is never averaged away):
// [{"at_ns", "memory_bytes", "gpu_bytes"}], null where not read.
inline constexpr std::size_t kChartPoints = 240;
nlohmann::json chartSamplesJson(Ledger& ledger, const std::string& leaseId);

// A lease's chain rows as `lease show` has them: [{"seq", "at_ns", "kind", "body", "hash"}].
nlohmann::json eventRowsJson(const std::vector<Event>& events);

}  // namespace tally::ledger
