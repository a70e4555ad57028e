// The head witness's one line (ledger/head_witness.h): pure, for the
// ledger and its fuzzer.
#include <fmt/format.h>

#include <cerrno>
#include <cstdint>

#include "ledger/head_witness.h"
#include "util/text.h"

namespace tally::ledger {
namespace {

constexpr std::string_view kMagic = "tally-ledger-head 1 ";
constexpr std::size_t kHashLen = 64;

bool isLowerHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string encodeHead(const Head& h) { return fmt::format("{}{} {}\n", kMagic, h.seq, h.hash); }

Result<Head> decodeHead(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Error{EINVAL, fmt::format("the ledger's head witness is not one: {}", why)};
  };
  if (!text::startsWith(text, kMagic)) return bad("it does not start with 'tally-ledger-head 1'");
  text.remove_prefix(kMagic.size());
  if (text.empty() || text.back() != '\n') return bad("it does not end its one line");
  text.remove_suffix(1);
  auto space = text.find(' ');
  if (space == std::string_view::npos) return bad("no hash after the row number");
  std::string_view digits = text.substr(0, space);
  if (digits.size() > 1 && digits[0] == '0') return bad("the row number has a leading zero");
  auto seq = text::parseU64(digits);
  if (!seq || *seq == 0 || *seq > static_cast<std::uint64_t>(INT64_MAX))
    return bad("the row number is not a positive integer");
  std::string_view hash = text.substr(space + 1);
  if (hash.size() != kHashLen || !isLowerHex(hash)) return bad("the hash is not 64 hex digits");
  return Head{static_cast<std::int64_t>(*seq), std::string(hash)};
}

}  // namespace tally::ledger
