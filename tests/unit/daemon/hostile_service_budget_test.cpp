// One user degrades no one: her queue, pools, leases, ledger rows and bytes,
// history reads and tree walks are budgeted per uid, and listings are paged.
#include <fcntl.h>

#include <map>
#include <set>

#include "daemon/hostile_service_fixture.h"
#include "daemon/metrics_publisher.h"
#include "daemon/query_budget.h"
#include "util/clock.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

// One user degrades no one: her waiting requests are capped per uid however
// many connections she opens (root and other users are not counted), and a
// priority above 0 is root's, or a member's of [daemon] priority_group.
TEST_F(HostileServiceTest, OneUsersQueueAndPriorityAreHerOwn) {
  limits.maxQueuedPerUid = 3;
  reopen();
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);  // holds the one slot
  for (std::uint64_t conn = 10; conn < 13; ++conn) {
    call(conn, 1000, "acquire", {{"pools", {"one"}}});
    EXPECT_EQ(outbox.last(conn)["event"], "queued");
  }
  json r = call(13, 1000, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(r["error"]["code"], "busy") << r;
  EXPECT_EQ(r["error"]["message"],
            "uid 1000 already has 3 requests waiting (max_queued_per_uid); wait for a grant or "
            "cancel one");
  call(20, 1001, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(outbox.last(20)["event"], "queued");  // another user still queues
  call(21, 0, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(outbox.last(21)["event"], "queued");  // and root
  EXPECT_EQ(service->queuedRequests(), 5u);

  json p =
      call(30, 1001, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"priority", 100}});
  EXPECT_EQ(p["error"]["code"], "forbidden") << p;
  EXPECT_EQ(p["error"]["message"],
            "priority 100 puts this request ahead of everyone else's; only root may ask for a "
            "priority above 0. Ask without --priority");
  EXPECT_TRUE(call(31, 1001, "acquire",
                   {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"priority", -5}})["ok"]);
  EXPECT_TRUE(call(32, 0, "acquire",
                   {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"priority", 100}})["ok"]);
  // A configured group's members may (Debian's base-passwd has "users", gid 100).
  cfg.daemon.priorityGroup = "users";
  reopen();
  auto asMember = [&](std::uint64_t conn, gid_t gid) {
    rpc::Request req{
        json(next++), "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"priority", 10}}};
    service->handle(conn, daemon::Peer{1000, 1001, gid}, req);
    return outbox.last(conn);
  };
  EXPECT_TRUE(asMember(40, 100)["ok"]);
  json other = asMember(41, 1001);
  EXPECT_EQ(other["error"]["code"], "forbidden") << other;
  EXPECT_NE(
      other["error"]["message"].get<std::string>().find("only root and members of group users may"),
      std::string::npos)
      << other;
}

// Any group member could fill a pool reserved for Slurm or a declared
// lease: a pool's allow_users / allow_groups admit only those (root always),
// decided on ids resolved at start and the peer's groups from the kernel
// (SO_PEERGROUPS): no NSS look-up per request.
TEST_F(HostileServiceTest, APoolWithAnAccessListIsTheirsAlone) {
  cfg.pools.push_back(config::Pool{"slurm", 8, std::nullopt, std::nullopt, {}});
  cfg.pools.back().allowUsers = {"alice", "1002"};
  cfg.pools.back().allowGroups = {"gpu-users", "nosuchgroup"};
  cfg.daemon.priorityGroup = "gpu-users";
  daemon::NameLookup names;
  int lookups = 0;
  names.user = [&](const std::string& n) -> std::optional<uid_t> {
    ++lookups;
    if (n == "alice") return 1003;
    if (n == "1002") return 1002;
    return std::nullopt;
  };
  names.group = [&](const std::string& n) -> std::optional<gid_t> {
    ++lookups;
    if (n == "gpu-users") return 500;
    return std::nullopt;
  };
  namesOverride = &names;
  reopen();
  const int atStart = lookups;
  EXPECT_EQ(atStart, 5);  // each name once, at start
  auto as = [&](std::uint64_t conn, uid_t uid, gid_t gid, std::vector<gid_t> groups, json params) {
    rpc::Request req{json(next++), "acquire", std::move(params)};
    service->handle(conn, daemon::Peer{1000, uid, gid, std::move(groups)}, req);
    return outbox.last(conn);
  };
  json slurm = {{"pools", {"slurm"}}};
  json r = as(1, 1000, 1000, {}, slurm);
  EXPECT_EQ(r["error"]["code"], "forbidden") << r;
  EXPECT_EQ(r["error"]["message"],
            "uid 1000 may not use pool slurm: it is reserved by its allow_users and allow_groups "
            "in the config; ask the operator to add you, or use another pool");
  EXPECT_EQ(as(2, 1000, 1000, {}, {{"pools", {"one", "slurm"}}})["error"]["code"], "forbidden")
      << "every pool asked for is checked";
  EXPECT_TRUE(as(3, 1003, 1003, {}, slurm)["ok"]) << "alice, by name";
  EXPECT_TRUE(as(4, 1002, 1002, {}, slurm)["ok"]) << "a numeric id";
  EXPECT_TRUE(as(5, 1004, 1004, {27, 500}, slurm)["ok"]) << "a supplementary group";
  EXPECT_TRUE(as(6, 1005, 500, {}, slurm)["ok"]) << "the primary group";
  EXPECT_TRUE(as(7, 0, 0, {}, slurm)["ok"]) << "root";
  EXPECT_TRUE(as(8, 1000, 1000, {}, {{"pools", {"one"}}})["ok"]) << "an open pool";
  // The priority group the same way.
  json prio = {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"priority", 10}};
  EXPECT_TRUE(as(9, 1006, 1006, {500}, prio)["ok"]);
  EXPECT_EQ(as(10, 1006, 1006, {501}, prio)["error"]["code"], "forbidden");
  EXPECT_EQ(lookups, atStart) << "no look-up per request";
  // A name that resolves to nothing admits nobody, and is said at start.
  bool said = false;
  for (const auto& n : journal.notes)
    said |= n.message.find("pools.slurm.allow_groups: no group 'nosuchgroup'") != std::string::npos;
  EXPECT_TRUE(said);
}

// An acquire/release loop grew the ledger without limit: every row a user's
// leases write is charged to her, and past the budget her new leases wait
// while her existing ones are still recorded, and other users are untouched.
TEST_F(HostileServiceTest, OneUsersAcquireReleaseLoopIsBoundedInLedgerRows) {
  limits.ledgerRowsPerMinutePerUid = 10;
  reopen();
  std::string held = runningLease(1, 1000);  // granted + started: 2 rows
  int cycles = 0;
  json r;
  for (; cycles < 100; ++cycles) {
    r = call(2, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
    if (!r["ok"]) break;
    ASSERT_TRUE(call(2, 1000, "release", {{"lease", r["result"]["lease"]}})["ok"]);  // 2 rows
  }
  // 2 + 3 per cycle: the fourth cycle spends the last of the 10.
  EXPECT_EQ(cycles, 3);
  EXPECT_EQ(r["error"]["code"], "rate-limited") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find(
                "uid 1000's leases wrote more than 10 ledger rows in the last minute "
                "(ledger_rows_per_minute_per_uid); ask for a new lease again in"),
            std::string::npos)
      << r;
  // A refusal writes nothing.
  const auto rowsBefore = ledgerDb->verify()->rows;
  EXPECT_EQ(call(2, 1000, "attach", {{"pools", {"gpu"}}, {"cgroup", "/x"}})["error"]["code"],
            "rate-limited");
  EXPECT_EQ(ledgerDb->verify()->rows, rowsBefore);
  // Her running lease is still recorded: a release (a second one writes
  // nothing more), its outcome.
  EXPECT_EQ(call(1, 1000, "release", {{"lease", held}})["result"]["state"], "stopping");
  EXPECT_EQ(call(1, 1000, "release", {{"lease", held}})["result"]["state"], "stopping");
  EXPECT_EQ(kinds(held), (std::vector<std::string>{"granted", "started", "released"}));
  json record = {{"lease", {{"id", held}}}, {"outcome", {{"class", "exited"}, {"exit_code", 0}}}};
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", held}, {"record", record}})["ok"]);
  EXPECT_EQ(kinds(held).back(), "outcome");
  // Another user and root are not held back by her.
  EXPECT_TRUE(call(3, 1001, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}})["ok"]);
  EXPECT_TRUE(call(4, 0, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}})["ok"]);
}

// One user's leases, waiting or held, are budgeted (max_leases_per_uid):
// two users with ~690 run leases each blinded every listing. A grant moves
// a lease from waiting to held, so the budget bounds what she holds too.
TEST_F(HostileServiceTest, OneUsersLeasesAreBudgetedWaitingOrHeld) {
  limits.maxLeasesPerUid = 3;
  reopen();
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);  // held
  call(2, 1000, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(outbox.last(2)["event"], "queued");
  call(3, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  json r = call(4, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}});
  EXPECT_EQ(r["error"]["code"], "busy") << r;
  EXPECT_EQ(r["error"]["message"],
            "uid 1000 already has 3 leases, waiting or held (max_leases_per_uid); release one, "
            "or ask the operator to raise the budget");
  // Others are not held back by her.
  EXPECT_TRUE(call(5, 1001, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}})["ok"]);
  EXPECT_TRUE(call(6, 0, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}})["ok"]);
  // One of hers gone (her waiting request's connection closed): room again.
  service->disconnected(2);
  EXPECT_TRUE(call(7, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}})["ok"]);
}

// 4,032 queued requests with attributes made every listing reply pass the
// 4 MiB a reply may be, for every user: listings name the first 256 queued
// (in grant order) and count the rest.
TEST_F(HostileServiceTest, AFullQueueNeverBreaksAnyonesListing) {
  limits.maxQueuedPerUid = 100'000;
  limits.maxLeasesPerUid = 100'000;
  limits.maxQueuedPerConnection = 100'000;
  limits.ledgerRowsPerMinutePerUid = 0;   // not what this test is about
  limits.queryTimePerSecondPerUidUs = 0;  // nor is this (a listing of thousands is slow under ASan)
  reopen();
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);  // holds the one slot
  json attrs = json::object();
  for (int i = 0; i < 16; ++i)
    attrs[fmt::format("k{:02}", i)] = std::string(200, static_cast<char>('a' + i));
  for (int i = 0; i < 4032; ++i)
    call(2, 1000, "acquire", {{"pools", {"one"}}, {"attributes", attrs}});
  ASSERT_EQ(service->queuedRequests(), 4032u);
  for (const char* method : {"leases", "seats", "overview", "pools", "metrics"}) {
    json r = call(3, 1001, method, json::object());
    ASSERT_TRUE(r["ok"]) << method << ": " << r.dump().substr(0, 300);
    EXPECT_LT(r.dump().size(), 2u << 20) << method;  // well under a reply's 4 MiB
  }
  json leases = call(3, 1001, "leases", json::object())["result"];
  EXPECT_EQ(leases["leases"].size(), 1u + 256u);
  EXPECT_EQ(leases["queued"], json({{"total", 4032}, {"listed", 256}}));
  EXPECT_EQ(leases["leases"][256]["position"], 256);  // the next to be granted, in order
  json pools = call(3, 1001, "pools", json::object())["result"]["pools"];
  EXPECT_EQ(pools[1]["queue"].size(), 256u);
  EXPECT_EQ(pools[1]["queue_length"], 4032);
}

// Rows are not the whole cost: each row is charged its bytes, and a user
// whose leases write big rows is held at the bytes budget, named.
TEST_F(HostileServiceTest, OneUsersLedgerBytesAreBudgetedToo) {
  limits.ledgerRowsPerMinutePerUid = 100'000;
  limits.ledgerBytesPerMinutePerUid = 64 * 1024;
  reopen();
  json attrs = json::object();
  for (int i = 0; i < 16; ++i)
    attrs[fmt::format("k{:02}", i)] = std::string(250, static_cast<char>('a' + i));
  int granted = 0;
  json r;
  for (; granted < 100; ++granted) {
    r = call(2, 1000, "acquire",
             {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"attributes", attrs}});
    if (!r["ok"]) break;
    ASSERT_TRUE(call(2, 1000, "release", {{"lease", r["result"]["lease"]}})["ok"]);
  }
  // A granted row is over 4 KiB of attributes: about 15 of them fill 64 KiB.
  EXPECT_GE(granted, 10);
  EXPECT_LE(granted, 16);
  EXPECT_EQ(r["error"]["code"], "rate-limited") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find(
                "uid 1000's leases wrote more than 65536 bytes of ledger rows in the last minute "
                "(ledger_bytes_per_minute_per_uid)"),
            std::string::npos)
      << r;
  EXPECT_TRUE(call(3, 1001, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}})["ok"]);
}

// 1,024 pipelined `lease` requests for a lease with a month of samples
// held the loop 20 s: reads that grow with history or the box are budgeted
// per user, and past the budget each is a cheap refusal naming it.
TEST_F(HostileServiceTest, OneUsersFloodOfHistoryReadsIsBudgeted) {
  limits.queryTimePerSecondPerUidUs = 0;  // the count is this test's
  reopen();
  std::string id = call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  const std::uint64_t startUs = clock::monotonicUs();
  auto [answered, refused, last] = repeat(1024, 2, 1000, "lease", {{"lease", id}});
  // The burst, and what refilled (20 a second) while the loop ran, however
  // long this machine took: a bound on the budget, not on the speed.
  const double tookS = static_cast<double>(clock::monotonicUs() - startUs) / 1e6;
  EXPECT_GE(answered, 40);
  EXPECT_LE(answered, 40 + static_cast<int>(20 * tookS) + 1);
  EXPECT_GT(refused, 0);
  EXPECT_EQ(answered + refused, 1024);
  EXPECT_EQ(last["error"]["code"], "rate-limited");
  EXPECT_EQ(last["error"]["message"],
            "uid 1000 asks for listings, metrics and lease histories faster than 20 a second "
            "(queries_per_second_per_uid); ask again in a second");
  // Every listing draws on the same budget: refused, but for what refilled
  // (20 a second) while these ran on a loaded machine (a bound, not a speed).
  const std::uint64_t listedFromUs = clock::monotonicUs();
  int listed = 0;
  for (const char* method : {"leases", "seats", "overview", "pools", "metrics"}) {
    json r = call(2, 1000, method, json::object());
    if (r["ok"] == true)
      ++listed;
    else
      EXPECT_EQ(r["error"]["code"], "rate-limited") << method;
  }
  const double listingS = static_cast<double>(clock::monotonicUs() - listedFromUs) / 1e6;
  EXPECT_LE(listed, static_cast<int>(20 * (listingS + tookS)) + 1) << listingS;
  EXPECT_LT(listed, 5);
  // Her budget is hers: another user, root, and her own lease's work go on.
  EXPECT_TRUE(call(3, 1001, "lease", {{"lease", id}})["ok"]);
  EXPECT_TRUE(call(4, 0, "leases", json::object())["ok"]);
  EXPECT_TRUE(call(2, 1000, "hello", json::object())["ok"]);
  EXPECT_EQ(call(1, 1000, "release", {{"lease", id}})["result"]["state"],
            "withdrawn");  // it never ran
}

// The count does not see a query's cost: two users at 20 charts a second of
// a month-long lease asked for most of the loop (the VM load suite). With
// the count out of reach, the loop time her charts took refuses her next
// ones, naming the budget and the wait; others' queries go on.
TEST_F(HostileServiceTest, CostlyHistoryReadsAreBudgetedByTheLoopTimeTheyTake) {
  limits.queriesPerSecondPerUid = 1'000'000;
  limits.queryTimePerSecondPerUidUs = 1'000;  // 1 ms a second, a burst of 2 ms
  reopen();
  std::string id = call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  const std::uint64_t s = 1'000'000'000;
  std::vector<ledger::Sample> rows;
  for (std::uint64_t i = 0; i < 40'000; ++i)
    rows.push_back({id, 1000 * s + i * s, 1000 + i % 13, 100 + i % 7, {}});
  ASSERT_TRUE(ledgerDb->appendSamples(rows));
  auto [answered, refused, last] = repeat(200, 2, 1000, "lease", {{"lease", id}});
  // A chart of 40,000 samples takes the loop over a millisecond: the burst
  // buys a few, the rest wait for the refill.
  EXPECT_GE(answered, 1);
  EXPECT_GE(refused, 150);
  EXPECT_EQ(last["error"]["code"], "rate-limited");
  const std::string why = last["error"]["message"];
  EXPECT_NE(why.find("uid 1000's listings, metrics and lease histories took more than 1 ms of the "
                     "daemon's time a second (query_time_per_second_per_uid); ask again in "),
            std::string::npos)
      << why;
  EXPECT_TRUE(call(3, 1001, "lease", {{"lease", id}})["ok"]) << "another user's budget is hers";
  EXPECT_TRUE(call(4, 0, "lease", {{"lease", id}})["ok"]) << "root is not counted";
}

TEST(QueryBudget, ABurstThenASteadyRatePerUser) {
  using R = daemon::QueryBudget::Refusal;
  daemon::QueryBudget b(10, 0);
  const std::uint64_t t0 = 5'000'000;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(b.take(1000, t0), R::None) << i;
  EXPECT_EQ(b.take(1000, t0), R::Count);
  EXPECT_EQ(b.take(1000, t0 + 99'999), R::Count);
  EXPECT_EQ(b.take(1000, t0 + 100'000), R::None);  // one every 100 ms
  EXPECT_EQ(b.take(1000, t0 + 100'000), R::Count);
  EXPECT_EQ(b.take(1001, t0), R::None);                             // each user her own
  for (int i = 0; i < 100; ++i) EXPECT_EQ(b.take(0, t0), R::None);  // root is not counted
  EXPECT_EQ(daemon::QueryBudget(0, 0).take(1000, t0), R::None);     // 0: no budget
}

// The count does not see a query's cost: the loop time each took is charged
// after it ran, a debt that refuses her next ones until the refill pays it.
TEST(QueryBudget, TheLoopTimeQueriesTookIsCharged) {
  using R = daemon::QueryBudget::Refusal;
  daemon::QueryBudget b(1000, 100'000);  // 100 ms a second, a burst of 200 ms
  const std::uint64_t t0 = 5'000'000;
  EXPECT_EQ(b.take(1000, t0), R::None);
  b.charge(1000, 150'000, t0);  // a 150 ms chart
  EXPECT_EQ(b.take(1000, t0), R::None);
  b.charge(1000, 150'000, t0);  // 100 ms in debt now
  EXPECT_EQ(b.take(1000, t0), R::Time);
  EXPECT_EQ(b.timeWaitUs(1000), 1'000'001u);  // 100 ms at 100 ms a second
  EXPECT_EQ(b.take(1000, t0 + 1'000'000), R::Time) << "paid off to 0, not above";
  EXPECT_EQ(b.take(1000, t0 + 1'000'001), R::None);
  EXPECT_EQ(b.take(1001, t0), R::None) << "each user her own";
  b.charge(0, 10'000'000, t0);  // root is not counted
  EXPECT_EQ(b.take(0, t0), R::None);
}

// Two users with ~690 granted leases each once made `leases`, `seats`,
// `metrics`, `top` and `daemon status` fail for everyone (the reply passed
// the 4 MiB a reply may be) and froze the metrics textfile. Listings are
// pages (in lease-id order, every lease exactly once across them), the
// overview and the metrics name the first page and count the rest.
TEST_F(HostileServiceTest, ThousandsOfLeasesArePagedAndNoReplyPassesTheCap) {
  limits.maxLeasesPerUid = 100'000;
  limits.ledgerRowsPerMinutePerUid = 0;  // budgets are not what this test is about
  limits.ledgerBytesPerMinutePerUid = 0;
  limits.queriesPerSecondPerUid = 0;
  limits.queryTimePerSecondPerUidUs = 0;
  cfg.pools.push_back(config::Pool{"big", 5000, std::nullopt, std::nullopt, {}});
  reopen();
  json attrs = json::object();
  for (int i = 0; i < 16; ++i)
    attrs[fmt::format("k{:02}", i)] = std::string(240, static_cast<char>('a' + i));
  std::set<std::string> made;
  for (int i = 0; i < 1200; ++i) {
    json r = call(2 + static_cast<std::uint64_t>(i % 2), 1000 + static_cast<std::uint32_t>(i % 2),
                  "acquire", {{"pools", {"big"}}, {"attributes", attrs}});
    ASSERT_TRUE(r["ok"]) << r;
    made.insert(r["result"]["lease"].get<std::string>());
  }
  for (const char* method : {"leases", "seats", "overview", "metrics"}) {
    json r = call(9, 1002, method, json::object());
    ASSERT_TRUE(r["ok"]) << method;
    EXPECT_LT(r.dump().size(), 3u << 20) << method << ": under a reply's 4 MiB";
  }
  for (const char* method : {"leases", "seats"}) {
    SCOPED_TRACE(method);
    std::set<std::string> seen;
    json params = json::object();
    int pages = 0;
    for (;; ++pages) {
      json r = call(9, 1002, method, params)["result"];
      const json& page = r["page"];
      EXPECT_EQ(page["live"], 1200);
      EXPECT_EQ(page["listed"], r[method].size());
      std::string last;
      for (const auto& row : r[method]) {
        std::string id = row["lease"];
        EXPECT_GT(id, last) << "in lease-id order";
        last = id;
        EXPECT_TRUE(seen.insert(id).second) << id << " listed twice";
      }
      if (page["next"].is_null()) break;
      EXPECT_EQ(page["next"], last);
      params = {{"after", last}};
    }
    EXPECT_EQ(pages + 1, 3);  // 512 + 512 + 176
    EXPECT_EQ(seen, made);
  }
  EXPECT_EQ(call(9, 1002, "leases", {{"limit", 10}})["result"]["leases"].size(), 10u);
  EXPECT_EQ(call(9, 1002, "leases", {{"limit", 513}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(9, 1002, "leases", {{"after", "../x"}})["error"]["code"], "invalid-params");
  // The metrics: the first page's leases and the count of the rest, under
  // what the textfile accepts.
  std::string text = call(9, 1002, "metrics", json::object())["result"]["text"];
  EXPECT_LT(text.size(), daemon::Textfile::kMaxBytes);
  EXPECT_NE(text.find("\ntally_leases_live 1200\n"), std::string::npos);
  EXPECT_NE(text.find("\ntally_leases_unlisted 688\n"), std::string::npos);
  EXPECT_NE(text.find("tally_pool_holders{pool=\"big\"} 1200"), std::string::npos);
}

// Two leases of 16,000 cgroups each (inside the per-lease walk limit) held
// the daemon at 60 % CPU: one user's walks in a sample round are budgeted.
// Her first lease is walked, the one past the budget has no GPU figure this
// round (absent, the budget named, never 0), and another user's is walked.
TEST_F(HostileServiceTest, OneUsersWideTreesCostABoundedWalkPerRound) {
  limits.maxCgroupsWalkedPerUid = 400;
  reopen();
  std::string a = runningLease(1, 1000), b = runningLease(2, 1000), c = runningLease(3, 1001);
  for (const auto& id : {a, b, c}) {
    std::string scope =
        host.cgroupRoot() + "/tally.slice/tally-" + id + ".slice/tally-" + id + ".scope";
    writeFile(scope + "/cgroup.procs", "");
    for (int i = 0; i < 300; ++i) {
      makeDirs(fmt::format("{}/d{}", scope, i));
      writeFile(fmt::format("{}/d{}/cgroup.procs", scope, i), "");
    }
  }
  service->sample();
  std::map<std::string, json> gpu;
  json seats = call(9, 0, "seats", json::object())["result"]["seats"];
  for (const auto& row : seats) gpu[row["lease"].get<std::string>()] = row["gpu"];
  const std::string& first = std::min(a, b);
  const std::string& second = std::max(a, b);
  EXPECT_TRUE(gpu[first]["current_bytes"].is_number()) << gpu[first];
  EXPECT_TRUE(gpu[second]["current_bytes"].is_null()) << gpu[second];
  EXPECT_NE(gpu[second]
                .value("current_bytes_unknown", "")
                .find("its owner's leases hold more cgroups than the daemon walks for one user per "
                      "sample round (max_cgroups_walked_per_uid = 400)"),
            std::string::npos)
      << gpu[second];
  EXPECT_TRUE(gpu[c]["current_bytes"].is_number()) << "another user's budget is her own";

  // A tree wider than her budget is refused at attach: a lease admitted is
  // one her budget can meter. Root's is not budgeted.
  workloadCgroup("/user.slice/wide.scope", true, 1000);
  host.addCgroup("/user.slice/wide.scope", {4343});
  for (int i = 0; i < 400; ++i) {
    makeDirs(fmt::format("{}/user.slice/wide.scope/w{}", host.cgroupRoot(), i));
    writeFile(fmt::format("{}/user.slice/wide.scope/w{}/cgroup.procs", host.cgroupRoot(), i), "");
  }
  json r = call(4, 1000, "attach", {{"pools", {"one"}}, {"cgroup", "/user.slice/wide.scope"}});
  EXPECT_EQ(r["error"]["code"], "refused") << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find(
                "keep its tree within 64 levels and 400 cgroups (max_cgroups_walked_per_uid)"),
            std::string::npos)
      << r;

  // Her first lease's tree grows past the whole budget: it can no longer be
  // walked, and it no longer keeps her other lease from being walked (narrow
  // trees go first), whichever id sorts first.
  std::string wide =
      host.cgroupRoot() + "/tally.slice/tally-" + first + ".slice/tally-" + first + ".scope";
  for (int i = 300; i < 500; ++i) {
    makeDirs(fmt::format("{}/d{}", wide, i));
    writeFile(fmt::format("{}/d{}/cgroup.procs", wide, i), "");
  }
  service->sample();
  service->sample();
  seats = call(9, 0, "seats", json::object())["result"]["seats"];
  for (const auto& row : seats) gpu[row["lease"].get<std::string>()] = row["gpu"];
  EXPECT_TRUE(gpu[first]["current_bytes"].is_null()) << gpu[first];
  EXPECT_TRUE(gpu[second]["current_bytes"].is_number()) << gpu[second];
}

// Followed by inotify (cgroup/tree_watch.h), a wide tree costs its owner's
// walk budget when it is indexed and at its changes, not every round: the
// budget that, walked whole, meters one of her two 300-cgroup leases
// (OneUsersWideTreesCostABoundedWalkPerRound) meters both from the second
// round on, and a GPU process that enters one of the empty cgroups counts at
// the next round.
TEST_F(HostileServiceTest, FollowedTreesCostTheWalkBudgetAtTheirChanges) {
  limits.maxCgroupsWalkedPerUid = 400;
  auto w = cgroup::TreeWatcher::open(100'000);
  ASSERT_TRUE(w) << w.error().message;
  treeWatcher = std::move(*w);
  reopen();
  std::string a = runningLease(1, 1000), b = runningLease(2, 1000);
  auto scopeOf = [&](const std::string& id) {
    return host.cgroupRoot() + "/tally.slice/tally-" + id + ".slice/tally-" + id + ".scope";
  };
  for (const auto& id : {a, b}) {
    writeFile(scopeOf(id) + "/cgroup.procs", "");
    for (int i = 0; i < 300; ++i) {
      writeFile(fmt::format("{}/d{}/cgroup.procs", scopeOf(id), i), "");
      writeFile(fmt::format("{}/d{}/cgroup.events", scopeOf(id), i), "populated 0\nfrozen 0\n");
    }
  }
  auto gpuNow = [&] {
    std::map<std::string, json> gpu;
    json seats = call(9, 0, "seats", json::object())["result"]["seats"];
    for (const auto& row : seats) gpu[row["lease"].get<std::string>()] = row["gpu"];
    return gpu;
  };
  const std::string first = std::min(a, b), second = std::max(a, b);
  service->sample();  // the first tree indexed (301 cgroups); the second past the budget
  auto gpu = gpuNow();
  EXPECT_TRUE(gpu[first]["current_bytes"].is_number()) << gpu[first];
  EXPECT_TRUE(gpu[second]["current_bytes"].is_null()) << gpu[second];
  service->sample();  // the first costs one cgroup now; the second is indexed
  gpu = gpuNow();
  EXPECT_TRUE(gpu[first]["current_bytes"].is_number()) << gpu[first];
  EXPECT_TRUE(gpu[second]["current_bytes"].is_number()) << gpu[second];

  FakeProcess p;
  p.pid = 4242;
  p.uid = 1000;
  p.cgroup = "/tally.slice/tally-" + second + ".slice/tally-" + second + ".scope/d17";
  FakeFd fd;
  fd.drmMinor = 128;
  fd.fdinfo = amdgpuFdinfo(7, "0000:c6:00.0", 4 * 1024 * 1024, 0);  // 4 GiB GTT
  p.fds = {fd};
  host.addProcess(p);
  writeFile(scopeOf(second) + "/d17/cgroup.procs", "4242\n");
  writeFile(scopeOf(second) + "/d17/cgroup.events", "populated 1\nfrozen 0\n");
  service->sample();
  gpu = gpuNow();
  EXPECT_EQ(gpu[second]["current_bytes"], 4 * GiB) << gpu[second];
  EXPECT_TRUE(gpu[first]["current_bytes"].is_number()) << gpu[first];
}

TEST(RowBudget, RowsAndBytesRefillAtTheirRatePerMinuteAndFullAccountsAreForgotten) {
  daemon::RowBudget b(60, 6000);  // a row and 100 bytes a second
  const std::uint64_t t0 = 1'000'000'000;
  EXPECT_FALSE(b.wait(1000, t0));
  for (int i = 0; i < 61; ++i) b.charge(1000, t0, 10);  // one row past the budget, 610 bytes
  auto w = b.wait(1000, t0);
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->bytes);
  EXPECT_EQ(w->us, 2'000'001u);  // back to 1 row after 2 s
  EXPECT_TRUE(b.wait(1000, t0 + 1'999'999));
  EXPECT_FALSE(b.wait(1000, t0 + 2'000'000));
  b.charge(1001, t0, 6100);  // one row of 6,100 bytes: 100 past the bytes budget
  w = b.wait(1001, t0);
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->bytes);
  EXPECT_EQ(w->us, 1'010'001u);  // 101 bytes at 100 a second
  b.charge(0, t0, 1'000'000);    // root is not counted
  EXPECT_FALSE(b.wait(0, t0));
  EXPECT_EQ(b.accounts(), 2u);
  b.prune(t0 + 61'000'000);  // a minute later both are full again: forgotten
  EXPECT_EQ(b.accounts(), 0u);
}

}  // namespace
}  // namespace tally
