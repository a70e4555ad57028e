// The lease service: admission, the queue, its events and replays, and who
// may release. Every reply, event and ledger row is asserted. Attach:
// service_attach_test.cpp; run leases and recovery: service_run_test.cpp.
#include <functional>

#include "daemon/service_fixture.h"
#include "ledger/rows.h"
#include "rpc/messages.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST_F(ServiceTest, CapacityOneSerialisesAndTheQueueSeesItsPosition) {
  json a = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "first"}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string first = a["result"]["lease"];
  EXPECT_EQ(a["result"]["state"], "granted");
  call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "second"}});
  json queued = outbox.last(2);
  EXPECT_EQ(queued["event"], "queued");
  EXPECT_EQ(queued["position"], 1);
  EXPECT_EQ(queued["waiting_for"], "capacity");
  std::string second = queued["lease"];
  EXPECT_EQ(service->queuedRequests(), 1u);
  // The owner releases the granted lease before it started: withdrawn, and the next is granted.
  json r = call(1, 1000, "release", {{"lease", first}});
  EXPECT_EQ(r["result"]["state"], "withdrawn");
  json granted = outbox.last(2);
  EXPECT_TRUE(granted["ok"]);
  EXPECT_EQ(granted["result"]["lease"], second);
  EXPECT_EQ(kinds(first), (std::vector<std::string>{"granted", "released", "withdrawn"}));
  EXPECT_EQ(kinds(second), (std::vector<std::string>{"granted"}));
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

// A pool's default declares what a bare `tally run --pool gpu` leaves out
// (its reply and granted row say the figure), and each user's share holds
// that user alone: uid 1000 at its share waits, uid 1001 is granted.
TEST_F(ServiceTest, APoolsDefaultAndPerUserShareServeABareRun) {
  cfg.pools[0].defaultGpuMemoryMax = 24 * GiB;
  cfg.pools[0].perUserCapacity = 1;
  reopen();
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"name", "bare"}});
  ASSERT_TRUE(a["ok"]) << a;
  EXPECT_EQ(a["result"]["declared"]["gpu_memory_max"], 24 * GiB);
  EXPECT_EQ(a["result"]["owner_uid"], 1000);
  auto reply = rpc::api::decodeLeaseReply(a["result"]);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->declaredGpuMemoryMax, 24 * GiB);
  auto granted = ledger::decodeGranted(json::parse(rows(a["result"]["lease"])[0].body));
  ASSERT_TRUE(granted);
  EXPECT_EQ(granted->declaration.gpuMemoryMax, 24 * GiB);
  EXPECT_EQ(granted->owner, 1000u);

  call(2, 1000, "acquire", {{"pools", {"gpu"}}, {"name", "second"}});
  json waits = outbox.last(2);
  EXPECT_EQ(waits["event"], "queued");
  EXPECT_EQ(waits["waiting_for"], "user-share");
  EXPECT_EQ(waits["detail"],
            "uid 1000's share of pool gpu: 1 of 1 leases held (per_user_capacity)");
  json other = call(3, 1001, "acquire", {{"pools", {"gpu"}}, {"name", "other"}});
  ASSERT_TRUE(other["ok"]) << other;
  EXPECT_EQ(other["result"]["state"], "granted");
  // The first user's lease ends: their waiter is granted.
  ASSERT_TRUE(call(1, 1000, "release", {{"lease", a["result"]["lease"]}})["ok"]);
  json second = outbox.last(2);
  ASSERT_TRUE(second["ok"]) << second;
  EXPECT_EQ(second["result"]["name"], "second");
  // A refusal of a figure the default gave says where it came from.
  cfg.pools[1].gpuMemoryBudget = 96 * GiB;
  cfg.pools[1].perUserGpuMemoryBudget = 16 * GiB;
  reopen();
  json both = call(4, 1002, "acquire", {{"pools", {"gpu", "one"}}});
  EXPECT_EQ(both["error"]["message"],
            "--gpu-memory-max 24.0 GiB is larger than pool one's share per user 16.0 GiB "
            "(per_user_gpu_memory_budget): ask for 16.0 GiB or less (gpu_memory_max came from the "
            "pool's default_gpu_memory_max; declare it with the flag)")
      << both;
}

// A queued lease's seat row and lease view say why it waits, as its client
// hears it (tally top shows it in place of a workload).
TEST_F(ServiceTest, AQueuedSeatSaysWhyItWaits) {
  ASSERT_EQ(call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["state"], "granted");
  call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "second"}});
  json seats = call(3, 1000, "seats", json::object());
  ASSERT_TRUE(seats["ok"]) << seats;
  bool found = false;
  for (const auto& row : seats["result"]["seats"]) {
    if (row["state"] != "queued") continue;
    found = true;
    EXPECT_EQ(row["waiting"], "pool one is full: 1 of 1 leases hold it") << row;
  }
  EXPECT_TRUE(found) << seats;
  json leases = call(4, 1000, "leases", json::object());
  for (const auto& row : leases["result"]["leases"])
    if (row["state"] == "queued")
      EXPECT_EQ(row["waiting_detail"], "pool one is full: 1 of 1 leases hold it") << row;
}

// An id is taken by its first characters wherever one is taken, as `ledger
// --lease` takes it: when they name one lease, live or ended; when they name
// several, the refusal says which.
TEST_F(ServiceTest, ALeaseIdIsTakenByItsFirstCharacters) {
  json a = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 8 * GiB}});
  json b = call(2, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 8 * GiB}});
  std::string idA = a["result"]["lease"], idB = b["result"]["lease"];
  std::size_t common = 0;
  while (idA[common] == idB[common]) ++common;
  std::string shortA = idA.substr(0, std::max<std::size_t>(common + 1, 4));
  json shown = call(3, 1000, "lease", {{"lease", shortA}});
  ASSERT_TRUE(shown["ok"]) << shown;
  EXPECT_EQ(shown["result"]["lease"], idA);
  if (common >= 4) {
    json both = call(3, 1000, "lease", {{"lease", idA.substr(0, common)}});
    EXPECT_EQ(both["error"]["code"], "not-found");
    EXPECT_NE(both["error"]["message"].get<std::string>().find("is the start of several leases"),
              std::string::npos)
        << both;
  }
  // Release by the short id; the ended lease is still found by it (the ledger's).
  json released = call(1, 1000, "release", {{"lease", shortA}});
  ASSERT_TRUE(released["ok"]) << released;
  EXPECT_EQ(released["result"]["lease"], idA);
  json ended = call(3, 1000, "lease", {{"lease", shortA}});
  ASSERT_TRUE(ended["ok"]) << ended;
  EXPECT_EQ(ended["result"]["lease"], idA);
  EXPECT_EQ(call(3, 1000, "lease", {{"lease", "zzzz"}})["error"]["message"],
            "no lease zzzz (live or in the ledger)");
  // Three characters name a lease by chance: four at least.
  EXPECT_EQ(
      call(3, 1000, "lease", {{"lease", idA.substr(0, 3)}})["error"]["message"],
      "no lease " + idA.substr(0, 3) + ": give its whole id, or at least its first 4 characters");
}

// A request that leaves the queue without a grant is an event subscribers
// hear, a journal line and a counter: its queue timeout passed, or it was
// cancelled (tally_queue_ended_total{reason}).
TEST_F(ServiceTest, AQueueTimeoutAndACancelAreEventsAndCounted) {
  EXPECT_TRUE(call(9, 0, "subscribe", json::object())["ok"]);
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);
  call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "late"}, {"timeout_us", 1}});
  std::string late = outbox.last(2)["lease"];
  call(3, 1001, "acquire", {{"pools", {"one"}}, {"name", "changed-mind"}});
  std::string other = outbox.last(3)["lease"];
  service->tick();  // its microsecond has passed
  EXPECT_EQ(outbox.last(2)["error"]["code"], "timeout");
  ASSERT_TRUE(call(4, 1001, "cancel", {{"lease", other}})["ok"]);  // its owner, from elsewhere
  EXPECT_EQ(outbox.last(3)["error"]["code"], "cancelled");
  std::vector<std::pair<std::string, std::string>> heard;
  for (const json& e : outbox.sent[9])
    if (e.value("event", "") == "lease" &&
        (e["kind"] == "queue-timeout" || e["kind"] == "cancelled"))
      heard.emplace_back(e["kind"], e["lease"]);
  EXPECT_EQ(heard, (std::vector<std::pair<std::string, std::string>>{{"queue-timeout", late},
                                                                     {"cancelled", other}}));
  // A waiter whose client goes away (Ctrl-C) left the queue too.
  call(5, 1002, "acquire", {{"pools", {"one"}}, {"name", "gave-up"}});
  std::string gaveUp = outbox.last(5)["lease"];
  service->disconnected(5);
  EXPECT_EQ(outbox.sent[9].back()["kind"], "cancelled");
  EXPECT_EQ(outbox.sent[9].back()["lease"], gaveUp);
  json ends = service->overview(clock::realtimeNs())["enforcement"]["queue_ends"];
  EXPECT_EQ(ends["queue-timeout"], 1);
  EXPECT_EQ(ends["cancelled"], 2);
  EXPECT_NE(journal.notes.size(), 0u);
  bool said = false;
  for (const auto& n : journal.notes)
    said = said || n.message.find("lease " + late +
                                  " (late): queue-timeout in one: no grant "
                                  "within the queue timeout") != std::string::npos;
  EXPECT_TRUE(said);
}

// A run lease's client that could not contain its workload says so: the
// lease ends as containment-refused (counted; the alert's), never as a
// release by its user.
TEST_F(ServiceTest, ARunLeaseRefusedContainmentEndsAsThatNotAsARelease) {
  json a = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "job"}});
  std::string id = a["result"]["lease"];
  json r = call(1, 1000, "release",
                {{"lease", id}, {"containment_refused", "no systemd and no writable cgroup"}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["state"], "withdrawn");
  // No released row: its user released nothing.
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "withdrawn"}));
  auto last = rows(id).back();
  EXPECT_EQ(last.kind, "withdrawn");
  EXPECT_EQ(json::parse(last.body)["reason"],
            "containment refused: no systemd and no writable cgroup");
  json outcomes = service->overview(clock::realtimeNs())["enforcement"]["outcomes"];
  EXPECT_EQ(outcomes["containment-refused"], 1);
  EXPECT_EQ(outcomes["withdrawn"], 0);
}

// What the daemon found at start about containment is in its overview
// (daemon status, tally_containment_possible), as it found it.
TEST_F(ServiceTest, AHostThatCannotContainLeasesSaysSoInTheOverview) {
  json c = service->overview(clock::realtimeNs())["daemon"]["containment"];
  EXPECT_EQ(c["possible"], true);
  EXPECT_TRUE(c["problems"].empty());
  cannotContain = {"memory controller is on cgroup v1"};
  reopen();
  c = service->overview(clock::realtimeNs())["daemon"]["containment"];
  EXPECT_EQ(c["possible"], false);
  EXPECT_EQ(c["problems"], json::array({"memory controller is on cgroup v1"}));
}

// A waiter is told again what it waits for when nothing has moved for a while
// (30 s by default; 0 here: every tick), so its client can tell a long wait
// from a dead daemon. Nobody else is told anything.
TEST_F(ServiceTest, AWaiterHearsWhatItWaitsForAgainWhenNothingMoves) {
  limits.queueStatusEveryUs = 0;
  reopen();
  ASSERT_TRUE(call(1, 1000, "acquire", {{"pools", {"one"}}})["ok"]);
  call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "waiter"}});
  std::size_t told = outbox.sent[2].size();
  std::size_t holderMessages = outbox.sent[1].size();
  service->tick();
  ASSERT_EQ(outbox.sent[2].size(), told + 1);
  json again = outbox.last(2);
  EXPECT_EQ(again["event"], "queued");
  EXPECT_EQ(again["position"], 1);
  EXPECT_EQ(again["waiting_for"], "capacity");
  EXPECT_EQ(again["detail"], "pool one is full: 1 of 1 leases hold it");
  EXPECT_EQ(again["needed"], 1);
  EXPECT_EQ(again["free"], 0);
  EXPECT_EQ(again["unit"], "leases");
  EXPECT_EQ(outbox.sent[1].size(), holderMessages);
}

// Subscribers follow every lease's life, like `docker events`: queued,
// granted, released, ended, each with the journal's line.
TEST_F(ServiceTest, SubscribersSeeTheLeaseLifecycle) {
  EXPECT_TRUE(call(9, 0, "subscribe", json::object())["ok"]);
  std::string first =
      call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "a"}})["result"]["lease"];
  call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "b"}});
  std::string second = outbox.last(2)["lease"];
  call(1, 1000, "release", {{"lease", first}});
  std::vector<std::string> seen;
  for (const json& e : outbox.sent[9]) {
    if (e.value("event", "") != "lease") continue;
    seen.push_back(e["lease"].get<std::string>() + " " + e["kind"].get<std::string>() +
                   (e.contains("outcome") ? " " + e["outcome"].get<std::string>() : ""));
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{first + " granted", second + " queued", first + " released",
                                      first + " withdrawn withdrawn", second + " granted"}));
  json last = outbox.last(9);
  EXPECT_EQ(last["message"], "lease " + second + " (b): granted in one");
  EXPECT_EQ(last["pools"], json::array({"one"}));
}

// `tally events --since` and a reconnecting follower: the ledger's rows since
// a time (or after a row) come first, as the events they were when written
// (kind, message, pools, seq, time), marked replayed, then the live ones. A
// "queued" event stands for no row and is not replayed.
TEST_F(ServiceTest, ASubscriberHearsTheLedgersRowsSinceATimeAsTheEventsTheyWere) {
  EXPECT_TRUE(call(9, 0, "subscribe", json::object())["ok"]);
  std::string first =
      call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "a"}})["result"]["lease"];
  call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "b"}});
  call(1, 1000, "release", {{"lease", first}});
  std::vector<json> live;
  for (const json& e : outbox.sent[9]) {
    if (!e.contains("event")) continue;
    ASSERT_TRUE(e.contains("at_ns")) << e;
    json ev = e;
    ev.erase("id");  // the subscribe request's id: each subscriber's own
    if (ev.contains("seq"))
      live.push_back(ev);
    else
      EXPECT_EQ(ev["kind"], "queued") << ev;
  }
  ASSERT_EQ(live.size(), 4u);  // a granted, released, withdrawn; b granted

  auto replayedOn = [&](std::uint64_t conn, const json& params) {
    json reply = call(conn, 0, "subscribe", params)["result"];
    // Nothing of the replay in the request's own turn: the loop serves it.
    EXPECT_EQ(outbox.sent[conn].size(), 1u);
    while (service->backgroundWork()) {
    }
    std::vector<json> got;
    json end;
    for (json e : outbox.sent[conn]) {
      if (e.contains("result")) continue;
      if (e["event"] == "replayed") {
        end = e;
        continue;
      }
      EXPECT_TRUE(end.is_null()) << "after the end of the replay: " << e;
      EXPECT_EQ(e["replayed"], true) << e;
      e.erase("replayed");
      e.erase("id");
      got.push_back(e);
    }
    EXPECT_EQ(reply["replaying"], !params.empty()) << reply;
    if (!params.empty()) {
      EXPECT_EQ(end["rows"], got.size()) << end;
      EXPECT_EQ(end["truncated"], false);
    } else {
      EXPECT_TRUE(end.is_null());
    }
    return got;
  };
  EXPECT_EQ(replayedOn(8, {{"since_ns", 0}}), live);
  std::int64_t secondSeq = live[1]["seq"];
  EXPECT_EQ(replayedOn(7, {{"after_seq", secondSeq}}),
            std::vector<json>(live.begin() + 2, live.end()));
  std::uint64_t lastAt = live.back()["at_ns"];
  auto fromLast = replayedOn(6, {{"since_ns", lastAt}});
  ASSERT_FALSE(fromLast.empty());
  EXPECT_EQ(fromLast.back(), live.back());
  EXPECT_TRUE(replayedOn(5, json::object()).empty()) << "no since: the live events only";

  // Then the live ones, to the replayed subscribers too.
  std::size_t before = outbox.sent[8].size();
  call(2, 1000, "release", {{"lease", live.back()["lease"]}});
  ASSERT_EQ(outbox.sent[8].size(), before + 2);  // released, withdrawn: it never started
  EXPECT_EQ(outbox.sent[8][before]["kind"], "released");
  EXPECT_FALSE(outbox.sent[8][before].contains("replayed"));
  EXPECT_EQ(outbox.sent[8][before]["seq"], live.back()["seq"].get<std::int64_t>() + 1);
}

// 64 followers replaying a long ledger once stalled the loop 23 s: a
// replay is served a slice (256 rows) per call of the loop, round-robin, the
// events that happen meanwhile held and sent after it in order, and one
// user's replays at once are budgeted (max_replays_per_uid).
TEST_F(ServiceTest, AReplayIsServedInSlicesAcrossTurnsAndLiveEventsWaitBehindIt) {
  // 700 rows: a lease granted and released 350 times... a lifecycle of 3 rows each.
  for (int i = 0; i < 240; ++i) {
    std::string id = call(1, 0, "acquire", {{"pools", {"one"}}, {"name", "a"}})["result"]["lease"];
    call(1, 0, "release", {{"lease", id}});
  }
  std::size_t rows = ledgerDb->events()->size();
  ASSERT_GE(rows, 720u);
  for (std::uint64_t conn : {21u, 22u}) {
    EXPECT_TRUE(call(conn, 1000, "subscribe", {{"since_ns", 0}})["result"]["replaying"]);
    EXPECT_EQ(outbox.sent[conn].size(), 1u) << "the reply only";
  }
  EXPECT_GE(outbox.turnsWanted, 1u);
  // One slice: one follower, 256 rows at most.
  ASSERT_TRUE(service->backgroundWork());
  std::size_t first = outbox.sent[21].size() + outbox.sent[22].size() - 2;
  EXPECT_GT(first, 0u);
  EXPECT_LE(first, daemon::LeaseEvents::kReplaySliceRows);
  // A live event during the replay waits behind it.
  std::string late =
      call(2, 0, "acquire", {{"pools", {"one"}}, {"name", "late"}})["result"]["lease"];
  for (std::uint64_t conn : {21u, 22u})
    for (const json& e : outbox.sent[conn]) EXPECT_NE(e.value("lease", ""), late) << e;
  unsigned slices = 1;
  while (service->backgroundWork()) ++slices;
  EXPECT_GE(slices, 2 * ((rows + 255) / 256) - 1);  // both followers, a slice at a time
  for (std::uint64_t conn : {21u, 22u}) {
    const auto& got = outbox.sent[conn];
    std::size_t end = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i].value("event", "") == "replayed") end = i;
    ASSERT_GT(end, 0u);
    EXPECT_EQ(got[end]["truncated"], false);
    ASSERT_EQ(got.size(), end + 2) << "the held live event after the end";
    EXPECT_EQ(got.back()["lease"], late);
    EXPECT_FALSE(got.back().contains("replayed"));
    std::int64_t seq = 0;
    for (std::size_t i = 1; i < end; ++i) {  // in order, each row once
      EXPECT_GT(got[i]["seq"].get<std::int64_t>(), seq);
      seq = got[i]["seq"];
    }
  }
  // The budget: 4 replays of one user at once; the fifth is refused naming it.
  for (std::uint64_t conn = 30; conn < 34; ++conn)
    EXPECT_TRUE(call(conn, 1000, "subscribe", {{"after_seq", 0}})["ok"]);
  json r = call(34, 1000, "subscribe", {{"after_seq", 0}});
  EXPECT_EQ(r["error"]["code"], "busy");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("max_replays_per_uid"),
            std::string::npos);
  EXPECT_TRUE(call(35, 1001, "subscribe", {{"after_seq", 0}})["ok"]) << "another user's own budget";
  EXPECT_TRUE(call(36, 1000, "subscribe", json::object())["ok"])
      << "following live is not a replay";
  service->disconnected(30);
  EXPECT_TRUE(call(34, 1000, "subscribe", {{"after_seq", 0}})["ok"]);
}

// A replay goes at its reader's pace: while its client has 256 KiB unread
// the follower is skipped (not queued past the output cap and dropped),
// and it goes on when the client reads. One subscription per connection.
TEST_F(ServiceTest, AReplayWaitsForItsReaderAndAConnectionFollowsOnce) {
  for (int i = 0; i < 10; ++i) {
    std::string id = call(1, 0, "acquire", {{"pools", {"one"}}, {"name", "a"}})["result"]["lease"];
    call(1, 0, "release", {{"lease", id}});
  }
  EXPECT_TRUE(call(21, 1000, "subscribe", {{"since_ns", 1}})["ok"]);
  outbox.unread[21] = 300 * 1024;
  EXPECT_FALSE(service->backgroundWork()) << "nothing to do while its reader is behind";
  EXPECT_EQ(outbox.sent[21].size(), 1u);
  EXPECT_TRUE(service->replayWaits(21));
  outbox.unread[21] = 0;
  while (service->backgroundWork()) {
  }
  EXPECT_FALSE(service->replayWaits(21));
  EXPECT_EQ(outbox.sent[21].back()["event"], "replayed");
  EXPECT_EQ(outbox.sent[21].back()["rows"], 30);
  json again = call(21, 1000, "subscribe", json::object());
  EXPECT_EQ(again["error"]["code"], "conflict") << again;
}

TEST_F(ServiceTest, BudgetedPoolRefusesAnUndeclaredRequest) {
  json r = call(1, 1000, "acquire", {{"pools", {"gpu"}}});
  EXPECT_FALSE(r["ok"]);
  EXPECT_EQ(r["error"]["code"], "refused");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("--gpu-memory-max"), std::string::npos);
  r = call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 97 * GiB}});
  EXPECT_EQ(r["error"]["code"], "refused");
  // Two leases of 48 GiB fill the 96 GiB budget; a third waits on the budget, not capacity.
  EXPECT_TRUE(call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 48 * GiB}})["ok"]);
  EXPECT_TRUE(call(2, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 40 * GiB}})["ok"]);
  call(3, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", 16 * GiB}});
  // What it waits for, in numbers: the pool, what it needs, what is left.
  json waiting = outbox.last(3);
  EXPECT_EQ(waiting["waiting_for"], "gpu-memory-budget");
  EXPECT_EQ(waiting["pool"], "gpu");
  EXPECT_EQ(waiting["needed"], 16 * GiB);
  EXPECT_EQ(waiting["free"], 8 * GiB);
  EXPECT_EQ(waiting["unit"], "bytes");
  EXPECT_EQ(waiting["detail"],
            "pool gpu's GPU memory budget: needs 16.0 GiB, 8.0 GiB of 96.0 GiB left");
  json pools = call(4, 1000, "pools", json::object());
  const json& gpu = pools["result"]["pools"][0];
  EXPECT_EQ(gpu["gpu_memory_declared"], 88 * GiB);
  EXPECT_EQ(gpu["gpu_memory_budget"], 96 * GiB);
  EXPECT_EQ(gpu["holders"].size(), 2u);
  EXPECT_EQ(gpu["queue"].size(), 1u);
  // Headroom: MemAvailable 100 GiB, device free (120-20) + (0.5-0.25) GiB, minus the
  // holders' declarations (nothing measured yet: all of 48 + 40 GiB is promised).
  EXPECT_EQ(gpu["headroom"]["gpu_bytes"], 100 * GiB - 88 * GiB);
  EXPECT_EQ(gpu["headroom"]["host_bytes"], 100 * GiB);
}

// Slurm's placement is the budget: a lease the site's scheduler placed (the
// plugin in slurmstepd, as root, says "placed") is granted past measured
// headroom, never refused for it, with what headroom lacked in its granted
// row, the journal and the metrics. The declared budget still binds; a user
// may not say "placed".
TEST_F(ServiceTest, APlacedLeaseIsGrantedPastMeasuredHeadroomWithTheShortfallRecorded) {
  host.setMemAvailable(10 * GiB);
  reopen();
  json params = {
      {"pools", {"gpu"}}, {"name", "slurm-42"}, {"gpu_memory_max", 48 * GiB}, {"no_wait", true}};
  json unplaced = call(1, 0, "acquire", params);
  EXPECT_EQ(unplaced["error"]["code"], "refused") << unplaced;
  EXPECT_NE(unplaced["error"]["message"].get<std::string>().find("it cannot be granted now"),
            std::string::npos)
      << unplaced;
  params["placed"] = true;
  json mine = params;
  mine["name"] = "my-job";  // slurm-* names are root's anyway
  json user = call(2, 1000, "acquire", mine);
  EXPECT_EQ(user["error"]["code"], "forbidden") << user;
  EXPECT_NE(user["error"]["message"].get<std::string>().find("only root"), std::string::npos);

  json placed = call(3, 0, "acquire", params);
  ASSERT_TRUE(placed["ok"]) << placed;
  std::string id = placed["result"]["lease"];
  auto evs = rows(id);
  ASSERT_FALSE(evs.empty());
  ASSERT_EQ(evs[0].kind, "granted");
  json body = json::parse(evs[0].body);
  EXPECT_EQ(body["placed"], true);
  EXPECT_EQ(body["shortfall"]["pool"], "gpu");
  EXPECT_EQ(body["shortfall"]["gpu"]["needed_bytes"], 48 * GiB);
  EXPECT_EQ(body["shortfall"]["gpu"]["free_bytes"], 10 * GiB);
  EXPECT_EQ(body["shortfall"]["gpu"]["short_bytes"], 38 * GiB);
  EXPECT_FALSE(body["shortfall"].contains("host")) << "no memory budget: host does not count";
  // The row reads back as written (a restart rebuilds the lease from it).
  auto back = ledger::decodeGranted(body);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->placed);
  ASSERT_TRUE(back->shortfall && back->shortfall->gpu);
  EXPECT_EQ(back->shortfall->gpu->bytes(), 38 * GiB);
  // A shortfall row reads only as encode() writes one: more needed than free,
  // the difference said alike, a pool and a resource.
  for (auto damage : std::vector<std::function<void(json&)>>{
           [](json& s) { s["gpu"]["free_bytes"] = 48 * GiB; },
           [](json& s) { s["gpu"]["short_bytes"] = 1; },
           [](json& s) { s["gpu"].erase("short_bytes"); },
           [](json& s) { s.erase("gpu"); },
           [](json& s) { s["pool"] = ""; },
       }) {
    json damaged = body;
    damage(damaged["shortfall"]);
    EXPECT_FALSE(ledger::decodeGranted(damaged)) << damaged["shortfall"];
  }
  bool said = false;
  for (const auto& n : journal.notes)
    said = said ||
           n.message.find("lease " + id +
                          " (slurm-42): granted as the site's scheduler "
                          "placed it, with measured headroom in pool gpu GPU memory "
                          "38.0 GiB short (needs 48.0 GiB, 10.0 GiB free)") != std::string::npos;
  EXPECT_TRUE(said) << "the journal says it";
  std::string text = call(4, 1000, "metrics", json::object())["result"]["text"];
  EXPECT_NE(text.find("tally_placed_shortfall_total{resource=\"gpu\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("tally_placed_shortfall_bytes_total{resource=\"gpu\"} " +
                      std::to_string(38 * GiB) + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tally_placed_shortfall_total{resource=\"host\"} 0\n"), std::string::npos)
      << text;
  // The budget binds a placed lease as any other: 48 + 49 > 96, refused now.
  params["gpu_memory_max"] = 49 * GiB;
  json over = call(5, 0, "acquire", params);
  EXPECT_EQ(over["error"]["code"], "refused") << over;
  EXPECT_NE(over["error"]["message"].get<std::string>().find("budget"), std::string::npos) << over;
}

TEST_F(ServiceTest, OnlyTheOwnerOrRootMayRelease) {
  std::string id = call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  json r = call(2, 1001, "release", {{"lease", id}});
  EXPECT_EQ(r["error"]["code"], "forbidden");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("uid 1000"), std::string::npos);
  EXPECT_EQ(call(2, 1001, "resume", {{"lease", id}})["error"]["code"], "forbidden");
  json record = {{"lease", {{"id", id}}}, {"outcome", {{"class", "exited"}}}};
  EXPECT_EQ(call(2, 1001, "complete", {{"lease", id}, {"record", record}})["error"]["code"],
            "forbidden");
  EXPECT_TRUE(call(3, 0, "release", {{"lease", id}})["ok"]);
  EXPECT_EQ(call(3, 0, "release", {{"lease", id}})["error"]["code"], "not-found");
}

TEST_F(ServiceTest, MalformedRequestsGetErrorsNotCrashes) {
  EXPECT_EQ(call(1, 0, "frobnicate", json::object())["error"]["code"], "unknown-method");
  EXPECT_EQ(call(1, 0, "acquire", {{"pools", "one"}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "acquire", {{"pools", {"one"}}, {"memory_max", -1}})["error"]["code"],
            "invalid-params");
  EXPECT_EQ(call(1, 0, "acquire", {{"pools", {"one"}}, {"priority", 1000}})["error"]["code"],
            "invalid-params");
  EXPECT_EQ(call(1, 0, "acquire", {{"pools", {"one"}}, {"name", "a b"}})["error"]["code"],
            "invalid-params");
  EXPECT_EQ(call(1, 0, "lease", json::object())["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}})["error"]["code"], "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/../etc"}})["error"]["code"],
            "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"pid", 0}})["error"]["code"],
            "invalid-params");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"unit", "x.mount"}})["error"]["code"],
            "invalid-params");
  EXPECT_EQ(service->liveLeases(), 0u);
}

TEST_F(ServiceTest, DisconnectingWhileQueuedCancelsTheRequest) {
  call(1, 0, "acquire", {{"pools", {"one"}}});
  call(2, 0, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(service->queuedRequests(), 1u);
  service->disconnected(2);
  EXPECT_EQ(service->queuedRequests(), 0u);
  EXPECT_EQ(call(3, 0, "leases", json::object())["result"]["leases"].size(), 1u);
}

TEST_F(ServiceTest, QueueTimeoutRepliesTimeout) {
  call(1, 0, "acquire", {{"pools", {"one"}}});
  std::uint64_t sent = clock::monotonicUs();
  call(2, 0, "acquire", {{"pools", {"one"}}, {"timeout_us", 1}});
  while (clock::monotonicUs() <= sent + 1) {
  }  // the barrier: the 1 µs deadline has passed on the clock the daemon reads
  service->tick();
  EXPECT_EQ(outbox.last(2)["error"]["code"], "timeout");
  EXPECT_EQ(service->queuedRequests(), 0u);
}

// The tick wakes the loop four times a second only while something it
// handles waits for a deadline (a queue, a client's grace); otherwise once a
// second, so an idle daemon, or one whose leases just run, wakes less.
TEST_F(ServiceTest, TheTickIsBusyOnlyWhileSomethingItHandlesIsPending) {
  EXPECT_EQ(service->tickIntervalUs(), daemon::Service::kIdleTickUs);
  std::string id = call(1, 0, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  EXPECT_EQ(service->tickIntervalUs(), daemon::Service::kIdleTickUs);  // granted: nothing due
  call(2, 0, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(service->tickIntervalUs(), daemon::Service::kBusyTickUs);  // a queue timeout is due
  service->disconnected(2);
  EXPECT_EQ(service->tickIntervalUs(), daemon::Service::kIdleTickUs);
  std::string scope = "/tally-" + id;
  workloadCgroup(scope, true);
  ASSERT_TRUE(call(1, 0, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  EXPECT_EQ(service->tickIntervalUs(), daemon::Service::kIdleTickUs);  // running with its client
  service->disconnected(1);
  EXPECT_EQ(service->tickIntervalUs(), daemon::Service::kBusyTickUs);  // its client's grace runs
  writeFile(host.cgroupRoot() + scope + "/cgroup.events", "populated 0\n");
  service->cgroupChanged(id);
  service->tick();
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "lost"}));
  EXPECT_EQ(service->tickIntervalUs(), daemon::Service::kIdleTickUs);
}

}  // namespace
}  // namespace tally
