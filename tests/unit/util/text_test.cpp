#include "util/text.h"

#include <gtest/gtest.h>

#include "util/token_bucket.h"

namespace tally {
namespace {

TEST(TruncateUtf8, NeverCutsACharacterInTwo) {
  std::string s = std::string(511, 'a') + "\xc3\xa9";  // 511 bytes, then a 2-byte character
  EXPECT_EQ(text::truncateUtf8(s, 512), std::string(511, 'a'));
  EXPECT_EQ(text::truncateUtf8(s, 513), s);
  std::string euro = "x\xe2\x82\xac";  // a 3-byte character
  EXPECT_EQ(text::truncateUtf8(euro, 3), "x");
  EXPECT_EQ(text::truncateUtf8(euro, 2), "x");
  EXPECT_EQ(text::truncateUtf8(euro, 4), euro);
  EXPECT_EQ(text::truncateUtf8("abc", 0), "");
  // Not UTF-8 at all (a run of continuation bytes): cut as bytes.
  std::string junk(8, '\x80');
  EXPECT_EQ(text::truncateUtf8(junk, 5).size(), 5u);
}

TEST(TokenBucket, ABurstThenOnePerInterval) {
  TokenBucket b(3, 1000);
  EXPECT_TRUE(b.take(10));
  EXPECT_TRUE(b.take(10));
  EXPECT_TRUE(b.take(10));
  EXPECT_FALSE(b.take(10));
  EXPECT_FALSE(b.take(500));
  EXPECT_TRUE(b.take(1010));  // one interval after the burst emptied it
  EXPECT_FALSE(b.take(1011));
  EXPECT_TRUE(b.take(1'000'000));  // refilled, never past the burst
  EXPECT_TRUE(b.take(1'000'000));
  EXPECT_TRUE(b.take(1'000'000));
  EXPECT_FALSE(b.take(1'000'000));
}

}  // namespace
}  // namespace tally
