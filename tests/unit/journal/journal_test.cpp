// The journal's lifecycle entries: each outcome's message and fields, with
// what the record lacks left out, never sent as 0.
#include "journal/journal.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/fake_host.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST(LifecycleJournal, AnOutcomeCarriesItsFiguresAndLeavesOutWhatItLacks) {
  json record = {{"lease",
                  {{"id", "0123456789ab"},
                   {"unit", "tally-0123456789ab.scope"},
                   {"cgroup", "/tally.slice/x.scope"}}},
                 {"outcome",
                  {{"class", "oom-killed"},
                   {"exit_code", 137},
                   {"oom_kill", 1},
                   {"summary", "the kernel OOM-killed it"}}},
                 {"memory", {{"peak_bytes", 4 * GiB}}},
                 {"gpu", {{"samples", 3}}}};
  auto e = journal::lifecycleEntry("outcome", "0123456789ab", "train", {"gpu", "big"}, record, {},
                                   {"tally-0123456789ab.scope", "/tally.slice/x.scope"});
  EXPECT_EQ(e.priority, 4);
  EXPECT_EQ(e.message, "lease 0123456789ab (train): oom-killed: the kernel OOM-killed it");
  std::map<std::string, std::string> f(e.fields.begin(), e.fields.end());
  EXPECT_EQ(f["TALLY_EVENT"], "lease-outcome");
  EXPECT_EQ(f["TALLY_POOL"], "gpu,big");
  EXPECT_EQ(f["TALLY_OUTCOME"], "oom-killed");
  EXPECT_EQ(f["TALLY_EXIT_CODE"], "137");
  EXPECT_EQ(f["TALLY_OOM_KILLS"], "1");
  EXPECT_EQ(f["TALLY_MEMORY_PEAK_BYTES"], "4294967296");
  EXPECT_EQ(f["TALLY_UNIT"], "tally-0123456789ab.scope");
  EXPECT_EQ(f["TALLY_CGROUP"], "/tally.slice/x.scope");
  // A record that claims another unit is not believed: the fields are the
  // daemon's verified place, or none.
  json posing = record;
  posing["lease"]["unit"] = "llama-server.service";
  auto p = journal::lifecycleEntry("outcome", "0123456789ab", "train", {}, posing);
  for (const auto& [k, v] : p.fields) EXPECT_NE(k, "TALLY_UNIT") << v;
  EXPECT_EQ(f.count("TALLY_GPU_PEAK_BYTES"), 0u);  // the record has no GPU peak: no field, not 0
  EXPECT_EQ(f.count("TALLY_MEMORY_PEAK_SAMPLED_BYTES"), 0u);  // the kernel's peak was read

  // The cgroup was gone before memory.peak could be read: the samples' peak, under its own name.
  json gone = record;
  gone["memory"] = {{"peak_unknown", "memory.peak: No such file or directory"},
                    {"sampled", {{"peak_current_bytes", 3 * GiB}}}};
  auto goneEntry = journal::lifecycleEntry("outcome", "0123456789ab", "train", {}, gone);
  std::map<std::string, std::string> gf(goneEntry.fields.begin(), goneEntry.fields.end());
  EXPECT_EQ(gf.count("TALLY_MEMORY_PEAK_BYTES"), 0u);
  EXPECT_EQ(gf["TALLY_MEMORY_PEAK_SAMPLED_BYTES"], "3221225472");

  record["outcome"] = {{"class", "exited"}, {"exit_code", 0}};
  EXPECT_EQ(journal::lifecycleEntry("outcome", "0123456789ab", "train", {}, record).priority, 6);
  record["outcome"]["exit_code"] = 3;
  EXPECT_EQ(journal::lifecycleEntry("outcome", "0123456789ab", "train", {}, record).priority, 5);
  auto granted = journal::lifecycleEntry("granted", "0123456789ab", "train", {}, json::object());
  std::map<std::string, std::string> g(granted.fields.begin(), granted.fields.end());
  EXPECT_EQ(g.count("TALLY_POOL"), 0u);  // a standalone lease has no pool
  EXPECT_EQ(g.count("TALLY_OUTCOME"), 0u);
  // Declared attributes (a Slurm step's ids) are fields of every entry of the lease.
  auto slurm = journal::lifecycleEntry("outcome", "0123456789ab", "slurm-42.0", {"slurm"}, record,
                                       {{"slurm_job_id", "42"}, {"slurm_step_id", "0"}});
  std::map<std::string, std::string> sf(slurm.fields.begin(), slurm.fields.end());
  EXPECT_EQ(sf["TALLY_ATTR_SLURM_JOB_ID"], "42");
  EXPECT_EQ(sf["TALLY_ATTR_SLURM_STEP_ID"], "0");
  EXPECT_EQ(g.count("TALLY_ATTR_SLURM_JOB_ID"), 0u);  // none declared, none sent
  auto lost = journal::lifecycleEntry("lost", "0123456789ab", "train", {"gpu"},
                                      json{{"outcome", "not an object"}});
  std::map<std::string, std::string> l(lost.fields.begin(), lost.fields.end());
  EXPECT_EQ(l["TALLY_OUTCOME"], "lost");
  EXPECT_EQ(journal::lifecycleEntry("outcome", "x", "y", {}, json("garbage")).message,
            "lease x (y): unknown");
}

}  // namespace
}  // namespace tally
