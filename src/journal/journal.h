// Operator-facing messages in the journal, from the daemon and from a
// standalone tally run alike: one seam (Journal), its sd-journal
// implementation (structured fields when journald listens, stderr otherwise:
// a host without systemd, a test run), and the entries both write.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "enforce/gpu_bound.h"

namespace tally::journal {

// Fields are KEY=value pairs (keys in journald's [A-Z0-9_] spelling, e.g.
// TALLY_LEASE). Tests implement it in memory and observe every entry.
class Journal {
 public:
  virtual ~Journal() = default;
  virtual void note(int priority, const std::string& message,
                    const std::vector<std::pair<std::string, std::string>>& fields) = 0;
};

// A GPU bound event as one journal entry, the same from the daemon and from
// a standalone tally run: warning when tally acted (kill, report), notice
// otherwise; "lease ID (NAME): summary"; TALLY_LEASE, TALLY_LEASE_NAME,
// TALLY_EVENT, TALLY_GPU_BYTES, TALLY_LIMIT_BYTES.
struct JournalEntry {
  int priority = 5;
  std::string message;
  std::vector<std::pair<std::string, std::string>> fields;
};
JournalEntry boundEventEntry(const std::string& lease, const std::string& name,
                             const enforce::BoundEvent& e);

// A lease's lifecycle row (granted, started, adopted, readopted, released)
// or its end (outcome, lost, withdrawn) as one journal entry, from the body
// the ledger records: TALLY_EVENT=lease-<kind>, TALLY_LEASE, TALLY_LEASE_NAME,
// TALLY_POOL (comma-separated; absent for a standalone lease), TALLY_UNIT,
// TALLY_CGROUP, and for an end TALLY_OUTCOME, TALLY_EXIT_CODE,
// TALLY_MEMORY_PEAK_BYTES (memory.peak; when the cgroup was gone before it
// could be read, TALLY_MEMORY_PEAK_SAMPLED_BYTES, the samples' peak, instead),
// TALLY_GPU_PEAK_BYTES, TALLY_OOM_KILLS. A figure
// the record lacks is left out, never sent as 0. An end other than a clean
// exit is a warning. Each operator-declared attribute is a field of every entry,
// TALLY_ATTR_<KEY> (upper case), so `journalctl TALLY_ATTR_SLURM_JOB_ID=42`
// finds a Slurm job's leases.
// TALLY_UNIT and TALLY_CGROUP are where the daemon verified the lease runs
// (`place`), never what a row's body or a client's record says: a user's
// outcome cannot be journalled as another unit's.
struct VerifiedPlace {
  std::string unit, cgroup;
};
JournalEntry lifecycleEntry(const std::string& kind, const std::string& lease,
                            const std::string& name, const std::vector<std::string>& pools,
                            const nlohmann::json& body,
                            const std::map<std::string, std::string>& attributes = {},
                            const VerifiedPlace& place = {});

class SdJournal final : public Journal {
 public:
  // `stderrFallback` false: a caller that already printed the message (tally
  // run) wants only the journal copy.
  explicit SdJournal(bool stderrFallback = true, std::string prefix = "tally daemon: ")
      : stderrFallback_(stderrFallback), prefix_(std::move(prefix)) {}
  void note(int priority, const std::string& message,
            const std::vector<std::pair<std::string, std::string>>& fields) override;

 private:
  bool stderrFallback_;
  std::string prefix_;
};

}  // namespace tally::journal
