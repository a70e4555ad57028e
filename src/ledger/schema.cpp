#include "ledger/schema.h"

#include <fmt/format.h>

#include "ledger/statement.h"

namespace tally::ledger::detail {
namespace {

constexpr const char* kSchemaTemplate = R"sql(
CREATE TABLE IF NOT EXISTS lease_outcomes (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  lease_id       TEXT    NOT NULL UNIQUE,
  name           TEXT    NOT NULL,
  manager        TEXT    NOT NULL,
  started_at_ns  INTEGER NOT NULL,
  ended_at_ns    INTEGER NOT NULL,
  outcome_class  TEXT    NOT NULL,
  exit_status    INTEGER NOT NULL,
  record         TEXT    NOT NULL
);
CREATE TRIGGER IF NOT EXISTS lease_outcomes_no_update BEFORE UPDATE ON lease_outcomes
  BEGIN SELECT RAISE(ABORT, 'tally ledger rows are never rewritten'); END;
CREATE TRIGGER IF NOT EXISTS lease_outcomes_no_delete BEFORE DELETE ON lease_outcomes
  BEGIN SELECT RAISE(ABORT, 'tally ledger rows are never deleted'); END;

CREATE TABLE IF NOT EXISTS events (
  seq        INTEGER PRIMARY KEY,
  at_ns      INTEGER NOT NULL,
  lease_id   TEXT    NOT NULL,
  kind       TEXT    NOT NULL,
  body       TEXT    NOT NULL,
  prev_hash  TEXT    NOT NULL,
  hash       TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_lease ON events (lease_id, seq);
CREATE INDEX IF NOT EXISTS events_by_time ON events (at_ns);
CREATE UNIQUE INDEX IF NOT EXISTS events_one_terminal ON events (lease_id)
  WHERE kind IN (@TERMINAL@);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'tally ledger rows are never rewritten; append a correction'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
  BEGIN SELECT RAISE(ABORT, 'tally ledger rows are never deleted'); END;

CREATE TABLE IF NOT EXISTS @SAMPLES@ (
  lease_id              TEXT    NOT NULL,
  at_ns                 INTEGER NOT NULL,
  memory_current        INTEGER,
  gpu_bytes             INTEGER,
  device_bytes          INTEGER,
  host_uncharged_bytes  INTEGER,
  host_mixed_bytes      INTEGER,
  host_charged_bytes    INTEGER,
  other_bytes           INTEGER,
  unknown_bytes         INTEGER
);
@MIGRATE@
CREATE INDEX IF NOT EXISTS samples_by_lease ON samples (lease_id, at_ns);
CREATE INDEX IF NOT EXISTS samples_by_time ON samples (at_ns);
PRAGMA user_version = @VERSION@;
)sql";

// Schema 2's samples into schema 3's table (made as samples_by_class), in
// rowid order (the retention's "first sample of each lease-minute" stays the
// first); then the old table goes with its indexes, and the new one takes
// its name. Samples are outside the chain: no hash covers them.
constexpr const char* kMigrateSamples = R"sql(
INSERT INTO samples_by_class (lease_id, at_ns, memory_current, gpu_bytes, device_bytes,
                              host_uncharged_bytes)
  SELECT lease_id, at_ns, memory_current, gpu_bytes, vram_bytes, gtt_bytes FROM samples
  ORDER BY rowid;
DROP TABLE samples;
ALTER TABLE samples_by_class RENAME TO samples;
)sql";

void replace(std::string& s, std::string_view what, std::string_view with) {
  s.replace(s.find(what), what.size(), with);
}

}  // namespace

bool applySchema(sqlite3* db, std::string& error) {
  auto fail = [&](const char* what) {
    error = fmt::format("{}: {}", what, sqlite3_errmsg(db));
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return false;
  };
  // IMMEDIATE: two openers of a schema-2 ledger cannot both migrate it.
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK)
    return fail("begin");
  bool schema2 = false;
  {
    Stmt q(db, "SELECT count(*) FROM pragma_table_info('samples') WHERE name = 'gtt_bytes'");
    if (!q.ok() || q.step() != SQLITE_ROW) return fail("read the samples table's columns");
    schema2 = q.colI64(0) != 0;
  }
  std::string schema = kSchemaTemplate;
  replace(schema, "@TERMINAL@", terminalKindsSql());
  replace(schema, "@SAMPLES@", schema2 ? "samples_by_class" : "samples");
  replace(schema, "@MIGRATE@", schema2 ? kMigrateSamples : "");
  replace(schema, "@VERSION@", std::to_string(kSchemaVersion));
  char* err = nullptr;
  if (sqlite3_exec(db, schema.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    error = err ? err : "unknown";
    sqlite3_free(err);
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return false;
  }
  if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return fail("commit");
  return true;
}

}  // namespace tally::ledger::detail
