#include "util/clean_text.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

using text::cleanTextProblem;
using text::printable;

TEST(CleanText, WhatATerminalWouldObeyIsRefusedOnTheWayIn) {
  EXPECT_EQ(cleanTextProblem("llama-server.service"), std::nullopt);
  EXPECT_EQ(cleanTextProblem("qwen3 32B ✓ 模型"), std::nullopt);
  EXPECT_EQ(cleanTextProblem(""), std::nullopt);
  EXPECT_EQ(cleanTextProblem("a\x1b]0;ALL GPU LEASES HEALTHY\x07"),
            "contains a control character (U+001B) at byte 1");
  EXPECT_EQ(cleanTextProblem("x\x1b[2J"), "contains a control character (U+001B) at byte 1");
  EXPECT_EQ(cleanTextProblem("line\nbreak"), "contains a control character (U+000A) at byte 4");
  EXPECT_EQ(cleanTextProblem("tab\t"), "contains a control character (U+0009) at byte 3");
  EXPECT_EQ(cleanTextProblem("del\x7f"), "contains a control character (U+007F) at byte 3");
  EXPECT_EQ(cleanTextProblem("c1\xc2\x9b"), "contains a control character (U+009B) at byte 2");
  EXPECT_EQ(cleanTextProblem("evil\xe2\x80\xaegnp.exe"),
            "contains a bidirectional formatting character (U+202E) at byte 4");
  EXPECT_EQ(cleanTextProblem("\xe2\x81\xa6x"),
            "contains a bidirectional formatting character (U+2066) at byte 0");
  EXPECT_EQ(cleanTextProblem("bad\xff"), "is not UTF-8 (byte 3 is 0xff)");
  EXPECT_EQ(cleanTextProblem("\xc0\xaf"), "is not UTF-8 (byte 0 is 0xc0)");          // overlong /
  EXPECT_EQ(cleanTextProblem("\xed\xa0\x80"), "is not UTF-8 (byte 0 is 0xed)");      // surrogate
  EXPECT_EQ(cleanTextProblem("\xf4\x90\x80\x80"), "is not UTF-8 (byte 0 is 0xf4)");  // > U+10FFFF
  EXPECT_EQ(cleanTextProblem("cut\xe2\x82"), "is not UTF-8 (byte 3 is 0xe2)");
  EXPECT_EQ(cleanTextProblem(std::string("nul\0", 4)),
            "contains a control character (U+0000) at byte 3");
}

// Characters that show nothing make two names that read the same differ, or
// one read as another ("llama" and "lla<ZWJ>ma" in a listing), and the line
// and paragraph separators break a line where a terminal or log shows none.
TEST(CleanText, InvisibleAndFormatCharactersAreRefusedOnTheWayIn) {
  EXPECT_EQ(cleanTextProblem("lla\xe2\x80\x8dma"),  // U+200D ZERO WIDTH JOINER
            "contains an invisible or format character (U+200D) at byte 3");
  EXPECT_EQ(cleanTextProblem("\xe2\x80\x8bllama"),  // U+200B ZERO WIDTH SPACE
            "contains an invisible or format character (U+200B) at byte 0");
  EXPECT_EQ(cleanTextProblem("a\xe2\x80\xa8"
                             "b"),  // U+2028 LINE SEPARATOR
            "contains an invisible or format character (U+2028) at byte 1");
  EXPECT_EQ(cleanTextProblem("a\xe2\x80\xa9"),  // U+2029 PARAGRAPH SEPARATOR
            "contains an invisible or format character (U+2029) at byte 1");
  EXPECT_EQ(cleanTextProblem("\xef\xbb\xbfmodel"),  // U+FEFF, a byte-order mark
            "contains an invisible or format character (U+FEFF) at byte 0");
  EXPECT_EQ(cleanTextProblem("soft\xc2\xadhyphen"),  // U+00AD
            "contains an invisible or format character (U+00AD) at byte 4");
  EXPECT_EQ(cleanTextProblem("x\xf3\xa0\x80\x81"),  // U+E0001 LANGUAGE TAG
            "contains an invisible or format character (U+E0001) at byte 1");
  EXPECT_EQ(cleanTextProblem("x\xf3\xa0\x81\xbf"),  // U+E007F CANCEL TAG, the last tag
            "contains an invisible or format character (U+E007F) at byte 1");
  EXPECT_EQ(cleanTextProblem("\xef\xb8\x8f"),  // U+FE0F VARIATION SELECTOR-16
            "contains an invisible or format character (U+FE0F) at byte 0");
  EXPECT_EQ(cleanTextProblem("\xe3\x85\xa4"),  // U+3164 HANGUL FILLER
            "contains an invisible or format character (U+3164) at byte 0");
  EXPECT_EQ(cleanTextProblem("\xd8\x80"),  // U+0600 ARABIC NUMBER SIGN (Cf)
            "contains an invisible or format character (U+0600) at byte 0");
  EXPECT_EQ(cleanTextProblem("\xe2\x81\xa0"),  // U+2060 WORD JOINER
            "contains an invisible or format character (U+2060) at byte 0");
  EXPECT_EQ(cleanTextProblem("\xef\xbf\xbb"),  // U+FFFB, the last range's end
            "contains an invisible or format character (U+FFFB) at byte 0");
  // Their neighbours are ordinary text: the ranges end where Unicode's do.
  for (const char* ok : {"\xe2\x80\x90",      // U+2010 HYPHEN
                         "\xe2\x80\xa7",      // U+2027 HYPHENATION POINT
                         "\xe2\x80\xaf",      // U+202F NARROW NO-BREAK SPACE
                         "\xef\xbf\xbc",      // U+FFFC OBJECT REPLACEMENT CHARACTER
                         "\xef\xbb\xbe",      // U+FEFE, beside the byte-order mark
                         "\xf3\xa1\x80\x80",  // U+E1000, past the tags' block
                         "\xc2\xae",          // U+00AE REGISTERED SIGN
                         "\xe2\x80\x8a"})     // U+200A HAIR SPACE (visible width)
    EXPECT_EQ(cleanTextProblem(ok), std::nullopt) << ok;
}

TEST(CleanText, OnTheWayOutEverythingIsShownAndNothingObeyed) {
  EXPECT_EQ(printable("llama ✓"), "llama ✓");
  EXPECT_EQ(printable("a\x1b]0;pwned\x07z"), "a\\u{001B}]0;pwned\\u{0007}z");
  EXPECT_EQ(printable("c1\xc2\x9b"
                      "31m"),
            "c1\\u{009B}31m");
  EXPECT_EQ(printable("evil\xe2\x80\xaegnp"), "evil\\u{202E}gnp");
  EXPECT_EQ(printable("lla\xe2\x80\x8dma\xe2\x80\xa8"), "lla\\u{200D}ma\\u{2028}");
  EXPECT_EQ(printable("bad\xff\xfe"), "bad\\xff\\xfe");
  EXPECT_EQ(printable("cut\xe2\x82"), "cut\\xe2\\x82");
  // Idempotent: a cell made printable and then its line again reads the same.
  EXPECT_EQ(printable(printable("a\x1b\xff")), "a\\u{001B}\\xff");
  EXPECT_EQ(printable("C:\\x41"), "C:\\x41");
  for (std::string s :
       {std::string("\x1b[31m\xff\xc2\x85\xe2\x80\xae\xe2\x80\x8b"), std::string("\\x")})
    EXPECT_EQ(cleanTextProblem(printable(s)), std::nullopt) << printable(s);
}

}  // namespace
}  // namespace tally
