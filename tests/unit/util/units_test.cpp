// The pure parts of a lease: unit parsing, cgroup memory file parsers, the
// read-back rules, outcome classification and the outcome record.
#include "util/units.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <limits>

#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;
using units::parseDurationUs;
using units::parseSize;

constexpr std::uint64_t kMiB = 1 << 20;

TEST(Units, SizesIn1024BasedUnitsAndEverySpelling) {
  EXPECT_EQ(*parseSize("0"), 0u);
  EXPECT_EQ(*parseSize("4096"), 4096u);
  EXPECT_EQ(*parseSize("4096B"), 4096u);
  EXPECT_EQ(*parseSize("64M"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64m"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64Mi"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64MiB"), 64 * kMiB);
  EXPECT_EQ(*parseSize("64 MiB"), 64 * kMiB);
  EXPECT_EQ(*parseSize("1K"), 1024u);
  EXPECT_EQ(*parseSize("2KiB"), 2048u);
  EXPECT_EQ(*parseSize("3G"), 3ull << 30);
  EXPECT_EQ(*parseSize("1T"), 1ull << 40);
  EXPECT_EQ(*parseSize("16777215T"), 16777215ull << 40);
  EXPECT_EQ(*parseSize(" 8G "), 8ull << 30);
  // Fractions, as systemd's MemoryMax= takes them, rounded down to a byte.
  EXPECT_EQ(*parseSize("1.5G"), 1610612736u);
  EXPECT_EQ(*parseSize("0.5K"), 512u);
  EXPECT_EQ(*parseSize("0.1K"), 102u) << "102.4 rounded down";
  EXPECT_EQ(*parseSize("2.25 GiB"), 2415919104u);
  EXPECT_EQ(*parseSize("16777215.999999999T"), (16777215ull << 40) + 1099511626676u);
}

TEST(Units, AnAmbiguousUnitIsRefusedWithTheSentence) {
  for (const char* gb : {"96GB", "64MB", "1kb", "2 TB"}) {
    auto r = parseSize(gb);
    ASSERT_FALSE(r.ok()) << gb;
    EXPECT_NE(r.error().message.find("could mean powers of 1000 or of 1024"), std::string::npos)
        << r.error().message;
  }
  EXPECT_NE(parseSize("1.5").error().message.find("a byte count is whole"), std::string::npos);
}

TEST(Units, BadSizesSayWhatIsAccepted) {
  for (const char* bad : {"", "M", "-1", "1.G", ".5G", "1.5.5G", "1.0000000001G", "64X", "64 M B",
                          "infinity", "0x10", "12P", "1,5G"}) {
    auto r = parseSize(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(parseSize("64X").error().message.find("K, M, G or T"), std::string::npos);
  // Overflow: in the digits and through the unit multiply.
  EXPECT_FALSE(parseSize("18446744073709551616").ok());
  EXPECT_FALSE(parseSize("16777216T").ok());
  EXPECT_FALSE(parseSize("16777215.9999999999T").ok()) << "ten fraction digits";
  EXPECT_FALSE(parseSize("18446744073709551615.5K").ok());
  EXPECT_NE(parseSize("16777216T").error().message.find("too large"), std::string::npos);
}

TEST(Units, Durations) {
  EXPECT_EQ(*parseDurationUs("1s"), 1000000u);
  EXPECT_EQ(*parseDurationUs("2"), 2000000u);
  EXPECT_EQ(*parseDurationUs("250ms"), 250000u);
  EXPECT_EQ(*parseDurationUs("50us"), 50u);
  EXPECT_EQ(*parseDurationUs("2m"), 120000000u);
  EXPECT_EQ(*parseDurationUs("1h"), 3600000000u);
  EXPECT_EQ(*parseDurationUs("7d"), 604800000000u);
  EXPECT_FALSE(parseDurationUs("1y").ok());
  EXPECT_FALSE(parseDurationUs("213503983d").ok());
  EXPECT_FALSE(parseDurationUs("ms").ok());
  EXPECT_FALSE(parseDurationUs("99999999999999999999s").ok());
  EXPECT_FALSE(parseDurationUs("18446744073709551615m").ok());
}

}  // namespace
}  // namespace tally
