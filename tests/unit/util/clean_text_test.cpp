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

TEST(CleanText, OnTheWayOutEverythingIsShownAndNothingObeyed) {
  EXPECT_EQ(printable("llama ✓"), "llama ✓");
  EXPECT_EQ(printable("a\x1b]0;pwned\x07z"), "a\\u{001B}]0;pwned\\u{0007}z");
  EXPECT_EQ(printable("c1\xc2\x9b"
                      "31m"),
            "c1\\u{009B}31m");
  EXPECT_EQ(printable("evil\xe2\x80\xaegnp"), "evil\\u{202E}gnp");
  EXPECT_EQ(printable("bad\xff\xfe"), "bad\\xff\\xfe");
  EXPECT_EQ(printable("cut\xe2\x82"), "cut\\xe2\\x82");
  // Idempotent: a cell made printable and then its line again reads the same.
  EXPECT_EQ(printable(printable("a\x1b\xff")), "a\\u{001B}\\xff");
  EXPECT_EQ(printable("C:\\x41"), "C:\\x41");
  for (std::string s : {std::string("\x1b[31m\xff\xc2\x85\xe2\x80\xae"), std::string("\\x")})
    EXPECT_EQ(cleanTextProblem(printable(s)), std::nullopt) << printable(s);
}

}  // namespace
}  // namespace tally
