// How a lease ends, each way written once: an attached workload's end (its
// cgroup emptied, or released), a lease lost while nobody watched, a grant
// that never ran (withdrawn), and the stop of a run lease's workload. Every
// ending records its terminal row (LeaseEvents), frees the lease's pools,
// drops its watches, and tells the service (`freed`) so the queue moves.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "daemon/lease.h"
#include "daemon/lease_book.h"
#include "daemon/lease_events.h"
#include "daemon/seams.h"
#include "fs/root.h"
#include "lease/record.h"
#include "ledger/ledger.h"

namespace tally::daemon {

// A run lease's client record as its outcome row keeps it: the SHA-256 of
// its canonical JSON (nlohmann's dump: sorted keys, no spaces) and its size,
// and the fields readers use (outcome: class, summary, exit_code, signal,
// tally_exit_status; declared: memory_high, memory_swap_max, oom_policy).
nlohmann::json clientDigest(const nlohmann::json& client);

struct EndingsEnv {
  const fs::Root* cgroupRoot;
  Watches& watches;
  Units* units;
};

class Endings {
 public:
  Endings(const config::Daemon& cfg, EndingsEnv env, ledger::Ledger& ledger, LeaseBook& book,
          LeaseEvents& events, std::function<void()> freed)
      : cfg_(cfg),
        env_(env),
        ledger_(ledger),
        book_(book),
        events_(events),
        freed_(std::move(freed)) {}

  // Called with a lease just before its final record is made: what is still
  // unsaid about it is said first (the kernel's refusals, in order).
  void beforeRecord(std::function<void(Lease&)> f) { beforeRecord_ = std::move(f); }

  // An attached workload's cgroup emptied (`released` false) or the lease was
  // released: the final counters and meters become its outcome record.
  // `unitEnding`: how the unit's run ended, when the lease held one.
  void finishAttached(Lease& l, bool released,
                      std::optional<std::string> unitEnding = std::nullopt);
  // A run lease's outcome in the daemon's own word: its figures from the
  // daemon's samples and the cgroup's final counters, the kill the daemon
  // did or saw, the memory limits it read back; only what the client alone
  // saw (the wait status it reaped, its own stop, its declared command and
  // soft limits) comes from the client's record, which is kept as a bounded
  // digest (clientDigest) as "client", its command within kCommandBytes.
  // The ending is not recorded here (Service::onComplete does).
  nlohmann::json runOutcome(Lease& l, const nlohmann::json& client);
  static constexpr std::size_t kCommandBytes = 4096, kCommandArgs = 256;
  // It ended unseen (the daemon was down, the client gone): the facts still
  // readable (the counters, the samples the ledger kept) are recorded, the
  // ending is not guessed. A run lease's slice its client never removed is stopped.
  void lost(Lease& l, const std::string& why);
  // Granted, but nothing ever ran.
  // Ends a lease that never started (a withdrawn row); `cls` is what its end
  // counts as (withdrawn, or containment-refused when its client could not
  // contain it).
  void withdraw(Lease& l, const std::string& reason, const std::string& cls = "withdrawn");
  // A running run lease's workload: SIGTERM now, cgroup.kill after contain::kStopGraceUs
  // (expireStops).
  void requestStop(Lease& l);
  // The kill deadlines of stopped run leases that passed: SIGKILL what is left.
  void expireStops(std::uint64_t nowUs);
  // Leases whose client has been away past client_grace: a grant that never
  // started is withdrawn, a workload that ended unseen is lost; one still
  // running stays (its client may resume).
  void expireGraces(std::uint64_t nowUs);
  // Whether the lease's cgroup still has processes (unreadable counts as not:
  // a vanished cgroup has none).
  static bool populated(const Lease& l);
  // Whether its cgroup says the workload is over: emptied, or gone or
  // unreadable. A lease kept when empty is over only when its cgroup is gone
  // (it otherwise ends with its parent).
  static bool over(const Lease& l);
  // Reads the lease cgroup's counters while it exists (its cgroup.events or
  // memory.events changed; `emptied`: it holds no process now) and keeps
  // them for its record, in case the cgroup is gone by its end.
  void noteCounters(Lease& l, bool emptied);
  // Its child leases end (released with it while they run, else emptied):
  // before any lease's own row, so a child never outlives its parent.
  void endChildren(const Lease& parent);

 private:
  // What the daemon itself knows of a lease at its end: its declaration and
  // bound, what it verified, a last sample and the cgroup's final counters.
  lease::LeaseRecord meteredRecord(Lease& l, const char* manager);

  // Every ending goes through here: its child leases end first (a child
  // never outlives its parent), then its row, then the book forgets it.
  void end(Lease& l, const char* kind, const nlohmann::json& body, const std::string& cls);
  void stopLeaseSlice(const Lease& l);

  const config::Daemon& cfg_;
  EndingsEnv env_;
  ledger::Ledger& ledger_;
  LeaseBook& book_;
  LeaseEvents& events_;
  std::function<void()> freed_;
  std::function<void(Lease&)> beforeRecord_;
};

}  // namespace tally::daemon
