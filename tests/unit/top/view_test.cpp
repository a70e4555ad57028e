// The pure parts behind seats, metrics, top and the journal: attributes,
// freshness, the exposition format, the top screen, lifecycle journal
// entries, the loopback listen address and the atomic textfile.
#include "top/view.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/fake_host.h"
#include "support/overview_sample.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST(TopView, TheScreenFitsTheTerminalAndSaysWhatItLeftOut) {
  json o = overviewWith(freshSeat());
  top::ViewOptions v;
  v.width = 80;
  for (const auto& l : top::render(o, v)) EXPECT_EQ(l.size(), 80u) << l;
  v.width = 170;
  auto lines = top::render(o, v);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("coverage: MemoryMax covers host"), std::string::npos) << all;
  EXPECT_NE(all.find("llama"), std::string::npos);
  EXPECT_NE(all.find("41.0 GiB/48.0 GiB  85%"), std::string::npos) << all;
  EXPECT_NE(all.find("0000:c6:00.0"), std::string::npos);
  EXPECT_NE(all.find("gtt 16.0 GiB"), std::string::npos);
  EXPECT_NE(all.find("vram - (no device exports mem_info_vram_used)"), std::string::npos);
  // Twenty leases on a 20-line terminal: the lease table is cut, and says so.
  json many = json::array();
  for (int i = 0; i < 20; ++i) {
    json s = freshSeat();
    s["lease"] = fmt::format("{:012x}", i);
    many.push_back(s);
  }
  o["seats"] = many;
  v.height = 20;
  lines = top::render(o, v);
  EXPECT_EQ(lines.size(), 20u);
  all.clear();
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("more lease(s)"), std::string::npos) << all;
  EXPECT_NE(all.find("POOL"), std::string::npos);  // pools and devices stay on screen
  // A stale lease shows no figures.
  json stale = freshSeat();
  stale["fresh"] = false;
  auto rows = top::seatTable(json::array({stale}), 200);
  EXPECT_NE(rows[1].find("stale"), std::string::npos);
  EXPECT_EQ(rows[1].find("41.0 GiB"), std::string::npos) << rows[1];
  // A UTF-8 character is never split by the cut.
  EXPECT_EQ(top::fit("ab\xc3\xa9z", 3), "ab\xc3\xa9");
  EXPECT_EQ(top::fit("ab", 4), "ab  ");
  // A broken overview (an older daemon, garbage) draws, with '-' and '?'.
  EXPECT_FALSE(top::render(json::array(), v).empty());
  EXPECT_FALSE(
      top::render(json{{"seats", 7}, {"pools", "x"}, {"devices", json::array({1, 2})}}, v).empty());
}

}  // namespace
}  // namespace tally
