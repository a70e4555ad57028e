// Issue 48's load suite, the attacks on what the daemon walks and writes: (d)
// wide cgroup trees against the walk budget and (e) large records against the
// ledger's budgets. The fixture: load_fixture.h. VM harness only.
#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ledger/kinds.h"
#include "load_fixture.h"

namespace tally {
namespace {

using namespace tally::vmload;

// (d) Wide cgroup trees: each user makes a tree of 1,263 cgroups in a
// directory delegated to her, attaches its two subtrees (421 and 841
// cgroups) and 9 child leases under the first, then grows the second by 300
// cgroups past her walk budget (mkdir below a cgroup she owns needs no
// privilege). The daemon walks her leases' trees every sample round
// (kernel_charge = false: without the kernel charge, as on a kernel
// without the BPF LSM, every round walks every tree). Budgets configured to
// the VM's size: max_cgroups_walked_per_uid = 1,024 and
// max_children_per_lease = 8.
TEST_F(VmLoad, WideCgroupTrees) {
  writeConfig(
      "kernel_charge = false\nmax_cgroups_walked_per_uid = 1024\n"
      "max_children_per_lease = 8\n");
  std::map<uid_t, std::string> dirs;
  for (const User* u : {&userA(), &userB()}) dirs[u->uid] = delegate(*u);
  ASSERT_NO_FATAL_FAILURE(startDaemon());
  std::string witnessLease = witness();
  ASSERT_FALSE(witnessLease.empty());
  std::vector<double> idle, under;
  {
    Conn root(socket_);
    ASSERT_NO_FATAL_FAILURE(hellos(root, 100, idle));
  }
  // Cgroups made by her below `top`: <prefix><first..last>, each with `leaves` l<n>.
  auto grow = [](const std::string& top, const std::string& prefix, int first, int last,
                 int leaves) {
    return [=](Attacker::Signals&) -> json {
      int made = 0;
      for (int g = first; g <= last; ++g) {
        std::string group = fmt::format("{}/{}{}", top, prefix, g);
        made += ::mkdir(group.c_str(), 0755) == 0 ? 1 : 0;
        for (int l = 0; l < leaves; ++l)
          made += ::mkdir(fmt::format("{}/l{}", group, l).c_str(), 0755) == 0 ? 1 : 0;
      }
      return {{"made", made}};
    };
  };
  auto t0 = Clock::now();
  for (const User* u : {&userA(), &userB()}) {
    // t1 and t2 themselves, then their trees: 20 x 20 and 40 x 20 cgroups.
    json roots = Attacker(*u, grow(dirs[u->uid], "t", 1, 2, 0)).finish();
    json t1 = Attacker(*u, grow(dirs[u->uid] + "/t1", "g", 0, 19, 20)).finish();
    json t2 = Attacker(*u, grow(dirs[u->uid] + "/t2", "g", 0, 39, 20)).finish();
    ASSERT_EQ(roots.value("made", 0) + t1.value("made", 0) + t2.value("made", 0), 2 + 420 + 840)
        << roots << t1 << t2;
    // Her processes: one in t2, one in each of nine leaves of t1 (the children's).
    ASSERT_GT(sleeper(dirs[u->uid] + "/t2/g0/l0", u), 0);
    for (int k = 0; k < 9; ++k)
      ASSERT_GT(sleeper(fmt::format("{}/t1/g{}/l0", dirs[u->uid], k), u), 0);
  }
  double builtS = msSince(t0) / 1000.0;
  phase("trees");
  const std::string sock = socket_;
  auto attach = [sock](const std::string& rel) {
    return [sock, rel](Attacker::Signals&) -> json {
      Conn c(sock);
      auto call = [&](const json& params) {
        auto r = c.call("attach", params, kAttackerMs);
        return r ? r->msg : json{{"error", "no answer"}};
      };
      json out;
      out["whole"] =
          call({{"pools", {"load"}}, {"cgroup", rel}, {"name", "whole"}, {"no_wait", true}});
      out["t1"] =
          call({{"pools", {"load"}}, {"cgroup", rel + "/t1"}, {"name", "t1"}, {"no_wait", true}});
      out["t2"] =
          call({{"pools", {"load"}}, {"cgroup", rel + "/t2"}, {"name", "t2"}, {"no_wait", true}});
      std::string parent =
          out["t1"].value("ok", false) ? out["t1"]["result"].value("lease", "") : "";
      json children = json::array();
      for (int k = 0; k < 9; ++k)
        children.push_back(call({{"parent", parent},
                                 {"cgroup", fmt::format("{}/t1/g{}/l0", rel, k)},
                                 {"name", fmt::format("step{}", k)}}));
      out["children"] = children;
      return out;
    };
  };
  std::map<uid_t, std::string> t1Of, t2Of;
  for (const User* u : {&userA(), &userB()}) {
    json r =
        Attacker(*u, attach(dirs[u->uid].substr(std::string("/sys/fs/cgroup").size()))).finish();
    ASSERT_FALSE(r.contains("error")) << r;
    // The whole tree, wider than her walk budget, is refused at attach, named.
    EXPECT_EQ(codeOf(r["whole"]), "refused") << r["whole"];
    EXPECT_NE(r["whole"]
                  .value("/error/message"_json_pointer, "")
                  .find("cgroups (max_cgroups_walked_per_uid)"),
              std::string::npos)
        << r["whole"];
    ASSERT_TRUE(r["t1"].value("ok", false)) << r["t1"];
    ASSERT_TRUE(r["t2"].value("ok", false)) << r["t2"];
    t1Of[u->uid] = r["t1"]["result"].value("lease", "");
    t2Of[u->uid] = r["t2"]["result"].value("lease", "");
    for (std::size_t k = 0; k < 8; ++k)
      EXPECT_TRUE(r["children"][k].value("ok", false)) << r["children"][k];
    EXPECT_EQ(codeOf(r["children"][8]), "busy") << r["children"][8];
    EXPECT_NE(r["children"][8]
                  .value("/error/message"_json_pointer, "")
                  .find("child leases (max_children_per_lease)"),
              std::string::npos)
        << r["children"][8];
    // Then she grows t2 past her budget: 841 + 15 x 20 = 1,141 cgroups.
    json more = Attacker(*u, grow(dirs[u->uid] + "/t2", "x", 0, 14, 19)).finish();
    ASSERT_EQ(more.value("made", 0), 300) << more;
  }
  phase("attaches");
  // The barrier: each user's t2 has no GPU figure, the reason naming her
  // budget (its walk stops at it), while her narrower t1 is still walked
  // and read: one wide tree does not leave her other leases unmetered.
  const std::string reason = "max_cgroups_walked_per_uid = 1024";
  auto budgetBites = [&] {
    Conn root(socket_);
    auto r = root.call("leases");
    if (!r || !r->msg.value("ok", false)) return false;
    std::size_t seen = 0;
    for (const auto& l : r->msg["result"]["leases"]) {
      std::string id = l.value("lease", "");
      for (const User* u : {&userA(), &userB()}) {
        if (id == t2Of[u->uid] &&
            l.value("/gpu/unknown"_json_pointer, "").find(reason) != std::string::npos)
          ++seen;
        if (id == t1Of[u->uid] && l.value("/gpu/current_bytes"_json_pointer, json()).is_number())
          ++seen;
      }
    }
    return seen == 4;
  };
  ASSERT_TRUE(eventually(budgetBites, 60s)) << "no t2 ran out of its owner's walk budget";
  phase("barrier");
  std::uint64_t samplesBefore = samplesOf(witnessLease);
  std::uint64_t t1Before = samplesOf(t1Of[userA().uid]);
  ASSERT_NO_FATAL_FAILURE(probeUnderAttack({}, 1 + 2 * (2 + 8), under));
  std::uint64_t samplesAfter = samplesOf(witnessLease);
  std::uint64_t t1After = samplesOf(t1Of[userA().uid]);
  EXPECT_GE(samplesAfter, samplesBefore + 2) << "the daemon sampled on during the attack";
  EXPECT_GE(t1After, t1Before + 2) << "her tree was sampled on";
  EXPECT_TRUE(budgetBites()) << "after the probes too";
  expectWatchdogHeld();
  expectChainIntact();
  figures("(d) trees of 421 and 1,141 cgroups and 8 children each", idle, under,
          fmt::format("each user's trees made and populated in {:.0f} s; each user: the whole "
                      "tree refused at attach, 8 children then 1 busy (max_children_per_lease), "
                      "t2 grown past max_cgroups_walked_per_uid = 1,024 after its attach (its "
                      "GPU figure absent, the reason naming the budget; t1's read); witness "
                      "sampled {} times, uid {}'s t1 {} times meanwhile",
                      builtS, samplesAfter - samplesBefore, userA().uid, t1After - t1Before));
}

std::uint64_t fileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

// (e) Ledger bytes: each user runs leases as fast as the daemon takes them,
// each `complete` carrying a client record of 110+ KB, for as long as the
// test probes. User a's records keep 4 KiB of command (a row of ~5 KB: the
// bytes budget), user b's keep none (a small row: the rows budget). Budgets
// configured to the VM's pace: ledger_bytes_per_minute_per_uid = 64 KiB (its
// least), ledger_rows_per_minute_per_uid = 60.
TEST_F(VmLoad, LargeRecordsAgainstTheLedgerBudgets) {
  constexpr std::uint64_t kBytesBudget = 64 * 1024, kRowsBudget = 60, kRowLimit = 8 * 1024;
  writeConfig(
      fmt::format("ledger_bytes_per_minute_per_uid = {}\nledger_rows_per_minute_per_uid = "
                  "{}\n",
                  kBytesBudget, kRowsBudget));
  std::map<uid_t, std::string> dirs;
  for (const User* u : {&userA(), &userB()}) dirs[u->uid] = delegate(*u);
  ASSERT_NO_FATAL_FAILURE(startDaemon());
  std::string witnessLease = witness();
  ASSERT_FALSE(witnessLease.empty());
  const std::string db = state_ + "/ledger.sqlite";
  std::vector<double> idle, under;
  {
    Conn root(socket_);
    ASSERT_NO_FATAL_FAILURE(hellos(root, 100, idle));
  }
  const std::uint64_t before = fileSize(db) + fileSize(db + "-wal");
  const std::string sock = socket_;
  auto attack = [sock](const std::string& dir, bool keptCommand) {
    return [sock, dir, keptCommand](Attacker::Signals& sig) -> json {
      const std::string rel = dir.substr(std::string("/sys/fs/cgroup").size());
      json command = json::array();
      json declared = json::object();
      if (keptCommand) {
        for (int i = 0; i < 40; ++i) command.push_back(std::string(100, 'x'));
        for (int i = 0; i < 20'000; ++i) command.push_back("");
        declared["oom_policy"] = std::string(50'000, 'p');
      } else {
        command.push_back("true");
        declared["oom_policy"] = std::string(112'000, 'p');
      }
      Conn c(sock);
      if (!c.connected()) return {{"error", "connect"}};
      int leases = 0, timeouts = 0;
      std::uint64_t sent = 0, smallest = UINT64_MAX;
      std::map<std::string, int> refused;
      std::string refusal, failed;
      while (!sig.stopped() && !timeouts && failed.empty()) {
        auto a = c.call("acquire", {{"pools", {"load"}}}, kAttackerMs);
        if (!a) {
          ++timeouts;
          break;
        }
        if (!a->msg.value("ok", false)) {
          ++refused[codeOf(a->msg)];
          refusal = a->msg["error"].value("message", "");
          sig.ready();  // her budget is spent: the attack is at its worst from here
          continue;
        }
        std::string lease = a->msg["result"].value("lease", "");
        std::string cg = rel + "/run-" + lease;
        if (::mkdir((dir + "/run-" + lease).c_str(), 0755) != 0) {
          failed = "mkdir " + cg;
          break;
        }
        auto s = c.call("started", {{"lease", lease}, {"cgroup", cg}}, kAttackerMs);
        if (!s || !s->msg.value("ok", false)) {
          failed = "started: " + (s ? s->msg.dump() : std::string("no answer"));
          break;
        }
        json record = {
            {"lease", {{"id", lease}, {"command", command}}},
            {"declared", declared},
            {"outcome", {{"class", "exited"}, {"exit_code", 0}, {"summary", "exited 0"}}}};
        std::uint64_t bytes = record.dump().size();
        auto done = c.call("complete", {{"lease", lease}, {"record", record}}, kAttackerMs);
        if (!done || !done->msg.value("ok", false)) {
          failed =
              "complete: " + (done ? done->msg.dump().substr(0, 300) : std::string("no answer"));
          break;
        }
        ::rmdir((dir + "/run-" + lease).c_str());
        sent += bytes;
        smallest = std::min(smallest, bytes);
        ++leases;
      }
      return {{"leases", leases},   {"sent", sent},       {"smallest_record", smallest},
              {"refused", refused}, {"refusal", refusal}, {"timeouts", timeouts},
              {"failed", failed}};
    };
  };
  auto t0 = Clock::now();
  Attacker a(userA(), attack(dirs[userA().uid], true)),
      b(userB(), attack(dirs[userB().uid], false));
  ASSERT_NO_FATAL_FAILURE(awaitAttacks({&a, &b}));
  std::uint64_t samplesBefore = samplesOf(witnessLease);
  ASSERT_NO_FATAL_FAILURE(probeUnderAttack({&a, &b}, 1, under));
  std::uint64_t samplesAfter = samplesOf(witnessLease);
  json ra = a.finish(), rb = b.finish();
  const double took = msSince(t0) / 1000.0;
  EXPECT_GE(samplesAfter, samplesBefore + 2) << "the daemon sampled on during the attack";
  expectWatchdogHeld();
  for (const auto& [r, key] :
       {std::pair<const json*, const char*>{&ra, "ledger_bytes_per_minute_per_uid"},
        {&rb, "ledger_rows_per_minute_per_uid"}}) {
    EXPECT_FALSE(r->contains("error")) << *r;
    EXPECT_EQ(r->value("failed", "?"), "") << *r;
    EXPECT_GT(r->value("leases", 0), 0) << *r;
    EXPECT_GE(r->value("smallest_record", std::uint64_t{0}), 110'000u) << *r;
    EXPECT_GT((*r)["refused"].value("rate-limited", 0), 0) << *r;
    EXPECT_EQ((*r)["refused"].size(), 1u) << *r;
    EXPECT_NE(r->value("refusal", "").find(std::string("(") + key + ")"), std::string::npos) << *r;
    EXPECT_EQ(r->value("timeouts", -1), 0) << *r;
  }
  // What each user's leases wrote: every row bounded whatever the client
  // sent, and no more a minute than her budgets (plus what her last lease
  // still wrote once it existed).
  auto exported = runProgram({kTally, "ledger", "export", "--config", config_});
  json rows = json::parse(exported.out, nullptr, false);
  ASSERT_TRUE(rows.is_array()) << exported.err;
  std::map<std::string, uid_t> owner;
  std::map<uid_t, std::uint64_t> bytesOf, rowsOf, largest;
  std::uint64_t outcomes = 0;
  for (const auto& row : rows) {
    std::string lease = row.value("lease", "");
    if (row["kind"] == ledger::kGranted) owner[lease] = row["body"].value("owner_uid", uid_t{0});
    uid_t uid = owner.count(lease) ? owner[lease] : 0;
    if (uid == 0) continue;
    std::uint64_t size = row["body"].dump().size();
    bytesOf[uid] += size;
    ++rowsOf[uid];
    largest[uid] = std::max(largest[uid], size);
    EXPECT_LT(size, kRowLimit) << row.dump().substr(0, 400);
    if (row["kind"] == ledger::kOutcome) {
      ++outcomes;
      EXPECT_GE(row["body"].value("/client/bytes"_json_pointer, std::uint64_t{0}), 110'000u)
          << row["body"].dump().substr(0, 400);
    }
  }
  EXPECT_EQ(outcomes, static_cast<std::uint64_t>(ra.value("leases", 0) + rb.value("leases", 0)));
  const double minutes = 1.0 + took / 60.0;  // the budget a minute, refilled over the attack
  for (const User* u : {&userA(), &userB()}) {
    EXPECT_LE(static_cast<double>(bytesOf[u->uid]),
              static_cast<double>(kBytesBudget) * minutes + 3.0 * kRowLimit)
        << u->name;
    EXPECT_LE(static_cast<double>(rowsOf[u->uid]), static_cast<double>(kRowsBudget) * minutes + 3.0)
        << u->name;
  }
  // The disk: the ledger's files once the daemon stopped (its WAL
  // checkpointed) grew by no more than the two budgets let the users write,
  // twice over for SQLite's pages and indexes, and 256 KiB for root's rows
  // and the samples of the attack's seconds.
  ASSERT_EQ(shell("systemctl stop " + unit_), 0);
  const std::uint64_t after = fileSize(db) + fileSize(db + "-wal");
  const double allowed =
      2.0 * 2.0 * (static_cast<double>(kBytesBudget) * minutes + 3.0 * kRowLimit) + 256.0 * 1024.0;
  EXPECT_LE(static_cast<double>(after) - static_cast<double>(before), allowed)
      << "the ledger grew from " << before << " to " << after << " bytes";
  expectChainIntact();
  figures("(e) run leases with 110+ KB records each", idle, under,
          fmt::format("in {:.0f} s: uid {} {} leases ({:.1f} MiB of records sent; ledger rows "
                      "{}, {} bytes, largest {} B), then rate-limited x{} (bytes budget); uid {} "
                      "{} leases ({:.1f} MiB sent; rows {}, {} bytes, largest {} B), then "
                      "rate-limited x{} (rows budget); ledger files {} KiB before, {} KiB after "
                      "(stopped)",
                      took, userA().uid, ra.value("leases", 0),
                      static_cast<double>(ra.value("sent", std::uint64_t{0})) / 1048576.0,
                      rowsOf[userA().uid], bytesOf[userA().uid], largest[userA().uid],
                      ra["refused"].value("rate-limited", 0), userB().uid, rb.value("leases", 0),
                      static_cast<double>(rb.value("sent", std::uint64_t{0})) / 1048576.0,
                      rowsOf[userB().uid], bytesOf[userB().uid], largest[userB().uid],
                      rb["refused"].value("rate-limited", 0), before / 1024, after / 1024));
}

}  // namespace
}  // namespace tally
