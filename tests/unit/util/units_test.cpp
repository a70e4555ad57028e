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
  // systemd's timespans of several parts, as humanDuration writes them.
  EXPECT_EQ(*parseDurationUs("1h 30min"), 5'400'000'000u);
  EXPECT_EQ(*parseDurationUs("1ms 500us"), 1500u);
  EXPECT_FALSE(parseDurationUs("1h 30x").ok());
  EXPECT_FALSE(parseDurationUs("   ").ok());
  // As systemd reads them: a blank between a number and its unit, tabs.
  EXPECT_EQ(*parseDurationUs("30 s"), 30'000'000u);
  EXPECT_EQ(*parseDurationUs("500 ms"), 500'000u);
  EXPECT_EQ(*parseDurationUs("1h\t30 min"), 5'400'000'000u);
  EXPECT_EQ(*parseDurationUs(" 2m "), 120'000'000u);
  EXPECT_FALSE(parseDurationUs("213503982d 213503982d").ok());  // the sum overflows
}

// One vocabulary: durations as systemd writes them, exact, read back whole.
TEST(Units, DurationsAreWrittenAsSystemdWritesThem) {
  EXPECT_EQ(units::humanDuration(2'592'000'000'000ULL), "30d");
  EXPECT_EQ(units::humanDuration(1'000'000), "1s");
  EXPECT_EQ(units::humanDuration(250'000), "250ms");
  EXPECT_EQ(units::humanDuration(5'400'000'000ULL), "1h 30min");
  EXPECT_EQ(units::humanDuration(1500), "1ms 500us");
  EXPECT_EQ(units::humanDuration(0), "0");
  EXPECT_EQ(units::humanDuration(345'311'981), "5min 45s 311ms 981us");
  EXPECT_EQ(units::roughDuration(345'311'981), "5min 45s");
  EXPECT_EQ(units::roughDuration(999), "999us");
  for (std::uint64_t us : std::initializer_list<std::uint64_t>{
           1, 1500, 345'311'981, 2'592'000'000'000ULL, 90'061'001'001ULL, UINT64_MAX / 2})
    EXPECT_EQ(*parseDurationUs(units::humanDuration(us)), us) << units::humanDuration(us);
}

}  // namespace
}  // namespace tally
