#include "util/text.h"

#include <algorithm>
#include <limits>

namespace tally::text {

std::string_view trimLeft(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && isSpace(s[i])) ++i;
  return s.substr(i);
}

std::string_view trimRight(std::string_view s) {
  std::size_t n = s.size();
  while (n > 0 && isSpace(s[n - 1])) --n;
  return s.substr(0, n);
}

bool hasWord(std::string_view list, std::string_view word, char sep) {
  while (!list.empty()) {
    auto end = list.find(sep);
    if (trim(list.substr(0, end)) == word) return true;
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return false;
}

std::string_view trim(std::string_view s) {
  s = trimLeft(s);
  std::size_t n = s.size();
  while (n > 0 && isSpace(s[n - 1])) --n;
  return s.substr(0, n);
}

std::optional<std::uint64_t> parseU64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

std::optional<std::int64_t> parseI64(std::string_view s) {
  bool negative = !s.empty() && s.front() == '-';
  if (negative) s.remove_prefix(1);
  auto magnitude = parseU64(s);
  if (!magnitude) return std::nullopt;
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (*magnitude > kMax + 1) return std::nullopt;
    if (*magnitude == kMax + 1) return std::numeric_limits<std::int64_t>::min();
    return -static_cast<std::int64_t>(*magnitude);
  }
  if (*magnitude > kMax) return std::nullopt;
  return static_cast<std::int64_t>(*magnitude);
}

std::optional<std::uint64_t> mulU64(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::string truncateUtf8(std::string_view s, std::size_t maxBytes) {
  if (s.size() <= maxBytes) return std::string(s);
  std::size_t cut = maxBytes;
  // Step back over continuation bytes (10xxxxxx) to the start of the
  // character that straddles the cut, at most 3 bytes: a longer run is not UTF-8.
  std::size_t back = 0;
  while (cut > 0 && back < 4 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) {
    --cut;
    ++back;
  }
  if (back == 4) cut = maxBytes;
  return std::string(s.substr(0, cut));
}

std::string counted(std::uint64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

namespace {

// Levenshtein distance, one row: small strings only (names, keys).
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string_view>& candidates,
                                   std::size_t maxEdits) {
  if (word.size() > 256) return std::nullopt;  // nobody misspells 256 characters
  std::optional<std::string> best;
  std::size_t bestDistance = maxEdits + 1;
  for (auto c : candidates) {
    std::size_t d = distance(word, c);
    if (d < bestDistance) {
      bestDistance = d;
      best = std::string(c);
    }
  }
  return best;
}

}  // namespace tally::text
