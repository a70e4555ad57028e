#include "util/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "util/text.h"

namespace tally::units {
namespace {

struct Unit {
  std::string_view suffix;  // lower case
  std::uint64_t factor;
};

// One number with a unit suffix from `units`, matched case-insensitively.
// The messages name the quantity and the accepted forms.
struct Scale {
  std::initializer_list<Unit> units;
  const char* notANumber;   // "'{}' is not a ..."
  const char* unknownUnit;  // "'{}': unknown ... unit '{}' ..."
  const char* overflow;     // "'{}' is too ..."
  // Suffixes refused with their own sentence ("'{}': ... '{}' ..."): a
  // spelling that means two things to the people who write it.
  std::initializer_list<std::string_view> ambiguous = {};
  const char* ambiguousWhy = nullptr;
  // A decimal fraction ("1.5G", as systemd's MemoryMax= reads it) of a unit
  // larger than 1; rounded down to a whole count.
  bool fractions = false;
};

constexpr unsigned kMaxFractionDigits = 9;

Result<std::uint64_t> parseScaled(std::string_view text, const Scale& scale) {
  std::string_view t = text::trim(text);
  std::size_t i = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  if (i == 0) return Error{0, fmt::format(fmt::runtime(scale.notANumber), text)};
  std::string_view whole = t.substr(0, i), fraction;
  if (scale.fractions && i < t.size() && t[i] == '.') {
    std::size_t f = ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    fraction = t.substr(f, i - f);
    if (fraction.empty() || fraction.size() > kMaxFractionDigits)
      return Error{0, fmt::format(fmt::runtime(scale.notANumber), text)};
  }
  std::string_view suffix = text::trim(t.substr(i));
  std::string lower(suffix);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view a : scale.ambiguous) {
    if (a == lower) return Error{0, fmt::format(fmt::runtime(scale.ambiguousWhy), text, suffix)};
  }
  for (const Unit& u : scale.units) {
    if (u.suffix != lower) continue;
    auto n = text::parseU64(whole);
    auto v = n ? text::mulU64(*n, u.factor) : std::nullopt;
    if (!v) return Error{0, fmt::format(fmt::runtime(scale.overflow), text)};
    if (fraction.empty()) return *v;
    if (u.factor == 1)
      return Error{
          0, fmt::format("'{}': a byte count is whole (a fraction needs K, M, G or T)", text)};
    // factor * digits / 10^d, exact in 128 bits: factor <= 2^40, digits < 10^9.
    __extension__ using Wide = unsigned __int128;
    std::uint64_t digits = *text::parseU64(fraction), scale10 = 1;
    for (std::size_t k = 0; k < fraction.size(); ++k) scale10 *= 10;
    Wide part = static_cast<Wide>(u.factor) * digits / scale10;
    Wide total = static_cast<Wide>(*v) + part;
    if (total > UINT64_MAX) return Error{0, fmt::format(fmt::runtime(scale.overflow), text)};
    return static_cast<std::uint64_t>(total);
  }
  return Error{0, fmt::format(fmt::runtime(scale.unknownUnit), text, suffix)};
}

constexpr std::uint64_t KiB = 1ull << 10, MiB = 1ull << 20, GiB = 1ull << 30, TiB = 1ull << 40;

}  // namespace

Result<std::uint64_t> parseSize(std::string_view text) {
  // K, M, G, T are 1024-based, as systemd's MemoryMax= reads them; "GB" is
  // refused: half the people who write it mean 10^9.
  return parseScaled(
      text, {{{"", 1},
              {"b", 1},
              {"k", KiB},
              {"ki", KiB},
              {"kib", KiB},
              {"m", MiB},
              {"mi", MiB},
              {"mib", MiB},
              {"g", GiB},
              {"gi", GiB},
              {"gib", GiB},
              {"t", TiB},
              {"ti", TiB},
              {"tib", TiB}},
             "'{}' is not a size: give bytes or a number with K, M, G or T (1024-based), e.g. 64M "
             "or 1.5G",
             "'{}': unknown size unit '{}' (use K, M, G or T, 1024-based; KiB spellings work too)",
             "'{}' is too large for a 64-bit byte count",
             {"kb", "mb", "gb", "tb"},
             "'{}': '{}' could mean powers of 1000 or of 1024; tally reads sizes as systemd's "
             "MemoryMax= does, 1024-based: write K, M, G or T (or KiB, MiB, GiB, TiB)",
             true});
}

namespace {

Result<std::uint64_t> parseDurationPart(std::string_view text) {
  return parseScaled(text, {{{"us", 1},
                             {"ms", 1000},
                             {"", 1000000},
                             {"s", 1000000},
                             {"m", 60000000},
                             {"min", 60000000},
                             {"h", 3600000000},
                             {"d", 86400000000}},
                            "'{}' is not a duration: give e.g. 500ms, 1s or 2m",
                            "'{}': unknown duration unit '{}' (use us, ms, s, m, h or d)",
                            "'{}' is too long a duration"});
}

}  // namespace

// systemd's timespans: one part ("90s") or several, space-separated and
// summed ("1h 30min", as humanDuration writes them).
Result<std::uint64_t> parseDurationUs(std::string_view raw) {
  // systemd reads "30 s" and "1h\t30min" too: blanks between a number and its
  // unit go, other runs of blanks become one space.
  std::string text;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != ' ' && raw[i] != '\t') {
      text += raw[i];
      continue;
    }
    std::size_t next = i;
    while (next < raw.size() && (raw[next] == ' ' || raw[next] == '\t')) ++next;
    const bool afterDigit = !text.empty() && std::isdigit(static_cast<unsigned char>(text.back()));
    const bool beforeUnit =
        next < raw.size() && std::isalpha(static_cast<unsigned char>(raw[next]));
    if (!(afterDigit && beforeUnit)) text += ' ';
    i = next - 1;
  }
  if (text.find(' ') == std::string::npos) return parseDurationPart(text);
  std::uint64_t sum = 0;
  std::size_t parts = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = std::min(text.find(' ', at), text.size());
    if (end > at) {
      auto part = parseDurationPart(text.substr(at, end - at));
      if (!part) return part.error();
      if (*part > UINT64_MAX - sum)
        return Error{0, fmt::format("'{}' is too long a duration", text.substr(0, 64))};
      sum += *part;
      ++parts;
    }
    at = end + 1;
  }
  if (!parts) return parseDurationPart("");
  return sum;
}

std::string humanBytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string humanDuration(std::uint64_t us) {
  if (!us) return "0";
  struct Unit {
    std::uint64_t us;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{86'400'000'000ULL, "d"}, {3'600'000'000ULL, "h"},
                                    {60'000'000ULL, "min"},   {1'000'000ULL, "s"},
                                    {1'000ULL, "ms"},         {1ULL, "us"}};
  std::string out;
  for (const auto& u : kUnits) {
    if (us < u.us) continue;
    out += fmt::format("{}{}{}", out.empty() ? "" : " ", us / u.us, u.name);
    us %= u.us;
  }
  return out;
}

std::string roughDuration(std::uint64_t us) {
  // Whole seconds (a second or more); below that, as exact as it is.
  return humanDuration(us >= 1'000'000 ? us - us % 1'000'000 : us);
}

}  // namespace tally::units
