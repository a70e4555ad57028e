// The ledger: one SQLite database in the state directory (WAL,
// synchronous=FULL: a row append() returned for survives a crash or power
// loss).
//
// Schema 3 (docs/daemon.md, "Ledger"; ledger/schema.h makes it, and
// migrates a schema-2 ledger's samples):
//  - `events`: every lifecycle fact and every outcome of a lease, one row
//    each, forming a hash chain: a row's hash covers its seq, time, lease,
//    kind, body and the previous row's hash, so an edited, deleted or
//    reordered row breaks the chain at a place verify() names. Triggers refuse
//    UPDATE and DELETE (doctrine 7: corrections are new rows), and a lease has
//    at most one terminal row (outcome, lost or withdrawn), enforced by a
//    unique index, so an outcome is never recorded twice.
//  - `samples`: meter readings of running leases, GPU memory by memory
//    class; not part of the chain, thinned with age under a bounded
//    retention policy (pruneSamples()).
//  - `lease_outcomes`: schema 1's table, kept readable and no longer written.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devices/memory_class.h"
#include "ledger/head_witness.h"
#include "ledger/kinds.h"
#include "util/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tally::ledger {

// The summary of an outcome-like row, for listings (read from the record).
struct Entry {
  std::string leaseId;
  std::string name;
  std::string manager;
  std::uint64_t startedAtNs = 0;
  std::uint64_t endedAtNs = 0;
  std::string outcomeClass;
  std::optional<int> exitStatus;  // tally run's exit status; absent for attached and lost leases
  std::string recordJson;         // the full outcome record
};

struct Row {
  std::int64_t seq = 0;
  bool legacy = false;  // a schema-1 row (lease_outcomes), outside the chain
  Entry entry;
};

struct Event {
  std::int64_t seq = 0;
  std::uint64_t atNs = 0;
  std::string leaseId;
  std::string kind;
  std::string body;  // JSON text
  std::string prevHash;
  std::string hash;
};

struct Sample {
  std::string leaseId;
  std::uint64_t atNs = 0;
  std::optional<std::uint64_t> memoryCurrent;  // absent: not read (never 0 for unknown)
  std::optional<std::uint64_t> gpuBytes;       // the counted figure (gpumem/gpu_memory.h)
  // fdinfo's regions summed by memory class (gpumem::bytesByClass), whatever
  // the driver calls them; a schema-2 row has its gtt as host-uncharged and
  // its vram as device, and no other class.
  devices::BytesByClass byClass;
};

// One point of a lease's chart: the peaks of the samples in its span of
// time, and when the span's first sample was taken (absent: never read).
struct ChartPoint {
  std::uint64_t atNs = 0;
  std::optional<std::uint64_t> memoryBytes;
  std::optional<std::uint64_t> gpuBytes;
};

// A lease's rows, its first and last ones when it has more than a reply shows.
struct LeaseRows {
  std::vector<Event> rows;    // in seq order
  std::uint64_t omitted = 0;  // rows between the first and the last ones, not read
};

struct VerifyReport {
  std::uint64_t rows = 0;        // chain rows checked
  std::uint64_t legacyRows = 0;  // schema-1 rows, not covered by the chain
  std::string headHash;          // the last row's hash ("" for an empty chain)
  std::int64_t headSeq = 0;
  std::optional<std::int64_t> witnessSeq;  // the head witness's row (head_witness.h); none: absent
  std::vector<std::string> problems;       // empty: the chain is intact
};

// The hash of one chain row (hex SHA-256), as verify() recomputes it.
std::string rowHash(std::int64_t seq, std::uint64_t atNs, std::string_view leaseId,
                    std::string_view kind, std::string_view body, std::string_view prevHash);
inline constexpr const char* kGenesisHash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// Whether the ledger file exists under `stateDir` (nothing opened or made).
bool ledgerExists(const std::string& stateDir);
// Whether Ledger::open could make a ledger under `stateDir`, making nothing:
// its nearest existing ancestor is a directory this user may write into.
Status canCreateLedger(const std::string& stateDir);

class Ledger {
 public:
  // Creates the directory (0700) and the database as needed: for writers.
  static Result<Ledger> open(const std::string& stateDir);
  // Opens a ledger that exists, creating nothing: for readers (`tally ledger`,
  // verify, export). A missing directory or file is an error naming the path.
  static Result<Ledger> openExisting(const std::string& stateDir);
  Ledger(Ledger&& o) noexcept;
  Ledger& operator=(Ledger&&) = delete;
  ~Ledger();

  const std::string& path() const { return path_; }

  // Appends one chain row (atomic with reading the previous hash, so two
  // writers, e.g. the daemon and a standalone `tally run`, interleave safely).
  Result<Event> appendEvent(const std::string& leaseId, std::string_view kind,
                            const std::string& bodyJson, std::uint64_t atNs = 0);
  // A standalone lease's outcome: one terminal "outcome" row holding its record.
  Status appendOutcome(const std::string& leaseId, const std::string& recordJson);

  // The newest `limit` outcome-like rows (outcome, lost; legacy ones too), oldest first.
  Result<std::vector<Row>> recent(std::size_t limit);
  // The lease ids that begin with `prefix`, in order, at most `limit` (an id
  // given short, as git takes a commit's first characters).
  Result<std::vector<std::string>> leaseIdsStartingWith(const std::string& prefix,
                                                        std::size_t limit);
  // Every chain row, or one lease's, in seq order.
  Result<std::vector<Event>> events(const std::optional<std::string>& leaseId = std::nullopt);
  // Chain rows written at or after `sinceNs` and after row `afterSeq`, in seq
  // order, at most `limit` (what `tally events --since` and a reconnecting
  // follower replay).
  Result<std::vector<Event>> eventsFrom(std::uint64_t sinceNs, std::int64_t afterSeq,
                                        std::size_t limit, std::int64_t uptoSeq = INT64_MAX);
  // The newest row's seq (0: none).
  Result<std::int64_t> headSeq();
  // The seq just before the lowest-numbered row written at or after `atNs`
  // (by the time index, visiting only the rows since then): where a replay
  // from `atNs` starts.
  Result<std::int64_t> seqBefore(std::uint64_t atNs);
  // A lease's first row of `kind`, if it has one (by the lease index).
  Result<std::optional<Event>> firstOfKind(const std::string& leaseId, std::string_view kind);
  // A lease's first `first` and last `last` rows, and how many lie between.
  Result<LeaseRows> leaseRows(const std::string& leaseId, std::size_t first, std::size_t last);
  // Leases with a "granted" row and no terminal row, each with its rows.
  Result<std::vector<std::vector<Event>>> openLeases();
  // The hash chain row by row, after SQLite's own integrity_check of every
  // page (a damaged page is a problem even where the chain rows still read).
  Result<VerifyReport> verify();
  // The problems the newest damage-acknowledged row accepted (none: empty).
  Result<std::vector<std::string>> acknowledgedDamage();
  // verify()'s problems no damage-acknowledged row accepted: what stops the
  // daemon's grants. A verify or acknowledgement that cannot be read is one.
  std::vector<std::string> unacceptedDamage();
  // Records that `uid` accepted `problems` (verify()'s, as they read now) and
  // sets the head witness to that row: from here on the chain as it is is
  // the chain (rows lost before it stay named by the acknowledgement).
  Result<Event> acknowledgeDamage(const std::vector<std::string>& problems, std::uint32_t uid);
  // SQLite's quick_check: "ok", or the damage it found (one line each, at most 10).
  Result<std::vector<std::string>> damage();

  // Why the last chain row or the last samples could not be written (a full
  // disk, say), until a write of the same kind succeeds again; nullopt while
  // writes succeed. The daemon says it once when it appears and once when it
  // goes, not at every sample.
  std::optional<std::string> writeFailure() const {
    if (eventFailure_) return eventFailure_;
    return witnessFailure_ ? witnessFailure_ : sampleFailure_;
  }

  // The daemon's form of the head witness: a chain row's append returns once
  // the row is committed (the WAL's fsync), and the witness (a second fsync
  // and a rename) moves once per event-loop turn, in flushHead, for all the
  // rows that turn committed. A reply still means its row is on disk; a crash
  // leaves the witness a turn behind the chain, which verify() accepts as it
  // accepts a crash between a commit and the witness's move.
  void deferHead() { deferHead_ = true; }
  // Moves the witness to the newest row committed since it last moved.
  void flushHead();

  Status appendSample(const Sample& s);
  // One tick's samples in one transaction (one fsync, not one per lease).
  Status appendSamples(const std::vector<Sample>& samples);
  Result<std::vector<Sample>> samples(const std::string& leaseId);
  // A lease's samples as at most `points` points (computed by SQLite, in
  // equal spans of time, each the peaks of its span).
  Result<std::vector<ChartPoint>> chart(const std::string& leaseId, std::size_t points);
  // Retention: samples older than `fullResolutionNs` keep one per lease and
  // minute; older than `maxAgeNs` none; then the oldest go until at most
  // `maxRows` remain. Returns how many were removed.
  Result<std::uint64_t> pruneSamples(std::uint64_t nowNs, std::uint64_t fullResolutionNs,
                                     std::uint64_t maxAgeNs, std::uint64_t maxRows);

 private:
  Ledger(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  static Result<Ledger> openFile(const std::string& path, bool create);
  Status appendSamplesOnce(const std::vector<Sample>& samples);
  // Runs one statement of the write paths (BEGIN, COMMIT, a PRAGMA) kept prepared.
  int exec(std::string_view sql);
  sqlite3* db_ = nullptr;
  std::string path_;
  std::optional<std::string> eventFailure_;
  std::optional<std::string> sampleFailure_;
  std::optional<std::string> witnessFailure_;  // the head witness's last move failed
  bool deferHead_ = false;
  std::optional<Head> unwitnessed_;  // deferHead: the newest row the witness does not name yet
  // The write paths' statements, prepared once and reset after each use
  // rather than parsed at every row, keyed by their SQL and finalized before
  // the database closes.
  std::map<std::string_view, sqlite3_stmt*> kept_;
};

// The problems in `found` that `acknowledged` does not list: the damage an
// operator has not accepted, which stops grants (docs/daemon.md, "Ledger").
std::vector<std::string> unacknowledged(const std::vector<std::string>& found,
                                        const std::vector<std::string>& acknowledged);

// Creates the state directory (0700, parents as needed). The daemon calls it
// and checks the directory (fs::checkTrustedDir) before opening the ledger in it.
Status createStateDir(const std::string& stateDir);

// The default state directory: $TALLY_STATE_DIR, else /var/lib/tally for
// root, else $XDG_STATE_HOME/tally (~/.local/state/tally).
std::string defaultStateDir();

}  // namespace tally::ledger
