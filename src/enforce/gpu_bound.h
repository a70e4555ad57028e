// The userspace GPU-memory bound of one lease (docs/enforcement.md). Pure:
// each meter sample goes in, what to do comes out; the caller does it (kill
// through a seam, events to the ledger, the journal and subscribers).
//
// gpu_memory_max: the lease's GPU memory (gpumem/gpu_memory.h) above the limit
// for `consecutive` samples in a row -> the action (kill the lease's cgroup,
// or only report). An absent sample (a process unreadable, a scan failed)
// neither counts nor breaks the run: tally never kills on a figure it did not
// read, and a gap does not hide a lease that stays over.
// gpu_memory_high: crossing it upward raises one event; falling back below it
// re-arms it. It never kills.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace tally::enforce {

// What gpu_memory_max does. Refuse: where the kernel charge is active
// (bpf/), the allocation that would cross is refused (ENOMEM) and the sampled
// kill stays the backstop for memory no creation path shows; elsewhere it is
// the sampled kill. Kill: the sampled kill only (the kernel still meters).
// Report: neither; events only.
enum class Action { Refuse, Kill, Report };
const char* actionName(Action a);                            // "refuse", "kill", "report"
std::optional<Action> parseAction(const std::string& text);  // the same spellings
// Every action, each spelling once: what the command line accepts, and how
// an error lists them ("\"refuse\", \"kill\" or \"report\"").
inline constexpr Action kActions[] = {Action::Refuse, Action::Kill, Action::Report};
std::vector<std::string> actionNames();
std::string actionChoices();
inline bool killsOverBound(Action a) { return a != Action::Report; }
inline bool refusesInKernel(Action a) { return a == Action::Refuse; }

// What a lease that declares none gets (lease/declaration.h): refuse, and
// over gpu_memory_max at two consecutive samples.
inline constexpr Action kDefaultAction = Action::Refuse;
inline constexpr unsigned kDefaultConsecutive = 2;

struct GpuBound {
  std::optional<std::uint64_t> max;
  std::optional<std::uint64_t> high;
  Action action = kDefaultAction;
  unsigned consecutive = kDefaultConsecutive;  // >= 1
  std::uint64_t sampleIntervalUs = 1000000;    // for the message only
  bool any() const { return max || high; }
};

struct GpuBoundState {
  unsigned overRun = 0;           // consecutive samples over max so far
  std::uint64_t firstOverNs = 0;  // when the current run began
  bool acted = false;             // the action fired (once per lease)
  bool highRaised = false;
  // Why the last kill in this run over max failed, once said ("" = none
  // failed): a failure is said once per run and reason, not per sample.
  std::string killFailureSaid;
};

enum class Verdict {
  None,
  HighCrossed,  // usage rose above gpu_memory_high
  HighCleared,  // ... and fell back below it
  Over,         // above max, not yet for `consecutive` samples
  Kill,         // act: kill the lease
  Report,       // act: report only (action = report)
  Refused,      // the kernel refused allocations that would have crossed max (bpf/)
  KillFailed,   // the kill was tried and could not be done (said once per run over max)
};
const char* verdictName(Verdict v);
// The events the bound driver records (drive()), in one list: the kinds a
// counter starts at 0 for, a client may report (all but KillFailed: the
// daemon says its own), and a row or event may name (with Refused, which the
// kernel's refusal log records).
inline constexpr Verdict kBoundEventKinds[] = {Verdict::HighCrossed, Verdict::HighCleared,
                                               Verdict::Kill, Verdict::Report, Verdict::KillFailed};

struct Decision {
  Verdict verdict = Verdict::None;  // None, Over, Kill or Report (gpu_memory_max)
  Verdict high = Verdict::None;     // None, HighCrossed or HighCleared (gpu_memory_high)
  std::uint64_t highLimit = 0;
  std::string highSummary;
  std::uint64_t bytes = 0;
  std::uint64_t limit = 0;
  unsigned samples = 0;
  std::uint64_t firstOverNs = 0;
  // "killed by tally: GPU memory 41.2 GiB over gpu_memory_max 40 GiB
  // (drm-fdinfo, 2 samples at 1 s)"; empty unless Kill or Report.
  std::string summary;
};

// One thing the bound noticed or did, as the record and the ledger keep it.
struct BoundEvent {
  std::uint64_t atNs = 0;
  Verdict kind = Verdict::None;  // HighCrossed, HighCleared, Kill, Report
  std::uint64_t bytes = 0, limit = 0;
  unsigned samples = 0;
  std::uint64_t firstOverNs = 0;
  std::string summary;
};
// The events a decision carries (none for None/Over).
std::vector<BoundEvent> eventsOf(const Decision& d, std::uint64_t nowNs);

// {"at_ns", "kind", "bytes", "limit", "samples", "first_over_ns", "summary", "source":
// "drm-fdinfo"}.
nlohmann::ordered_json boundEventJson(const BoundEvent& e);
// The one reader of that shape (the ledger's gpu-bound rows, the daemon's
// gpu-bound events): "kind" must name a recorded event; the error names the
// field.
Result<BoundEvent> boundEventFromJson(const nlohmann::json& j);
nlohmann::ordered_json boundEventsJson(const std::vector<BoundEvent>& events);

Decision observe(const GpuBound& bound, GpuBoundState& state, std::optional<std::uint64_t> bytes,
                 const std::string& source, std::uint64_t nowNs);

// One sample through a lease's bound, the same for both enforcers (the
// runner of `tally run`, the daemon for attached leases): what to record,
// and whether to kill the lease's cgroup now. An enforcer kills first, then
// records (a slow ledger or daemon never delays a kill).
struct Step {
  std::vector<BoundEvent> events;  // in order
  bool kill = false;
  std::string killSummary;  // the outcome's summary when it kills
};
Step step(const GpuBound& bound, GpuBoundState& state, std::optional<std::uint64_t> bytes,
          const std::string& source, std::uint64_t nowNs);
// The kill could not be done: the bound acts again at the next sample over it.
inline void killFailed(GpuBoundState& state) { state.acted = false; }

// What an enforcer does with a step, behind seams a test can observe: kill
// the lease's whole cgroup, record one event (record, ledger, journal,
// subscribers), say that a kill failed.
struct BoundSeams {
  std::function<Status()> kill;
  std::function<void(const BoundEvent&)> record;
  std::function<void(const std::string& why)> killFailed;
};
// The one bound driver, for tally run and the daemon alike: one sample
// through step(), the kill first (a slow recorder never delays it), then the
// events in order; a kill that failed is neither recorded as done nor
// counted as acted (it is tried again at the next sample over): it is
// recorded as a KillFailed event with why, once per run over the bound.
// Returns the kill's summary (the outcome's words) when the lease was killed.
std::optional<std::string> drive(const GpuBound& bound, GpuBoundState& state,
                                 std::optional<std::uint64_t> bytes, const std::string& source,
                                 std::uint64_t nowNs, const BoundSeams& seams);

}  // namespace tally::enforce
