// Small, allocation-free helpers shared by the kernel-text parsers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tally::text {

// Whitespace as the kernel's text files use it, plus '\r' so a CRLF file
// (never produced by the kernel, but seen in copied samples) parses the same.
constexpr bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

constexpr bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
constexpr bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view trim(std::string_view s);
std::string_view trimLeft(std::string_view s);
std::string_view trimRight(std::string_view s);

// Unsigned decimal, no sign, no leading/trailing junk; nullopt on overflow.
std::optional<std::uint64_t> parseU64(std::string_view s);
std::optional<std::int64_t> parseI64(std::string_view s);

// Multiply with overflow detection.
std::optional<std::uint64_t> mulU64(std::uint64_t a, std::uint64_t b);

// Whether `word` is one of the `sep`-separated items of `list` (blanks around
// items ignored): "cpu memory pids" has "memory"; "rw,memory" with ',' too.
bool hasWord(std::string_view list, std::string_view word, char sep = ' ');

// The longest prefix of `s` of at most `maxBytes` bytes that does not cut a
// UTF-8 sequence in two (a cut character would make the text unencodable as
// JSON). Input that is not valid UTF-8 is cut at `maxBytes` as bytes.
std::string truncateUtf8(std::string_view s, std::size_t maxBytes);

// "1 lease", "3 leases": a count with its noun in the right number.
std::string counted(std::uint64_t n, std::string_view one, std::string_view many);

// Iterate lines of a buffer: `while (auto line = lines.next())`.
class LineReader {
 public:
  explicit LineReader(std::string_view buf) : rest_(buf) {}
  std::optional<std::string_view> next() {
    if (rest_.empty()) return std::nullopt;
    auto nl = rest_.find('\n');
    std::string_view line = rest_.substr(0, nl);
    rest_ = nl == std::string_view::npos ? std::string_view{} : rest_.substr(nl + 1);
    ++number_;
    return line;
  }
  unsigned number() const { return number_; }  // 1-based number of the last line returned

 private:
  std::string_view rest_;
  unsigned number_ = 0;
};

// "Did you mean": the candidate nearest to `word` by edit distance, when it
// is at most `maxEdits` away (the first of equals); none otherwise.
std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string_view>& candidates,
                                   std::size_t maxEdits = 2);

}  // namespace tally::text
