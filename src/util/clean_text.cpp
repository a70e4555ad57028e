#include "util/clean_text.h"

#include <fmt/format.h>

#include <cstdint>

namespace tally::text {
namespace {

// One UTF-8 sequence at the front of `s`: its code point and length, or
// length 0 when the bytes there are not UTF-8 (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF).
struct Decoded {
  char32_t cp = 0;
  std::size_t len = 0;
};

Decoded decodeOne(std::string_view s) {
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return {c, 1};
  std::size_t len;
  char32_t cp;
  char32_t min;
  if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return {};
  }
  if (s.size() < len) return {};
  for (std::size_t i = 1; i < len; ++i) {
    if ((b(i) & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (b(i) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {cp, len};
}

bool isControl(char32_t cp) { return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F); }

bool isBidi(char32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// Invisible and format characters, bidi ones apart (isBidi names them
// first): Unicode 15's Default_Ignorable_Code_Point (DerivedCoreProperties.txt),
// the rest of General_Category=Cf, and Zl/Zp. Sorted, inclusive.
struct Range {
  char32_t first, last;
};
constexpr Range kInvisible[] = {
    {0x00AD, 0x00AD},   {0x034F, 0x034F},   {0x0600, 0x0605},   {0x06DD, 0x06DD},
    {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},   {0x115F, 0x1160},
    {0x17B4, 0x17B5},   {0x180B, 0x180F},   {0x200B, 0x200D},   {0x2028, 0x2029},
    {0x2060, 0x2065},   {0x206A, 0x206F},   {0x3164, 0x3164},   {0xFE00, 0xFE0F},
    {0xFEFF, 0xFEFF},   {0xFFA0, 0xFFA0},   {0xFFF0, 0xFFFB},   {0x110BD, 0x110BD},
    {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},
    {0xE0000, 0xE0FFF},
};

bool isInvisible(char32_t cp) {
  for (const Range& r : kInvisible) {
    if (cp < r.first) return false;
    if (cp <= r.last) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> cleanTextProblem(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    Decoded d = decodeOne(s.substr(i));
    if (d.len == 0) return fmt::format("is not UTF-8 (byte {} is 0x{:02x})", i, s[i] & 0xFF);
    if (isControl(d.cp))
      return fmt::format("contains a control character (U+{:04X}) at byte {}",
                         static_cast<std::uint32_t>(d.cp), i);
    if (isBidi(d.cp))
      return fmt::format("contains a bidirectional formatting character (U+{:04X}) at byte {}",
                         static_cast<std::uint32_t>(d.cp), i);
    if (isInvisible(d.cp))
      return fmt::format("contains an invisible or format character (U+{:04X}) at byte {}",
                         static_cast<std::uint32_t>(d.cp), i);
    i += d.len;
  }
  return std::nullopt;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    Decoded d = decodeOne(s.substr(i));
    if (d.len == 0) {
      out += fmt::format("\\x{:02x}", s[i] & 0xFF);
      ++i;
      continue;
    }
    if (isControl(d.cp) || isBidi(d.cp) || isInvisible(d.cp)) {
      out += fmt::format("\\u{{{:04X}}}", static_cast<std::uint32_t>(d.cp));
    } else {
      out.append(s.substr(i, d.len));
    }
    i += d.len;
  }
  return out;
}

}  // namespace tally::text
