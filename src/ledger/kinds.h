// The kinds of the ledger's chain rows (ledger/ledger.h has the schema), in
// one place: the writer, the reader, the SQL and the journal all use these.
#pragma once

#include <string_view>

namespace tally::ledger {

inline constexpr const char* kGranted = "granted";  // admission granted the lease its pools
inline constexpr const char* kStarted = "started";  // a run lease's scope exists, workload released
inline constexpr const char* kAdopted = "adopted";  // an attached workload's cgroup is metered
inline constexpr const char* kReadopted = "readopted";  // a restarted daemon found the lease alive
inline constexpr const char* kReleased = "released";    // someone asked for the lease to end
inline constexpr const char* kNote = "note";            // a correction or a fact learnt later
inline constexpr const char* kGpuBound =
    "gpu-bound";  // the GPU bound noticed or did something (enforce/)
// Host-level rows (lease id ""): what the daemon found this kernel does.
inline constexpr const char* kCoverage = "coverage";  // GTT -> memcg coverage at daemon start
// A lease ended holding GPU buffers it created (they stay charged to it, its
// parent and its pools until freed), and when they are freed.
inline constexpr const char* kGpuResidue = "gpu-residue";
// An operator accepted the damage verify() found (`tally ledger acknowledge`):
// the daemon grants again while the damage is no more than what was accepted.
inline constexpr const char* kDamageAcknowledged = "damage-acknowledged";
// Terminal: each lease has at most one, and then no more rows.
inline constexpr const char* kOutcome = "outcome";      // how it ended, with the record
inline constexpr const char* kLost = "lost";            // it ended unseen; facts still readable
inline constexpr const char* kWithdrawn = "withdrawn";  // granted, but nothing ever ran
inline constexpr const char* kTerminalKinds[] = {kOutcome, kLost, kWithdrawn};

constexpr bool isTerminal(std::string_view kind) {
  return kind == kOutcome || kind == kLost || kind == kWithdrawn;
}

}  // namespace tally::ledger
