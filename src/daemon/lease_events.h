// Where a fact about a lease goes, in one call: its ledger row, its journal
// entry, the subscribers that follow events, and the counters the metrics
// export. The one owner of the subscriptions and the counters.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coverage/assess.h"
#include "coverage/handover.h"
#include "daemon/lease.h"
#include "daemon/lease_book.h"
#include "daemon/row_budget.h"
#include "daemon/seams.h"
#include "enforce/gpu_bound.h"
#include "journal/journal.h"
#include "lease/outcome.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"
#include "rpc/messages.h"

namespace tally::daemon {

class LeaseEvents {
 public:
  using json = nlohmann::json;
  LeaseEvents(ledger::Ledger& ledger, Outbox& outbox, journal::Journal* journal);

  // A lifecycle row (granted, started, adopted, readopted, released): in the
  // ledger, then the journal. The ledger's refusal is returned and nothing
  // else happens: the caller fails closed (a grant it cannot record is no grant).
  Result<ledger::Event> record(const Lease& l, const char* kind, const json& body,
                               std::uint64_t atNs = 0);
  // The lease's end (outcome, lost, withdrawn), counted by `cls` (an outcome
  // class name, or "withdrawn"). A ledger refusal loses nothing: the row goes
  // to the log with the error.
  void recordEnd(const Lease& l, const char* kind, const json& body, const std::string& cls);
  // A run lease's outcome as its client reported it: the row's seq and hash
  // for the reply, or the ledger's refusal (EEXIST: it already has an end),
  // in which case nothing is counted or announced.
  Result<ledger::Event> recordOutcome(const Lease& l, const json& record, const std::string& cls);
  // What a GPU bound noticed or did: kept on the lease (its outcome lists
  // it), its row, subscribers, the journal, the counter.
  void bound(Lease& l, const enforce::BoundEvent& e, const std::string& source);
  // A run lease's client reports what its bound noticed or did: recorded as
  // bound() does, at most Limits::boundBurst at once, then one per
  // Limits::boundRefillUs, so a client cannot fill the ledger and the
  // journal. A refusal is counted on the lease and said once in the journal.
  Status clientBound(Lease& l, enforce::BoundEvent e, const Limits& limits);
  // The coverage this daemon found at start, recorded once per start (lease
  // id "") for the ledger and subscribers; a change from the last recorded
  // one (a new kernel, a new module option) is said in the journal too, with
  // what tally now does differently.
  void coverageAtStart(const coverage::Assessment& a, const coverage::Handover& handover);
  // A request joins the queue: subscribers hear it ("lease" event, kind "queued").
  void queued(const Lease& l);
  // A request left the queue without a grant (kQueueTimeoutKind or
  // kCancelledKind): said to subscribers and the journal, and counted.
  void leftQueue(const Lease& l, const char* kind, const std::string& why);
  const std::map<std::string, std::uint64_t>& queueEndCounts() const { return queueEnds_; }
  // A waiter's place and what holds it back, as its "queued" event says it.
  static rpc::api::Queued queuedEvent(const LeaseBook::Move& mv);
  // Each waiter whose place in the queue changed hears its new place.
  void positions(const std::vector<LeaseBook::Move>& moves);
  // Whether the ledger writes: a failure is said once when it appears (what
  // it stops: new grants, releases) and once when it clears, never at every
  // sample. Called each tick and after each sample.
  void ledgerHealth();
  // An operator-facing message: the journal (stderr without journald). The
  // daemon's one log path: every part says what it has to say through here.
  void note(int priority, const std::string& message,
            const std::vector<std::pair<std::string, std::string>>& fields = {});

  // A subscriber follows the events from now on; with `s.sinceNs` or
  // `s.afterSeq` it first hears the ledger's rows since then, as the events
  // they were when written (marked "replayed"; rows no event stood for, such
  // as notes, are left out), at most rpc::api::kMaxReplayed, then a
  // "replayed" event ({rows, truncated}: ask again after the last seq), then
  // the live events, held for it meanwhile. The replay is served in slices
  // (replaySlice), never in the request's turn: 64 followers replaying a
  // month cost the loop one slice a turn. At most `maxReplaysPerUid` replays
  // of one user at once (root not counted): more are refused with the budget's name.
  Status follow(std::uint64_t conn, const json& requestId, const rpc::api::Subscribe& s, uid_t uid,
                std::size_t maxReplaysPerUid);
  void unsubscribe(std::uint64_t conn) { subscribers_.erase(conn); }
  bool subscribed(std::uint64_t conn) const { return subscribers_.count(conn) != 0; }
  // One follower's next slice (kReplaySliceRows rows), round-robin over the
  // followers replaying whose readers keep up; true while such a replay is
  // left (one waiting for its reader goes on when the loop sees it read).
  bool replaySlice();
  bool replaying() const;
  bool replayingFor(std::uint64_t conn) const {
    auto it = subscribers_.find(conn);
    return it != subscribers_.end() && it->second.replay.has_value();
  }
  // A follower whose client has this much unread is skipped until it reads:
  // a slow reader's replay waits, it is never queued past the output cap.
  static constexpr std::size_t kReplayBacklogBytes = 256 * 1024;
  static constexpr std::size_t kReplaySliceRows = 256;
  // Live events held for a follower still replaying; past it the follower
  // is told it fell behind and is dropped.
  static constexpr std::size_t kMaxHeldEvents = 4096;

  // A placed lease was granted short of measured headroom (its granted row
  // says by how much): counted per resource ("host", "gpu") for the metrics
  // and said in the journal, so a node Slurm overfills is seen, not refused.
  void placedShortfall(const Lease& l, const lease::Shortfall& s);
  struct ShortfallCount {
    std::uint64_t grants = 0, bytes = 0;
  };
  const std::map<std::string, ShortfallCount>& shortfallCounts() const { return shortfalls_; }

  // Since the daemon started: GPU bound events by kind, ended leases by outcome class.
  const std::map<std::string, std::uint64_t>& boundCounts() const { return boundCounts_; }
  const std::map<std::string, std::uint64_t>& outcomeCounts() const { return outcomeCounts_; }
  std::uint64_t sinceNs() const { return startedAtNs_; }

  // Every row a lease writes is charged to its owner (daemon/row_budget.h).
  RowBudget& rowBudget() { return rows_; }

 private:
  // `row`: the ledger row the event stands for, its seq and time sent with it
  // (none: the ledger refused it, or no row stands for it, as for "queued").
  void announce(const Lease& l, const std::string& kind, const json& body,
                const ledger::Event* row);
  void broadcast(const std::string& event, json fields, const ledger::Event* row);

  ledger::Ledger& ledger_;
  Outbox& outbox_;
  journal::Journal* journal_;
  // A follower's replay: where it is, up to which row (later rows come
  // live), and the words its leases' rows are said with.
  struct ReplayCursor {
    std::uint64_t sinceNs = 0;
    std::int64_t afterSeq = 0;
    std::int64_t uptoSeq = 0;
    std::size_t sent = 0;
    struct Facts {
      ledger::GrantedRow granted;
      journal::VerifiedPlace place;
    };
    std::map<std::string, std::optional<Facts>> facts;
  };
  struct Follower {
    json requestId;
    uid_t uid = 0;
    std::optional<ReplayCursor> replay;
    std::vector<std::pair<std::string, json>> held;  // live events while it replays
  };
  // The event a ledger row stood for (none: a row no event stands for).
  std::optional<std::pair<std::string, json>> replayed(ReplayCursor& c, const ledger::Event& row);
  // Ends a follower's replay: the "replayed" event, then the events held.
  void endReplay(std::uint64_t conn, Follower& f, bool truncated, const std::string& error);
  std::map<std::uint64_t, Follower> subscribers_;  // by connection
  std::uint64_t replayTurn_ = 0;                   // the connection served a slice last
  std::map<std::string, std::uint64_t> boundCounts_, outcomeCounts_;
  std::map<std::string, std::uint64_t> queueEnds_{{rpc::api::kQueueTimeoutKind, 0},
                                                  {rpc::api::kCancelledKind, 0},
                                                  {rpc::api::kReloadRefusedKind, 0}};
  std::map<std::string, ShortfallCount> shortfalls_{{"gpu", {}}, {"host", {}}};
  RowBudget rows_;
  std::uint64_t startedAtNs_ = 0;
  std::optional<std::string> writeFailureSaid_;  // the ledger's write failure, as last said
};

}  // namespace tally::daemon
