// The ledger's tables (ledger.h says what each holds), made or brought up to
// this schema when a ledger is opened. Schema 3 stores the meter's samples by
// memory class (devices/memory_class.h); a schema-2 ledger's samples, stored
// by amdgpu's region names (gtt_bytes, vram_bytes), are carried over once:
// gtt_bytes as host_uncharged_bytes, vram_bytes as device_bytes. The chain
// (`events`) and schema 1's `lease_outcomes` are never touched, so a
// migrated ledger verifies as it did.
#pragma once

#include <sqlite3.h>

#include <string>

namespace tally::ledger::detail {

inline constexpr int kSchemaVersion = 3;

// Makes the tables, migrating a schema-2 `samples` table, in one
// transaction; on failure, says why in `error`.
bool applySchema(sqlite3* db, std::string& error);

}  // namespace tally::ledger::detail
