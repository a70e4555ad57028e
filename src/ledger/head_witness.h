// The ledger's head witness: the seq and hash of the newest committed chain
// row, in a small file beside the database (ledger.sqlite.head), moved on
// after every commit (by the daemon once per turn of its loop, after that
// turn's replies: ledger::Ledger::deferHead).
//
// Why: SQLite keeps committed rows in its WAL until a checkpoint. A WAL lost
// after a crash (deleted, or an older copy restored) takes the newest rows
// with it and leaves a shorter chain that still verifies: every row left is
// intact. The witness lives outside the WAL, so a chain that ends before the
// witness's row, or holds another row at its seq, has lost rows and says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tally::ledger {

struct Head {
  std::int64_t seq = 0;
  std::string hash;  // 64 lowercase hex digits (rowHash)
};

// "tally-ledger-head 1 <seq> <hash>\n": one line, nothing else.
std::string encodeHead(const Head& h);
// Pure; refuses anything but exactly what encodeHead writes.
Result<Head> decodeHead(std::string_view text);

std::string headWitnessPath(const std::string& dbPath);

// Moves the witness to `h` unless it already names row `h.seq` or a later one
// (the daemon and a standalone `tally run` commit in either order): under an
// flock on `<witness>.lock`, written to a temporary, fsync'd, renamed over.
Status advanceHead(const std::string& dbPath, const Head& h);
// Sets the witness to `h` even when it named a later row: an operator
// accepted the chain as it is (`tally ledger acknowledge`).
Status resetHead(const std::string& dbPath, const Head& h);
// The witness; nullopt when there is none (a ledger written before witnesses,
// or an empty one).
Result<std::optional<Head>> readHead(const std::string& dbPath);

}  // namespace tally::ledger
