// The `tally top` screen: it fits the terminal, says what it left out, and
// draws child leases under their parent.
#include "views/top.h"

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

// Display columns of a line: its bytes less UTF-8 continuation bytes ("…").
std::size_t columns(const std::string& line) {
  std::size_t n = 0;
  for (char c : line) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

TEST(TopView, TheScreenFitsTheTerminalAndSaysWhatItLeftOut) {
  json o = overviewWith(freshSeat());
  views::ViewOptions v;
  v.width = 80;
  for (const auto& l : views::render(o, v)) EXPECT_EQ(columns(l), 80u) << l;
  v.width = 170;
  auto lines = views::render(o, v);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("coverage: MemoryMax covers host"), std::string::npos) << all;
  EXPECT_NE(all.find("llama"), std::string::npos);
  EXPECT_NE(all.find("41.0G/48.0G  85%"), std::string::npos) << all;
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
  lines = views::render(o, v);
  EXPECT_EQ(lines.size(), 20u);
  all.clear();
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("... 11 leases not shown"), std::string::npos) << all;
  EXPECT_NE(all.find("POOL"), std::string::npos);  // pools and devices stay on screen
  // A stale lease shows no figures.
  json stale = freshSeat();
  stale["fresh"] = false;
  auto rows = views::seatTable(json::array({stale}), 200);
  EXPECT_NE(rows[1].find("stale"), std::string::npos);
  EXPECT_EQ(rows[1].find("41.0G"), std::string::npos) << rows[1];
  // A UTF-8 character is never split by the cut.
  EXPECT_EQ(views::fit("ab\xc3\xa9z", 3), "ab\xc3\xa9");
  EXPECT_EQ(views::fit("ab", 4), "ab  ");
  // A broken overview (an older daemon, garbage) draws, with '-' and '?'.
  EXPECT_FALSE(views::render(json::array(), v).empty());
  EXPECT_FALSE(
      views::render(json{{"seats", 7}, {"pools", "x"}, {"devices", json::array({1, 2})}}, v)
          .empty());
}

// With the daemon gone nothing on screen is current, and the screen says so
// first: the header, and every measured figure of every table is "-" (the
// budgets and totals are the config's and the devices', kept). At 80 columns
// the pools and devices drop whole columns, never cut a word; the sort key shows.
TEST(TopView, StaleIsNeverShownAsCurrentAndNarrowTablesDropWholeColumns) {
  json o = overviewWith(freshSeat());
  views::ViewOptions v;
  v.width = 170;
  v.daemonGone = true;
  auto gone = views::render(o, v);
  std::string all;
  for (const auto& l : gone) all += l + "\n";
  EXPECT_EQ(gone[0].rfind("tally top  STALE: no answer from the daemon since ", 0), 0u) << gone[0];
  EXPECT_NE(gone[0].find("nothing below is current"), std::string::npos) << gone[0];
  EXPECT_EQ(all.find("64.0 GiB"), std::string::npos) << "the pool's headroom\n" << all;
  EXPECT_EQ(all.find("20.0 GiB/"), std::string::npos) << "the device's GTT used\n" << all;
  EXPECT_EQ(all.find("16.0 GiB"), std::string::npos) << "outside leases\n" << all;
  EXPECT_NE(all.find("-/96.0 GiB"), std::string::npos) << "the budget is the config's\n" << all;
  EXPECT_NE(all.find("-/120.0 GiB"), std::string::npos) << "the GTT total\n" << all;
  EXPECT_NE(all.find("GPU memory outside leases (devices' used minus leases'):  gtt -  vram -"),
            std::string::npos)
      << all;

  v.daemonGone = false;
  v.width = 80;
  auto narrow = views::render(o, v);
  all.clear();
  for (const auto& l : narrow) {
    EXPECT_EQ(columns(l), 80u) << l;
    all += l + "\n";
  }
  // Whole columns: each header ends with a whole column name.
  EXPECT_NE(all.find("POOL         HOLDERS QUEUE     GPU DECLARED/BUDGET  HOST ROOM   GPU ROOM  "),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("MEMORY DECLARED"), std::string::npos) << all;
  EXPECT_NE(all.find("DEVICE         DRIVER            GTT USED/TOTAL         VRAM USED/TOTAL"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("GPU memory outside leases:  gtt 16.0 GiB  vram - (no device exports…"),
            std::string::npos)
      << all;
  EXPECT_NE(narrow[0].find(" by lease"), std::string::npos) << narrow[0];
  v.width = 170;
  v.sort = views::SortKey::Gpu;
  EXPECT_NE(views::render(o, v)[0].find("[q quits; sorted by gpu: m/g/n/l]"), std::string::npos)
      << views::render(o, v)[0];
}

// USER is the name the client looked up, else the uid; a stale row's RUN
// is as old as its figures, so it shows "-"; the workload sits under
// WORKLOAD, the declared attributes after it, bracketed.
TEST(TopView, EachSeatSaysWhoseItIsAndAStaleRowClaimsNothingRunning) {
  json named = freshSeat(), numbered = freshSeat(), stale = freshSeat();
  named["owner_uid"] = 1000;
  named["user"] = "alice";
  numbered["owner_uid"] = 4242;
  stale["fresh"] = false;
  stale["running"] = true;
  auto t = views::seatTable(json::array({named, numbered, stale}), 160);
  std::size_t user = t[0].find("USER"), run = t[0].find("RUN"), work = t[0].find("WORKLOAD");
  ASSERT_NE(user, std::string::npos) << t[0];
  EXPECT_EQ(t[1].substr(user, 8), "alice   ") << t[1];
  EXPECT_EQ(t[2].substr(user, 8), "4242    ") << t[2];
  EXPECT_EQ(t[3].substr(user, 8), "-       ") << t[3];  // names no owner
  EXPECT_EQ(t[1].substr(run, 3), "yes") << t[1];
  EXPECT_EQ(t[3].substr(run, 3), "-  ") << t[3];
  EXPECT_EQ(t[0].substr(work, 8), "WORKLOAD");  // the declared attributes follow it, bracketed
  EXPECT_EQ(t[1].substr(work, 9), "llama.ser") << t[1];
}

// A queued lease has no workload yet: its row says why it waits, in the
// words its client hears.
TEST(TopView, AQueuedSeatSaysWhyItWaits) {
  json queued = freshSeat();
  queued["state"] = "queued";
  queued["workload"] = json::object();
  queued["waiting"] = "pool gpu is full: 4 of 4 leases hold it";
  json bare = queued;
  bare.erase("waiting");
  auto t = views::seatTable(json::array({queued, bare}), 200);
  std::size_t work = t[0].find("WORKLOAD");
  ASSERT_NE(work, std::string::npos);
  EXPECT_EQ(t[1].substr(work).rfind("waits: pool gpu is full: 4 of 4 leases hold it ", 0), 0u)
      << t[1];
  EXPECT_EQ(t[2].substr(work).rfind("waits: for its turn ", 0), 0u) << t[2];
}

// The seat table fits 80 and 120 columns by dropping the least important
// columns first; over or near a limit is red or yellow on a colour terminal,
// stale dim; the daemon gone makes every row stale; htop's sort keys.
TEST(TopView, SeatColumnsFitTheTerminalAndRowsSayHowCloseTheyAre) {
  json fresh = freshSeat();
  auto header = [](const std::vector<std::string>& t) { return t.at(0); };
  auto at80 = views::seatTable(json::array({fresh}), 80);
  // Whose lease stays at 80 columns (the workload goes first).
  EXPECT_EQ(header(at80).rfind(
                "LEASE        NAME         USER     STATE        MEM NOW/MAX      GPU NOW/MAX", 0),
            0u)
      << header(at80);
  EXPECT_EQ(header(at80).find("GTT"), std::string::npos) << header(at80);
  EXPECT_NE(at80[1].find("41.0G/48.0G  85%"), std::string::npos) << at80[1];
  for (const auto& l : at80) EXPECT_EQ(l.size(), 80u) << l;
  auto at120 = views::seatTable(json::array({fresh}), 120);
  for (const char* col : {"MEM PEAK", "GTT", "VRAM", "RUN"})
    EXPECT_NE(header(at120).find(col), std::string::npos) << col << "\n" << header(at120);
  // REFUSED: the kernel's refusals at the bound; a column only where some
  // lease is charged in the kernel, '-' for a lease that is not.
  EXPECT_EQ(header(views::seatTable(json::array({fresh}), 140)).find("REFUSED"), std::string::npos);
  json charged = freshSeat();
  charged["gpu"]["allocations_refused"] = 12;
  auto both = views::seatTable(json::array({charged, fresh}), 140);
  std::size_t refusedAt = header(both).find("REFUSED");
  ASSERT_NE(refusedAt, std::string::npos) << header(both);
  EXPECT_EQ(both[1].substr(refusedAt, 7), "     12") << both[1];
  EXPECT_EQ(both[2].substr(refusedAt, 7), "      -") << both[2];

  views::ViewOptions o;
  o.width = 120;
  o.colour = true;
  json near = freshSeat(), over = freshSeat(), stale = freshSeat();
  near["gpu"]["current_bytes"] = 44 * GiB;  // 91% of 48 GiB
  over["gpu"]["current_bytes"] = 49 * GiB;
  stale["fresh"] = false;
  auto painted = views::seatTable(json::array({fresh, near, over, stale}), o);
  EXPECT_EQ(painted[1].find("\x1b["), std::string::npos) << "85% is no alarm";
  EXPECT_EQ(painted[2].rfind("\x1b[33m", 0), 0u) << painted[2];
  EXPECT_EQ(painted[3].rfind("\x1b[31m", 0), 0u) << painted[3];
  EXPECT_EQ(painted[4].rfind("\x1b[2m", 0), 0u) << painted[4];
  // A GPU limit of 0 (a Slurm job without the GRES): over once it holds anything.
  json none = freshSeat(), holds = freshSeat();
  none["gpu"]["limit_bytes"] = 0;
  none["gpu"]["current_bytes"] = 0;
  holds["gpu"]["limit_bytes"] = 0;
  holds["gpu"]["current_bytes"] = 4096;
  auto zero = views::seatTable(json::array({none, holds}), o);
  EXPECT_EQ(zero[1].find("\x1b[31m"), std::string::npos) << zero[1];
  EXPECT_EQ(zero[2].rfind("\x1b[31m", 0), 0u) << zero[2];
  o.colour = false;
  EXPECT_EQ(views::seatTable(json::array({over}), o)[1].find("\x1b["), std::string::npos);

  o.daemonGone = true;  // the last fetch failed: nothing shown is current
  auto gone = views::seatTable(json::array({fresh}), o);
  EXPECT_NE(gone[1].find("stale"), std::string::npos) << gone[1];
  EXPECT_EQ(gone[1].find("41.0G"), std::string::npos) << gone[1];
  o.daemonGone = false;

  json a = freshSeat(), b = freshSeat();
  a["name"] = "zeta";
  a["gpu"]["current_bytes"] = 1 * GiB;
  b["name"] = "alpha";
  b["gpu"]["current_bytes"] = 2 * GiB;
  o.sort = views::SortKey::Name;
  EXPECT_NE(views::seatTable(json::array({a, b}), o)[1].find("alpha"), std::string::npos);
  o.sort = views::SortKey::Gpu;
  EXPECT_NE(views::seatTable(json::array({a, b}), o)[1].find("alpha"), std::string::npos);
  o.sort = views::SortKey::Lease;
  EXPECT_NE(views::seatTable(json::array({a, b}), o)[1].find("zeta"), std::string::npos);
}

// A Slurm job's lease with its steps as child leases: each child right below
// its parent, drawn as ps draws a forest, whatever the sort put first.
TEST(TopView, ChildLeasesAreDrawnUnderTheirParent) {
  json job = freshSeat(), step0 = freshSeat(), step1 = freshSeat(), other = freshSeat();
  job["lease"] = "aaaaaaaaaaaa";
  job["name"] = "slurm-7";
  job["gpu"]["current_bytes"] = 3 * GiB;
  step0["lease"] = "bbbbbbbbbbbb";
  step0["name"] = "slurm-7.0";
  step0["parent"] = "aaaaaaaaaaaa";
  step0["gpu"]["current_bytes"] = 1 * GiB;
  step1["lease"] = "cccccccccccc";
  step1["name"] = "slurm-7.1";
  step1["parent"] = "aaaaaaaaaaaa";
  step1["gpu"]["current_bytes"] = 2 * GiB;
  other["lease"] = "dddddddddddd";
  other["name"] = "llama";
  other["gpu"]["current_bytes"] = 9 * GiB;
  views::ViewOptions o;
  o.width = 100;
  o.sort = views::SortKey::Gpu;
  auto t = views::seatTable(json::array({step0, job, other, step1}), o);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_NE(t[1].find("llama"), std::string::npos) << t[1];
  EXPECT_NE(t[2].find("slurm-7 "), std::string::npos) << t[2];
  EXPECT_NE(t[3].find("\\_ slurm-7.1"), std::string::npos) << "the larger child first: " << t[3];
  EXPECT_NE(t[4].find("\\_ slurm-7.0"), std::string::npos) << t[4];
  // A child whose parent is not listed stays a row of its own.
  auto alone = views::seatTable(json::array({step0}), o);
  EXPECT_NE(alone[1].find("\\_ slurm-7.0"), std::string::npos) << alone[1];
}

// A lease whose GPU memory sits in a region GPU memory does not count (a
// shmem driver's `memory`, charged to memory.current already) reads "GPU 0 B"
// in its row; a line below says how much is there and why it is not counted.
// A counted region, an empty one and a stale row add no such line.
TEST(TopView, GpuMemoryInARegionNotCountedIsShownWithItsSizeAndWhy) {
  json v3d = freshSeat();
  v3d["name"] = "v3d-job";
  v3d["gpu"]["current_bytes"] = 0;
  v3d["gpu"]["regions"] = {
      {"memory",
       {{"current_bytes", 16 * GiB},
        {"class", "host-charged"},
        {"not_counted", "host-charged: shmem pages the cgroup's memory.current already holds"}}},
      {"stolen", {{"current_bytes", 0}, {"class", "other"}, {"not_counted", "other: ..."}}}};
  views::ViewOptions o;
  o.width = 160;
  auto t = views::seatTable(json::array({v3d, freshSeat()}), o);
  ASSERT_EQ(t.size(), 4u) << t.back();
  EXPECT_EQ(t[3].substr(0, t[3].find_last_not_of(' ') + 1),
            "  0123456789ab v3d-job: 16.0G in region memory not counted as GPU memory "
            "(host-charged: shmem pages the cgroup's memory.current already holds)");
  v3d["fresh"] = false;
  EXPECT_EQ(views::seatTable(json::array({v3d}), o).size(), 2u) << "a stale row says nothing now";
  o.width = 60;  // cut at a word, never mid-word
  v3d["fresh"] = true;
  auto narrow = views::seatTable(json::array({v3d}), o);
  ASSERT_EQ(narrow.size(), 3u);
  EXPECT_LE(narrow[2].size(), 60u + 2);
  EXPECT_EQ(narrow[2].rfind("  0123456789ab v3d-job: 16.0G in region memory", 0), 0u) << narrow[2];
}

}  // namespace
}  // namespace tally
