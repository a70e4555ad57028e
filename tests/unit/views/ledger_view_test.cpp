// `tally ledger`'s table and filters: exact lines for known rows, every
// filter, the time forms an operator types, and a long name that must not
// push the columns out of line.
#include "views/ledger_view.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tally {
namespace {

constexpr std::uint64_t kSec = 1'000'000'000ULL;
constexpr std::uint64_t kNoon = 1'796'040'000ULL * kSec;  // 2026-11-30 12:00:00 UTC

std::string names(std::uint32_t uid) { return uid == 1000 ? "alice" : std::to_string(uid); }

ledger::Row row(std::int64_t seq, const std::string& id, const std::string& name,
                const std::string& cls, std::uint64_t startNs, std::uint64_t seconds,
                const nlohmann::json& extra = nlohmann::json::object()) {
  ledger::Row r;
  r.seq = seq;
  r.entry.leaseId = id;
  r.entry.name = name;
  r.entry.outcomeClass = cls;
  r.entry.startedAtNs = startNs;
  r.entry.endedAtNs = startNs + seconds * kSec;
  r.entry.exitStatus = cls == "exited" ? std::optional<int>(0) : std::nullopt;
  nlohmann::json rec = {{"lease", {{"id", id}, {"name", name}}}};
  rec.merge_patch(extra);
  r.entry.recordJson = rec.dump();
  return r;
}

std::vector<ledger::Row> sample() {
  return {row(3, "aaaaaaaaaaaa", "llama", "exited", kNoon, 95,
              {{"memory", {{"peak_bytes", 3ULL << 30}}},
               {"gpu", {{"peak_bytes", 40ULL << 30}}},
               {"lease", {{"pools", {"gpu"}}, {"owner_uid", 1000}}}}),
          row(7, "bbbbbbbbbbbb", "a-very-long-lease-name-indeed", "killed-by-tally",
              kNoon + 3600 * kSec, 7300,
              {{"lease", {{"pools", {"gpu", "batch"}}, {"owner_uid", 4242}}}}),
          row(8, "bbbbcccccccc", "llama", "containment-refused", kNoon + 7200 * kSec, 0)};
}

TEST(LedgerView, TheTableHasEveryColumnAlignedAndSaysWhySeqHasGaps) {
  auto lines = views::ledgerTable(sample(), true, names);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0],
            "   SEQ  STARTED (UTC)        DURATION  LEASE         NAME              USER      POOL "
            "     OUTCOME                   EXIT   MEM PEAK   GPU PEAK");
  EXPECT_EQ(lines[1],
            "     3  2026-11-30 12:00:00     1m35s  aaaaaaaaaaaa  llama             alice     gpu  "
            "     exited                       0    3.0 GiB   40.0 GiB");
  // A uid without a name is its number; a row that names no owner says "-".
  EXPECT_EQ(lines[2],
            "     7  2026-11-30 13:00:00     2h01m  bbbbbbbbbbbb  a-very-long-lea…  4242      "
            "gpu,bat…  killed-by-tally              -          -          -");
  EXPECT_EQ(lines[3],
            "     8  2026-11-30 14:00:00        0s  bbbbcccccccc  llama             -         -  "
            "       containment-refused          -          -          -");
  EXPECT_EQ(lines[4].rfind("(SEQ numbers the ledger's hash chain", 0), 0u);
  // Every line, whatever its names, is as wide as the header (in columns).
  auto columns = [](const std::string& s) {
    std::size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
  };
  for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(columns(lines[i]), columns(lines[0])) << lines[i];
  // Consecutive rows: no gap, no footnote.
  auto rows = sample();
  rows.pop_back();
  rows[1].seq = 4;
  EXPECT_EQ(views::ledgerTable(rows, true, names).size(), 3u);
}

TEST(LedgerView, AnAttachedLeasesExitIsTheReportedCodeOrSignal) {
  // No tally_exit_status (tally ran nothing); the attacher reported the task's end.
  std::vector<ledger::Row> rows = {
      row(3, "aaaaaaaaaaaa", "step", "ended", kNoon, 5, {{"outcome", {{"exit_code", 3}}}}),
      row(4, "bbbbbbbbbbbb", "step", "ended", kNoon, 5,
          {{"outcome", {{"signal", 15}, {"signal_name", "SIGTERM"}}}}),
      row(5, "cccccccccccc", "step", "ended", kNoon, 5,
          {{"outcome", {{"signal", 9}, {"signal_name", "SIGKILL-and-then-some"}}}}),
      row(6, "dddddddddddd", "step", "ended", kNoon, 5, {{"outcome", {{"exit_code", -1}}}})};
  auto lines = views::ledgerTable(rows, true, names);
  ASSERT_EQ(lines.size(), 5u);
  auto exitColumn = [&](std::size_t i) { return lines[i].substr(lines[0].find("EXIT") - 5, 9); };
  EXPECT_EQ(exitColumn(1), "        3");
  EXPECT_EQ(exitColumn(2), "  SIGTERM");
  EXPECT_NE(lines[3].find(" SIGKILL-\u2026 "), std::string::npos) << lines[3];  // cut to its column
  EXPECT_EQ(exitColumn(4), "        -");  // not a status: never shown as one
}

TEST(LedgerView, FiltersSelectAndLastKeepsTheNewest) {
  views::LedgerFilter f;
  f.last = 0;
  EXPECT_EQ(views::filterRows(sample(), f).size(), 3u);
  f.name = "llama";
  EXPECT_EQ(views::filterRows(sample(), f).size(), 2u);
  f.outcome = "exited";
  ASSERT_EQ(views::filterRows(sample(), f).size(), 1u);
  EXPECT_EQ(views::filterRows(sample(), f)[0].seq, 3);
  f = {};
  f.lease = "bbbb";
  EXPECT_EQ(views::filterRows(sample(), f).size(), 2u);
  f = {};
  f.sinceNs = kNoon + 1;
  f.untilNs = kNoon + 3600 * kSec;
  ASSERT_EQ(views::filterRows(sample(), f).size(), 1u);
  EXPECT_EQ(views::filterRows(sample(), f)[0].seq, 7);
  f = {};
  f.owner = 4242;
  ASSERT_EQ(views::filterRows(sample(), f).size(), 1u);
  EXPECT_EQ(views::filterRows(sample(), f)[0].seq, 7);
  f.owner = 7;  // nobody's: nothing, and a row naming no owner never matches
  EXPECT_TRUE(views::filterRows(sample(), f).empty());
  f = {};
  f.last = 2;
  auto newest = views::filterRows(sample(), f);
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[0].seq, 7);
  EXPECT_EQ(newest[1].seq, 8);
}

TEST(LedgerView, TimesAreDatesOrDurationsAgo) {
  std::uint64_t now = kNoon;
  EXPECT_EQ(*views::parseWhen("2026-11-30", now, true), kNoon - 12 * 3600 * kSec);
  EXPECT_EQ(*views::parseWhen("2026-11-30 12:00", now, true), kNoon);
  EXPECT_EQ(*views::parseWhen("2026-11-30T12:00:05", now, true), kNoon + 5 * kSec);
  EXPECT_EQ(*views::parseWhen("2h", now, true), kNoon - 7200 * kSec);
  EXPECT_EQ(*views::parseWhen("90m", now, true), kNoon - 5400 * kSec);
  EXPECT_EQ(*views::parseWhen("3d", now, true), kNoon - 3 * 86400 * kSec);
  // journalctl's words.
  EXPECT_EQ(*views::parseWhen("now", now, true), kNoon);
  EXPECT_EQ(*views::parseWhen("today", now, true), kNoon - 12 * 3600 * kSec);
  EXPECT_EQ(*views::parseWhen("yesterday", now, true), kNoon - 36 * 3600 * kSec);
  // 2026-12-01 00:30 UTC: yesterday began in November.
  EXPECT_EQ(*views::parseWhen("yesterday", kNoon + 12 * 3600 * kSec + 1800 * kSec, true),
            kNoon - 12 * 3600 * kSec);
  for (const char* bad : {"", "tomorrow", "2026-13-45", "2026-11-30 25:00", "3w", "-2h"}) {
    auto r = views::parseWhen(bad, now, true);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("or a duration ago such as 90m, 2h, 3d"), std::string::npos);
  }
}

}  // namespace
}  // namespace tally
