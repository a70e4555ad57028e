// Issue 48's load suite: each attack of two ordinary users against the daemon
// as production runs it (systemd-run: Type=notify, WatchdogSec=30s as the
// shipped unit has it, Restart=always), on a real systemd, a real cgroup v2
// and the VM's ledger. The attackers are users made here and removed at the
// end (tally-load-a and tally-load-b, members of the socket's group
// tally-load; names no host has), forked children of the test that drop to
// their uids. Root, and a third user who attacks nothing (tally-load-c), ask
// meanwhile. Asserted: every probe is answered within 10 s (a liveness bound,
// a third of the watchdog's 30 s, never a speed), root's listings page through
// every lease with each reply under the 4 MiB a reply may be, the watchdog
// held (NRestarts 0, the same MainPID, no "Watchdog timeout" in the unit's
// journal), the daemon sampled on, each attacker's refusals name the budget,
// and the ledger stays bounded and verifies. Root's `hello` latencies, idle
// and under each attack, are printed as `[ bench ]` lines: figures, not
// assertions (docs/PERFORMANCE.md, "The load suite"). VM harness only.
// Here the listing, replay and history-query attacks, (a) to (c); the cgroup
// tree and ledger-bytes attacks, (d) and (e): load_tree_ledger_test.cpp. The
// fixture: load_fixture.h.
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lease/spec.h"
#include "ledger/kinds.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"
#include "load_fixture.h"

namespace tally {
namespace {

using namespace tally::vmload;

constexpr std::uint64_t kSecondNs = 1'000'000'000ULL;

std::uint64_t realtimeNs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::string countsText(const json& codes) {
  std::string out;
  if (!codes.is_object()) return "none";
  for (const auto& [k, v] : codes.items())
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", v.dump(), k);
  return out.empty() ? "none" : out;
}

// (a) Many leases, then whole listings: each user takes leases until
// max_leases_per_uid (256) refuses her, then asks for the listings
// (`pools`, and `leases`, `seats`, `overview`, `metrics` of 512 leases a
// page) 24 at a time for as long as the test probes;
// queries_per_second_per_uid answers the rest `rate-limited`.
TEST_F(VmLoad, ManyLeasesThenWholeListings) {
  writeConfig(queryBudget());
  ASSERT_NO_FATAL_FAILURE(startDaemon());
  std::string witnessLease = witness();
  ASSERT_FALSE(witnessLease.empty());
  std::vector<double> idle, under;
  {
    Conn root(socket_);
    ASSERT_NO_FATAL_FAILURE(hellos(root, 100, idle));
  }
  json attrs = json::object();  // each lease a row of a listing, ~1 KiB with these
  for (int k = 0; k < 4; ++k) attrs[fmt::format("note{}", k)] = std::string(200, 'n');
  const std::string sock = socket_;
  auto attack = [sock, attrs](Attacker::Signals& sig) -> json {
    json out;
    Conn c(sock);
    if (!c.connected()) return {{"error", "connect"}};
    std::string all;
    for (int i = 0; i < 257; ++i)
      all += request(i, "acquire", {{"pools", {"load"}}, {"attributes", attrs}});
    if (!c.send(all)) return {{"error", "send"}};
    int timeouts = 0;
    Replies acquires;
    if (!acquires.read(c, 257, false)) ++timeouts;
    out["granted"] = acquires.answered;
    out["acquire_refused"] = acquires.refused;
    out["acquire_refusal"] = acquires.refusal;
    sig.ready();
    Replies listed;
    int rounds = 0;
    std::int64_t id = 1000;
    while (!sig.stopped() && !timeouts) {
      // Eight `pools` in one write (read in one turn, their replies small:
      // past the budget's burst at 2 a second, whatever the VM's pace),
      // then the four whole listings four times over.
      all.clear();
      for (int i = 0; i < 8; ++i) all += request(id++, "pools");
      for (int i = 0; i < 4; ++i)
        for (const char* m : {"leases", "seats", "overview", "metrics"}) all += request(id++, m);
      if (!c.send(all)) return {{"error", "send listings"}};
      if (!listed.read(c, 24, true)) ++timeouts;
      ++rounds;
    }
    out["listings_ok"] = listed.answered;
    out["listings_refused"] = listed.refused;
    out["listings_refusal"] = listed.refusal;
    out["rounds"] = rounds;
    out["biggest_reply"] = listed.biggest;
    out["timeouts"] = timeouts;
    return out;
  };
  auto t0 = Clock::now();
  Attacker a(userA(), attack), b(userB(), attack);
  ASSERT_NO_FATAL_FAILURE(awaitAttacks({&a, &b}));
  std::uint64_t samplesBefore = samplesOf(witnessLease);
  ASSERT_NO_FATAL_FAILURE(probeUnderAttack({&a, &b}, 2 * 256 + 1, under));
  std::uint64_t samplesAfter = samplesOf(witnessLease);
  json ra = a.finish(), rb = b.finish();
  double took = msSince(t0) / 1000.0;
  for (const json* r : {&ra, &rb}) {
    EXPECT_FALSE(r->contains("error")) << *r;
    EXPECT_EQ(r->value("granted", 0), 256) << *r;
    EXPECT_EQ((*r)["acquire_refused"], json({{"busy", 1}})) << *r;
    EXPECT_NE(r->value("acquire_refusal", "").find("leases, waiting or held (max_leases_per_uid)"),
              std::string::npos)
        << *r;
    EXPECT_GT(r->value("listings_ok", 0), 0) << *r;
    expectRefusedForQueries(*r, "listings_refused", "listings_refusal");
    EXPECT_EQ(r->value("timeouts", -1), 0) << "her own requests are answered too: " << *r;
  }
  EXPECT_GE(samplesAfter, samplesBefore + 2) << "the daemon sampled on during the attack";
  expectWatchdogHeld();
  expectChainIntact();
  figures("(a) 256 leases each, then whole listings", idle, under,
          fmt::format("each user: 256 leases then 1 busy (max_leases_per_uid); listings with "
                      "{} for {:.0f} s: uid {} {} answered, {}; "
                      "uid {} {} answered, {}; witness lease sampled {} times meanwhile",
                      queryBudgetText(), took, userA().uid, ra.value("listings_ok", 0),
                      countsText(ra["listings_refused"]), userB().uid, rb.value("listings_ok", 0),
                      countsText(rb["listings_refused"]), samplesAfter - samplesBefore));
}

// (b) Replays: each user subscribes from the ledger's first row on 64
// connections at once, and again on those refused once the replays under
// way end, for as long as the test probes; max_replays_per_uid (4) answers
// the rest `busy`. The ledger holds 3,000 rows (1,000 leases granted,
// released and withdrawn), written before the daemon starts with the
// ledger's own API and row encoders: what root's acquire-and-release
// cycles leave, in seconds instead of minutes of TCG.
TEST_F(VmLoad, ReplaysFromTheFirstRow) {
  writeConfig("");
  constexpr int kLeases = 1000;
  {
    auto db = ledger::Ledger::open(state_);
    ASSERT_TRUE(db) << db.error().message;
    for (int i = 0; i < kLeases; ++i) {
      std::string id = lease::newLeaseId();
      ledger::GrantedRow g;
      g.declaration.name = fmt::format("job-{}", i);
      g.pools = {"load"};
      g.requestedAtNs = realtimeNs();
      ASSERT_TRUE(db->appendEvent(id, ledger::kGranted, ledger::encode(g).dump()));
      ASSERT_TRUE(
          db->appendEvent(id, ledger::kReleased, ledger::encode(ledger::ReleasedRow{0, 1}).dump()));
      ASSERT_TRUE(db->appendEvent(
          id, ledger::kWithdrawn,
          ledger::encode(ledger::WithdrawnRow{"released by uid 0 before it started"}).dump()));
    }
  }
  phase("ledger");
  ASSERT_NO_FATAL_FAILURE(startDaemon());
  std::string witnessLease = witness();
  ASSERT_FALSE(witnessLease.empty());
  std::vector<double> idle, under;
  {
    Conn root(socket_);
    ASSERT_NO_FATAL_FAILURE(hellos(root, 100, idle));
  }
  const std::string sock = socket_;
  auto attack = [sock](Attacker::Signals& sig) -> json {
    constexpr std::size_t kConns = 64;
    std::vector<std::unique_ptr<Conn>> conns;
    std::vector<char> following, dead;
    auto connectAll = [&] {
      conns.clear();
      for (std::size_t i = 0; i < kConns; ++i) conns.push_back(std::make_unique<Conn>(sock));
      following.assign(kConns, 0);
      dead.assign(kConns, 0);
    };
    connectAll();
    int accepted = 0, busyReplays = 0, busyConnections = 0, timeouts = 0, truncated = 0, rounds = 0;
    std::uint64_t fewestRows = UINT64_MAX, mostRows = 0;
    std::map<std::string, int> other;
    std::string refusal;
    std::int64_t id = 0;
    while (!sig.stopped() && !timeouts) {
      std::vector<std::size_t> asked, replaying;
      for (std::size_t i = 0; i < kConns; ++i) {
        if (following[i] || dead[i]) continue;
        if (conns[i]->connected() && conns[i]->send(request(++id, "subscribe", {{"after_seq", 0}})))
          asked.push_back(i);
        else
          dead[i] = 1;
      }
      if (asked.empty()) {  // every connection follows (or was refused): afresh
        connectAll();
        continue;
      }
      for (std::size_t i : asked) {
        auto r = conns[i]->reply(kAttackerMs);
        if (!r) {
          dead[i] = 1;  // closed: a connection over max_connections_per_uid said so first
          continue;
        }
        if (r->msg.value("ok", false)) {
          ++accepted;
          following[i] = 1;
          if (r->msg["result"].value("replaying", false)) replaying.push_back(i);
          continue;
        }
        std::string message = r->msg["error"].value("message", "");
        if (codeOf(r->msg) == "busy" && message.find("max_replays_per_uid") != std::string::npos) {
          ++busyReplays;
          refusal = message;
        } else if (codeOf(r->msg) == "busy") {
          ++busyConnections;
          dead[i] = 1;
        } else {
          ++other[codeOf(r->msg)];
        }
      }
      sig.ready();  // (after the first round's answers) the replays are under way
      // Every replay drained at once, as a follower reading all her
      // connections would: none waits on her reading another. Only the
      // `replayed` line is parsed (her CPU is the daemon's here).
      std::vector<std::size_t> open = replaying;
      while (!open.empty() && !sig.stopped()) {
        std::vector<pollfd> fds;
        for (std::size_t i : open) fds.push_back({conns[i]->fd(), POLLIN, 0});
        if (::poll(fds.data(), fds.size(), kAttackerMs) <= 0) {
          ++timeouts;
          break;
        }
        std::vector<std::size_t> still;
        for (std::size_t i : open) {
          bool done = false;
          while (auto t = conns[i]->text(0)) {
            if (t->find("\"event\":\"replayed\"") == std::string::npos) continue;
            json m = json::parse(*t, nullptr, false);
            std::uint64_t rows = m.value("rows", std::uint64_t{0});
            fewestRows = std::min(fewestRows, rows);
            mostRows = std::max(mostRows, rows);
            if (m.value("truncated", false)) ++truncated;
            done = true;
            break;
          }
          if (!done && conns[i]->closed()) {
            ++timeouts;  // closed before its replay ended
            done = true;
          }
          if (!done) still.push_back(i);
        }
        open = still;
      }
      ++rounds;
    }
    return {{"accepted", accepted},
            {"busy_replays", busyReplays},
            {"busy_connections", busyConnections},
            {"other", other},
            {"refusal", refusal},
            {"timeouts", timeouts},
            {"truncated", truncated},
            {"fewest_rows", fewestRows},
            {"most_rows", mostRows},
            {"rounds", rounds}};
  };
  auto t0 = Clock::now();
  Attacker a(userA(), attack), b(userB(), attack);
  ASSERT_NO_FATAL_FAILURE(awaitAttacks({&a, &b}));
  std::uint64_t samplesBefore = samplesOf(witnessLease);
  phase("setup");
  // Root's own replay from the first row meanwhile: every line within 10 s.
  double rootReplayMs = 0;
  std::uint64_t rootRows = 0;
  {
    Conn root(socket_);
    auto t = Clock::now();
    auto r = root.call("subscribe", {{"after_seq", 0}});
    ASSERT_TRUE(r && r->msg.value("ok", false)) << (r ? r->msg.dump() : "no answer in 10 s");
    for (;;) {
      auto l = root.line(kAnswerMs);
      ASSERT_TRUE(l) << "root's replay stalled for 10 s";
      if (l->msg.value("event", "") != "replayed") continue;
      rootRows = l->msg.value("rows", std::uint64_t{0});
      EXPECT_FALSE(l->msg.value("truncated", true)) << l->msg;
      break;
    }
    rootReplayMs = msSince(t);
  }
  phase("root's replay");
  EXPECT_GE(rootRows, 3u * kLeases);
  // Two rounds: each hello waits for a turn of replay slices here.
  ASSERT_NO_FATAL_FAILURE(probeUnderAttack({&a, &b}, 1, under, 2));
  std::uint64_t samplesAfter = samplesOf(witnessLease);
  json ra = a.finish(), rb = b.finish();
  double took = msSince(t0) / 1000.0;
  for (const json* r : {&ra, &rb}) {
    EXPECT_FALSE(r->contains("error")) << *r;
    EXPECT_GE(r->value("accepted", 0), 4) << *r;
    EXPECT_GT(r->value("busy_replays", 0), 0) << *r;
    // Refused whenever 4 were under way: never more than the budget at once.
    EXPECT_NE(r->value("refusal", "")
                  .find("already has 4 replays of the ledger under way (the "
                        "daemon's max_replays_per_uid)"),
              std::string::npos)
        << *r;
    EXPECT_TRUE((*r)["other"].empty()) << *r;
    EXPECT_EQ(r->value("timeouts", -1), 0) << *r;
    EXPECT_EQ(r->value("truncated", -1), 0) << *r;
    EXPECT_GE(r->value("fewest_rows", std::uint64_t{0}), 3u * kLeases) << *r;
  }
  EXPECT_GE(samplesAfter, samplesBefore + 2) << "the daemon sampled on during the attack";
  expectWatchdogHeld();
  expectChainIntact();
  figures(
      "(b) 64 replays from the first row each", idle, under,
      fmt::format("{} rows in the ledger; in {:.0f} s uid {} had {} replays served and {} "
                  "refused busy (max_replays_per_uid), uid {} {} and {}; connections "
                  "refused (max_connections_per_uid) {} and {}; root's own replay of {} "
                  "rows took {:.0f} ms meanwhile; witness lease sampled {} times",
                  rootRows, took, userA().uid, ra.value("accepted", 0), ra.value("busy_replays", 0),
                  userB().uid, rb.value("accepted", 0), rb.value("busy_replays", 0),
                  ra.value("busy_connections", 0), rb.value("busy_connections", 0), rootRows,
                  rootReplayMs, samplesAfter - samplesBefore));
}

// (c) Pipelined history queries: each user sends 1,024 `lease` queries at
// once for a lease with a long history, and again as they are answered, for
// as long as the test probes; queries_per_second_per_uid answers the rest
// `rate-limited`. The lease: root's process in a cgroup of its own, with the
// rows and samples a daemon that metered it every second for two days
// leaves (the retention policy's: one sample a minute before the last hour,
// 2,820, and every one in it, 3,600), written before the daemon starts with
// the ledger's own API and row encoders; the daemon re-adopts it at start
// and meters it on.
TEST_F(VmLoad, PipelinedQueriesForALongHistory) {
  writeConfig(queryBudget());
  const std::string cg = top_ + "/history";
  ASSERT_EQ(::mkdir(("/sys/fs/cgroup" + cg).c_str(), 0755), 0);
  ASSERT_GT(sleeper("/sys/fs/cgroup" + cg), 0);
  struct stat st {};
  ASSERT_EQ(::stat(("/sys/fs/cgroup" + cg).c_str(), &st), 0);
  const std::string history = lease::newLeaseId();
  const std::uint64_t now = realtimeNs(), minute = 60 * kSecondNs, hour = 60 * minute;
  const std::uint64_t born = (now - 48 * hour) / minute * minute;
  std::size_t written = 0;
  {
    auto db = ledger::Ledger::open(state_);
    ASSERT_TRUE(db) << db.error().message;
    ledger::GrantedRow g;
    g.kind = lease::LeaseKind::Attach;
    g.declaration.name = "history";
    g.pools = {"load"};
    g.requestedAtNs = born;
    g.target.cgroup = cg;
    ASSERT_TRUE(db->appendEvent(history, ledger::kGranted, ledger::encode(g).dump(), born));
    ledger::PlacedRow placed;
    placed.cgroup = placed.countersCgroup = cg;
    placed.inode = st.st_ino;
    placed.oomKillsAtAdoption = 0;
    ASSERT_TRUE(db->appendEvent(history, ledger::kAdopted, ledger::encode(placed).dump(),
                                born + kSecondNs));
    std::vector<ledger::Sample> samples;
    auto reading = [&](std::uint64_t at) {
      std::uint64_t mib = 48 + (at / minute) % 64;
      return ledger::Sample{history, at, mib << 20, 0, {.device = 0, .hostUncharged = 0}};
    };
    for (std::uint64_t at = born + minute; at < now - hour; at += minute)
      samples.push_back(reading(at));
    for (std::uint64_t at = now - hour; at < now; at += kSecondNs) samples.push_back(reading(at));
    written = samples.size();
    ASSERT_TRUE(db->appendSamples(samples));
  }
  phase("ledger");
  ASSERT_NO_FATAL_FAILURE(startDaemon());
  std::vector<double> idle, under;
  {
    Conn root(socket_);
    auto live = root.call("lease", {{"lease", history}, {"live", true}});
    ASSERT_TRUE(live && live->msg.value("ok", false)) << (live ? live->msg.dump() : "no answer");
    EXPECT_EQ(live->msg["result"]["state"], "running") << live->msg;
    EXPECT_EQ(live->msg["result"]["readopted_after_restart"], true) << live->msg;
    auto whole = root.call("lease", {{"lease", history}});
    ASSERT_TRUE(whole && whole->msg.value("ok", false));
    EXPECT_EQ(whole->msg["result"]["samples"].size(), ledger::kChartPoints);
    ASSERT_NO_FATAL_FAILURE(hellos(root, 100, idle));
  }
  const std::string sock = socket_;
  auto attack = [sock, history](Attacker::Signals& sig) -> json {
    Conn c(sock);
    if (!c.connected()) return {{"error", "connect"}};
    std::string all;
    for (int i = 0; i < 1024; ++i) all += request(i, "lease", {{"lease", history}});
    int timeouts = 0, rounds = 0;
    Replies queries;
    while (!sig.stopped() && !timeouts) {
      if (!c.send(all)) return {{"error", "send"}};
      sig.ready();
      if (!queries.read(c, 1024, true)) ++timeouts;
      ++rounds;
    }
    return {{"answered", queries.answered},
            {"refused", queries.refused},
            {"refusal", queries.refusal},
            {"timeouts", timeouts},
            {"rounds", rounds}};
  };
  auto t0 = Clock::now();
  Attacker a(userA(), attack), b(userB(), attack);
  ASSERT_NO_FATAL_FAILURE(awaitAttacks({&a, &b}));
  std::uint64_t samplesBefore = samplesOf(history);
  {
    // Root's own query of the history meanwhile, and `tally lease show`.
    Conn root(socket_);
    auto whole = root.call("lease", {{"lease", history}});
    ASSERT_TRUE(whole) << "root's `lease` not answered within 10 s";
    EXPECT_TRUE(whole->msg.value("ok", false)) << whole->msg;
    EXPECT_LT(whole->bytes, kReplyCap);
    auto shown = runProgram({kTally, "lease", "show", history, "--json", "--timeout", "10s"},
                            {"TALLY_SOCKET=" + socket_});
    EXPECT_EQ(shown.exitCode(), 0) << shown.err;
  }
  ASSERT_NO_FATAL_FAILURE(probeUnderAttack({&a, &b}, 1, under));
  std::uint64_t samplesAfter = samplesOf(history);
  json ra = a.finish(), rb = b.finish();
  double took = msSince(t0) / 1000.0;
  for (const json* r : {&ra, &rb}) {
    EXPECT_FALSE(r->contains("error")) << *r;
    EXPECT_GT(r->value("answered", 0), 0) << *r;
    expectRefusedForQueries(*r, "refused", "refusal");
    EXPECT_EQ(r->value("timeouts", -1), 0) << *r;
  }
  EXPECT_GE(samplesAfter, samplesBefore + 2) << "the daemon sampled on during the attack";
  expectWatchdogHeld();
  expectChainIntact();
  figures("(c) 1,024 pipelined `lease` queries each", idle, under,
          fmt::format("a lease of {} samples written before the start (two days at 1 s, as "
                      "retention keeps them), charted in 240 points; {} for {:.0f} s: uid {} {} "
                      "answered, {}; uid {} {} answered, {}; the "
                      "lease itself sampled {} times meanwhile",
                      written, queryBudgetText(), took, userA().uid, ra.value("answered", 0),
                      countsText(ra["refused"]), userB().uid, rb.value("answered", 0),
                      countsText(rb["refused"]), samplesAfter - samplesBefore));
}

}  // namespace
}  // namespace tally
