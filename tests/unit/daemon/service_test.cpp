// The lease service: admission, access, attach, run leases, recovery. Every
// reply, event and ledger row is asserted.
#include <filesystem>
#include <functional>

#include "daemon/service_fixture.h"
#include "views/ledger_view.h"

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
                          "38.0 GiB short (declares 48.0 GiB, 10.0 GiB free)") != std::string::npos;
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

TEST_F(ServiceTest, AttachToACgroupMetersItAndEndsWhenItEmpties) {
  workloadCgroup("/machine.slice/podman-1.scope", true);
  FakeProcess p;
  p.pid = 4242;
  p.cgroup = "/machine.slice/podman-1.scope";
  FakeFd fd;
  fd.drmMinor = 128;
  fd.fdinfo = amdgpuFdinfo(7, "0000:c6:00.0", 4 * 1024 * 1024, 0);  // 4 GiB GTT
  p.fds = {fd};
  host.addProcess(p);
  host.addCgroup("/machine.slice/podman-1.scope", {4242});
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"cgroup", "/machine.slice/podman-1.scope"},
                 {"gpu_memory_max", 8 * GiB},
                 {"memory_max", 3 * GiB},
                 {"name", "llama"}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string id = r["result"]["lease"];
  EXPECT_EQ(r["result"]["state"], "running");
  // A plain cgroup (not a unit): memory.max written directly and read back.
  EXPECT_EQ(readFile(host.cgroupRoot() + "/machine.slice/podman-1.scope/memory.max"), "3221225472");
  EXPECT_TRUE(units.memoryMaxCalls.empty());
  EXPECT_EQ(watches.paths[id], host.cgroupRoot() + "/machine.slice/podman-1.scope/cgroup.events");
  EXPECT_EQ(r["result"]["gpu"]["current_bytes"], 4 * GiB);
  EXPECT_EQ(r["result"]["memory"]["current_bytes"], GiB);
  service->sample();
  auto samples = ledgerDb->samples(id);
  ASSERT_EQ(samples->size(), 1u);
  EXPECT_EQ((*samples)[0].memoryCurrent, GiB);
  EXPECT_EQ((*samples)[0].byClass.hostUncharged, 4 * GiB);
  EXPECT_EQ((*samples)[0].gpuBytes, 4 * GiB);
  // A second lease on the same cgroup is a conflict.
  EXPECT_EQ(call(2, 0, "attach",
                 {{"pools", {"gpu"}},
                  {"cgroup", "/machine.slice/podman-1.scope"},
                  {"gpu_memory_max", GiB},
                  {"memory_max", GiB}})["error"]["code"],
            "conflict");
  // The workload ends: another OOM kill happened meanwhile (1 -> 2).
  writeFile(host.cgroupRoot() + "/machine.slice/podman-1.scope/memory.events",
            "oom 2\noom_kill 2\n");
  writeFile(host.cgroupRoot() + "/machine.slice/podman-1.scope/cgroup.events",
            "populated 0\nfrozen 0\n");
  service->cgroupChanged(id);
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "adopted", "outcome"}));
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["outcome"]["class"], "oom-killed");
  EXPECT_EQ(outcome["outcome"]["oom_kill"], 1);  // the lease's, not the cgroup's lifetime 2
  EXPECT_EQ(outcome["memory"]["peak_bytes"], 2 * GiB);
  EXPECT_EQ(outcome["gpu"]["peak_bytes"], 4 * GiB);
  EXPECT_EQ(outcome["lease"]["kind"], "attach");
  // No wait status exists for a workload tally did not start: none is invented.
  EXPECT_FALSE(outcome["outcome"].contains("tally_exit_status"));
  auto listed = ledgerDb->recent(5);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->back().entry.outcomeClass, "oom-killed");
  EXPECT_FALSE(listed->back().entry.exitStatus);
  EXPECT_EQ(service->liveLeases(), 0u);
  EXPECT_TRUE(watches.paths.empty());
}

// An attacher that reaps the workload itself (the Slurm plugin: slurmstepd
// reaps a step's tasks) promises its wait status: the outcome waits for it
// when the cgroup empties, records it, and ends without it at the deadline.
TEST_F(ServiceTest, AnAttachersExitReportIsWaitedForAndRecorded) {
  auto attachReporting = [&](const std::string& cg, pid_t pid) {
    workloadCgroup(cg, true);
    host.addCgroup(cg, {pid});
    json r =
        call(1, 0, "attach",
             {{"pools", {"gpu"}}, {"cgroup", cg}, {"gpu_memory_max", GiB}, {"reports_exit", true}});
    EXPECT_TRUE(r["ok"]) << r;
    writeFile(host.cgroupRoot() + cg + "/cgroup.events", "populated 0\nfrozen 0\n");
    return r["result"].value("lease", "");
  };
  clockStep = 0;
  std::string id = attachReporting("/system.slice/slurmstepd.scope/job_7/step_0/user", 4300);
  service->cgroupChanged(id);
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "adopted"})) << "waits for the word";
  json ack = call(2, 0, "exited", {{"lease", id}, {"signal", 9}});
  ASSERT_TRUE(ack["ok"]) << ack;
  ASSERT_EQ(kinds(id).back(), "outcome") << "the word came: it ends now";
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["outcome"]["signal"], 9);
  EXPECT_EQ(outcome["outcome"]["signal_name"], "SIGKILL");
  EXPECT_NE(outcome["outcome"]["summary"].get<std::string>().find(
                "its tasks were killed by SIGKILL (its attacher's report)"),
            std::string::npos)
      << outcome.dump(2);
  EXPECT_FALSE(outcome["outcome"].contains("tally_exit_status")) << "tally ran nothing";
  // The word never comes: it ends at the deadline, without a made-up status.
  std::string silent = attachReporting("/system.slice/slurmstepd.scope/job_8/step_0/user", 4301);
  service->cgroupChanged(silent);
  service->tick();
  EXPECT_EQ(kinds(silent).size(), 2u);
  clockUs += rpc::api::kExitReportWaitUs;
  service->tick();
  ASSERT_EQ(kinds(silent).back(), "outcome");
  json quiet = json::parse(rows(silent).back().body);
  EXPECT_FALSE(quiet["outcome"].contains("exit_code"));
  EXPECT_FALSE(quiet["outcome"].contains("signal"));
  // Only for a live attach lease, and only its owner or root.
  EXPECT_EQ(call(3, 0, "exited", {{"lease", silent}, {"exit_code", 0}})["error"]["code"],
            "not-found");
}

// systemd removes a stopped unit's cgroup, often before the lease ends (its
// attacher's report is awaited, or systemd is first): the record keeps the
// counters the daemon read while the cgroup existed (when it emptied, or at
// its last memory.events change, which an OOM kill notifies) and says when;
// with none, the sampled peak stands in for memory.peak, marked as such.
TEST_F(ServiceTest, ACgroupRemovedBeforeTheLeaseEndsKeepsTheCountersReadWhileItExisted) {
  auto attach = [&](const std::string& cg, pid_t pid, bool reports) {
    workloadCgroup(cg, true);
    host.addCgroup(cg, {pid});
    json r = call(1, 0, "attach",
                  {{"pools", {"gpu"}},
                   {"cgroup", cg},
                   {"gpu_memory_max", GiB},
                   {"memory_max", 3 * GiB},
                   {"reports_exit", reports}});
    EXPECT_TRUE(r["ok"]) << r;
    return r["result"].value("lease", "");
  };
  auto remove = [&](const std::string& cg) { std::filesystem::remove_all(host.cgroupRoot() + cg); };
  // Read when it emptied; removed while its attacher's word was awaited.
  const std::string a = "/system.slice/slurmstepd.scope/job_9/step_0/user";
  std::string emptied = attach(a, 4400, true);
  EXPECT_EQ(watches.all[emptied].back(), host.cgroupRoot() + a + "/memory.events")
      << "an OOM kill notifies memory.events: the daemon reads the counters then too";
  writeFile(host.cgroupRoot() + a + "/memory.events", "oom 2\noom_kill 2\n");
  writeFile(host.cgroupRoot() + a + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(emptied);
  remove(a);
  ASSERT_TRUE(call(2, 0, "exited", {{"lease", emptied}, {"signal", 9}})["ok"]);
  json one = json::parse(rows(emptied).back().body);
  EXPECT_EQ(one["outcome"]["class"], "oom-killed") << one.dump(2);
  EXPECT_EQ(one["outcome"]["oom_kill"], 1);
  EXPECT_EQ(one["memory"]["peak_bytes"], 2 * GiB);
  EXPECT_EQ(one["memory"]["read_before_end"]["when"],
            "read when the cgroup emptied, before it was removed");
  EXPECT_NE(one["outcome"]["summary"].get<std::string>().find(
                "oom_kill +1, MemoryMax=3.0 GiB; read when the cgroup emptied, before it was "
                "removed)"),
            std::string::npos)
      << one["outcome"]["summary"];

  // Read at its last memory.events change (still running then); removed
  // before any cgroup.events word: the sample finds it gone.
  const std::string b = "/system.slice/llama.service";
  std::string changed = attach(b, 4401, false);
  writeFile(host.cgroupRoot() + b + "/memory.events", "oom 1\noom_kill 1\n");
  service->cgroupChanged(changed);  // memory.events changed: no OOM kill since adoption
  EXPECT_EQ(kinds(changed).size(), 2u) << "still running: nothing ends";
  remove(b);
  service->sample();
  ASSERT_EQ(kinds(changed).back(), "outcome");
  json two = json::parse(rows(changed).back().body);
  EXPECT_EQ(two["outcome"]["class"], "ended") << two.dump(2);
  EXPECT_EQ(two["outcome"]["oom_kill"], 0);
  EXPECT_NE(two["outcome"]["summary"].get<std::string>().find(
                "the kernel OOM killer killed none of its processes (memory.events: read when "
                "memory.events last changed, before the cgroup was removed; a later change is "
                "not seen)"),
            std::string::npos)
      << two["outcome"]["summary"];

  // Removed between two of its files as the end read them (memory.events
  // read, memory.peak gone a moment later): the file the end missed comes
  // from the read made when it emptied, and the record says which and when;
  // memory.events was read at the end, so the OOM line carries no caveat.
  const std::string d = "/system.slice/slurmstepd.scope/job_10/step_0/user";
  std::string torn = attach(d, 4403, true);
  writeFile(host.cgroupRoot() + d + "/memory.events", "oom 1\noom_kill 1\n");
  writeFile(host.cgroupRoot() + d + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(torn);
  std::filesystem::remove(host.cgroupRoot() + d + "/memory.peak");
  ASSERT_TRUE(call(2, 0, "exited", {{"lease", torn}, {"exit_code", 0}})["ok"]);
  json four = json::parse(rows(torn).back().body);
  EXPECT_EQ(four["memory"]["peak_bytes"], 2 * GiB) << four["memory"].dump(2);
  EXPECT_FALSE(four["memory"].contains("peak_unknown")) << four["memory"].dump(2);
  EXPECT_EQ(four["memory"]["read_before_end"]["when"],
            "memory.peak read when the cgroup emptied, before it was removed");
  EXPECT_EQ(four["outcome"]["oom_kill"], 0);
  EXPECT_EQ(four["outcome"]["summary"].get<std::string>().find("read when"), std::string::npos)
      << four["outcome"]["summary"];

  // Never read before it was gone: memory.peak is unknown with its reason,
  // and the sampled peak is what the ledger shows, marked '~'.
  const std::string c = "/system.slice/gone.service";
  std::string never = attach(c, 4402, false);
  remove(c);
  service->sample();
  ASSERT_EQ(kinds(never).back(), "outcome");
  json three = json::parse(rows(never).back().body);
  EXPECT_FALSE(three["memory"].contains("peak_bytes"));
  EXPECT_TRUE(three["memory"].contains("peak_unknown")) << three["memory"].dump(2);
  EXPECT_EQ(three["memory"]["sampled"]["peak_current_bytes"], GiB);
  auto table = views::ledgerTable(*ledgerDb->recent(1), true);
  ASSERT_EQ(table.size(), 3u);
  EXPECT_NE(table[1].find("~1.0 GiB"), std::string::npos) << table[1];
  EXPECT_EQ(table[2],
            "(~: the peak of the daemon's samples of memory.current; memory.peak was gone with "
            "the cgroup when the lease ended)");
}

TEST_F(ServiceTest, AttachToAUnitSetsMemoryMaxThroughSystemdAndReadsItBack) {
  workloadCgroup("/system.slice/llama.service", true);
  units.cgroups["llama.service"] = "/system.slice/llama.service";
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"unit", "llama.service"},
                 {"gpu_memory_max", 48 * GiB},
                 {"memory_max", 8 * GiB}});
  ASSERT_TRUE(r["ok"]) << r;
  ASSERT_EQ(units.memoryMaxCalls.size(), 1u);
  EXPECT_EQ(units.memoryMaxCalls[0], std::make_pair(std::string("llama.service"), 8 * GiB));
  EXPECT_EQ(r["result"]["unit"], "llama.service");
  std::string id = r["result"]["lease"];
  json adopted = json::parse(rows(id)[1].body);
  EXPECT_EQ(adopted["applied"]["memory_max"], 8 * GiB);
  // Released: the workload goes on; the outcome says so.
  EXPECT_EQ(call(1, 0, "release", {{"lease", id}})["result"]["state"], "released");
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["outcome"]["class"], "released");
  EXPECT_EQ(outcome["outcome"]["oom_kill"], 0);
}

TEST_F(ServiceTest, AttachFailsClosedWhenTheLimitDoesNotReadBack) {
  workloadCgroup("/system.slice/stubborn.service", true);
  units.cgroups["stubborn.service"] = "/system.slice/stubborn.service";
  units.obey = false;  // systemd "accepts" but memory.max still reads max
  json r = call(1, 0, "attach",
                {{"pools", {"one"}}, {"unit", "stubborn.service"}, {"memory_max", 8 * GiB}});
  EXPECT_EQ(r["error"]["code"], "refused");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("memory.max is max, declared 8589934592"),
            std::string::npos)
      << r;
  EXPECT_EQ(service->liveLeases(), 0u);
}

TEST_F(ServiceTest, AttachRefusals) {
  workloadCgroup("/empty.scope", false);
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/empty.scope"}})["error"]["code"],
            "refused");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/nope"}})["error"]["code"],
            "not-found");
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/"}})["error"]["code"],
            "refused");
  EXPECT_EQ(
      call(1, 0, "attach", {{"pools", {"one"}}, {"unit", "missing.service"}})["error"]["code"],
      "refused");
  // Someone else's cgroup: not for a non-root caller; their own is fine.
  workloadCgroup("/user.slice/theirs.scope", true, 2000);
  workloadCgroup("/user.slice/mine.scope", true, 1000);
  EXPECT_EQ(call(1, 1000, "attach",
                 {{"pools", {"one"}}, {"cgroup", "/user.slice/theirs.scope"}})["error"]["code"],
            "forbidden");
  EXPECT_EQ(call(1, 1000, "attach",
                 {{"pools", {"one"}},
                  {"cgroup", "/user.slice/mine.scope"},
                  {"memory_max", GiB}})["error"]["code"],
            "forbidden");  // MemoryMax on a unit: root only
  EXPECT_TRUE(
      call(1, 1000, "attach", {{"pools", {"one"}}, {"cgroup", "/user.slice/mine.scope"}})["ok"]);
}

// One workload, one lease: a podman container is its libpod-<id>.scope and
// the nested .../container cgroup its processes run in. Either may be leased,
// never both: the second is refused with both leases named, whichever order.
TEST_F(ServiceTest, ACgroupInsideOrAboveAnotherLeasesIsRefused) {
  const std::string scope = "/machine.slice/libpod-4f2a9c1e8b7d.scope";
  workloadCgroup(scope, true);
  workloadCgroup(scope + "/container", true);
  json outer =
      call(1, 0, "attach",
           {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope}, {"name", "qwen"}});
  ASSERT_TRUE(outer["ok"]) << outer;
  std::string id = outer["result"]["lease"];
  json inner =
      call(2, 0, "attach",
           {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope + "/container"}});
  ASSERT_FALSE(inner["ok"]) << inner;
  EXPECT_EQ(inner["error"]["code"], "conflict");
  EXPECT_EQ(inner["error"]["message"],
            fmt::format("cgroup {}/container is inside {}, which lease {} (qwen) already holds: "
                        "one workload, one lease (its memory would be counted twice). Release {} "
                        "first, or attach the workload it holds",
                        scope, scope, id, id));
  EXPECT_TRUE(call(3, 0, "release", {{"lease", id}})["ok"]);
  json nested =
      call(4, 0, "attach",
           {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope + "/container"}});
  ASSERT_TRUE(nested["ok"]) << nested;
  json above =
      call(5, 0, "attach", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope}});
  ASSERT_FALSE(above["ok"]);
  EXPECT_NE(above["error"]["message"].get<std::string>().find(" is above " + scope + "/container"),
            std::string::npos)
      << above;
}

TEST_F(ServiceTest, AttachByPidFollowsItsCgroup) {
  workloadCgroup("/system.slice/ollama.service", true);
  FakeProcess p;
  p.pid = 777;
  p.cgroup = "/system.slice/ollama.service";
  host.addProcess(p);
  json r = call(1, 0, "attach", {{"pools", {"one"}}, {"pid", 777}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["cgroup"], "/system.slice/ollama.service");
  EXPECT_EQ(r["result"]["target"]["pid"], 777);
  EXPECT_EQ(watches.pids[r["result"]["lease"]], 777);  // its exit is watched through a pidfd too
  EXPECT_EQ(call(1, 0, "attach", {{"pools", {"one"}}, {"pid", 778}})["error"]["code"], "not-found");
}

TEST_F(ServiceTest, RunLeaseStartedAndCompletedExactlyOnce) {
  std::string id =
      call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "job"}})["result"]["lease"];
  std::string slice = "/tally.slice/tally-" + id + ".slice";
  std::string scope = slice + "/tally-" + id + ".scope";
  workloadCgroup(slice, true, 1000);
  workloadCgroup(scope, true, 1000);
  // Not the lease's cgroup, or not the caller's: refused.
  workloadCgroup("/other.scope", true, 1000);
  EXPECT_EQ(call(1, 1000, "started", {{"lease", id}, {"cgroup", "/other.scope"}})["error"]["code"],
            "forbidden");
  json s = call(1, 1000, "started",
                {{"lease", id},
                 {"unit", "tally-" + id + ".scope"},
                 {"cgroup", scope},
                 {"counters_cgroup", slice}});
  ASSERT_TRUE(s["ok"]) << s;
  EXPECT_EQ(watches.paths[id], host.cgroupRoot() + slice + "/cgroup.events");
  json record = {{"schema", 1},
                 {"lease", {{"id", id}, {"name", "job"}}},
                 {"outcome", {{"class", "exited"}, {"tally_exit_status", 0}}}};
  EXPECT_EQ(
      call(1, 1000, "complete",
           {{"lease", id}, {"record", {{"lease", {{"id", "someone-else"}}}}}})["error"]["code"],
      "invalid-params");
  json c = call(1, 1000, "complete", {{"lease", id}, {"record", record}});
  ASSERT_TRUE(c["ok"]) << c;
  EXPECT_EQ(call(1, 1000, "complete", {{"lease", id}, {"record", record}})["error"]["code"],
            "not-found");
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "outcome"}));
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["daemon"]["memory_peak_bytes"],
            2 * GiB);  // read by the daemon from the slice itself
  EXPECT_EQ(stored["daemon"]["oom_kill"], 1);
}

TEST_F(ServiceTest, RunLeaseWhoseClientNeverReturnsIsLost) {
  std::string id = call(1, 0, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  std::string scope = "/tally-" + id;
  workloadCgroup(scope, true);
  ASSERT_TRUE(call(1, 0, "started", {{"lease", id}, {"cgroup", scope}})["ok"]);
  service->sample();
  service->disconnected(1);
  service->tick();  // still populated: it may resume later
  EXPECT_EQ(service->liveLeases(), 1u);
  writeFile(host.cgroupRoot() + scope + "/cgroup.events", "populated 0\n");
  service->cgroupChanged(id);
  service->tick();
  EXPECT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "lost"}));
  json lost = json::parse(rows(id).back().body);
  EXPECT_EQ(lost["outcome"]["class"], "lost");
  EXPECT_FALSE(lost["outcome"].contains("tally_exit_status"));  // nobody saw it end
  EXPECT_EQ(lost["memory"]["peak_bytes"], 2 * GiB);
  EXPECT_EQ(lost["ledger_samples"]["count"], 1);
  EXPECT_EQ(lost["ledger_samples"]["memory_current_peak_bytes"], GiB);
}

TEST_F(ServiceTest, RecoveryReadoptsLiveLeasesAndClosesVanishedOnesOnce) {
  workloadCgroup("/system.slice/a.service", true);
  workloadCgroup("/system.slice/b.service", true);
  std::string a = call(1, 0, "attach",
                       {{"pools", {"gpu"}},
                        {"cgroup", "/system.slice/a.service"},
                        {"gpu_memory_max", GiB}})["result"]["lease"];
  std::string b = call(1, 0, "attach",
                       {{"pools", {"gpu"}},
                        {"cgroup", "/system.slice/b.service"},
                        {"gpu_memory_max", GiB}})["result"]["lease"];
  std::string run = call(2, 0, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  // The daemon dies (kill -9: no goodbye). Meanwhile b's workload goes away.
  service.reset();
  ASSERT_EQ(::system(("rm -rf " + host.cgroupRoot() + "/system.slice/b.service").c_str()), 0);
  reopen();
  auto log = service->recover();
  ASSERT_TRUE(log);
  ASSERT_EQ(log->size(), 3u);
  EXPECT_EQ(service->liveLeases(), 2u);  // a re-adopted, the run lease held for its client
  EXPECT_EQ(kinds(a), (std::vector<std::string>{"granted", "adopted", "readopted"}));
  EXPECT_EQ(kinds(b), (std::vector<std::string>{"granted", "adopted", "lost"}));
  json lostB = json::parse(rows(b).back().body);
  EXPECT_NE(lostB["outcome"]["summary"].get<std::string>().find("is gone"), std::string::npos);
  EXPECT_EQ(lostB["memory"]["sampled"]["peak_unknown"],
            "not sampled since the daemon restarted; see ledger_samples");
  EXPECT_FALSE(lostB["memory"].contains("peak_bytes"));  // the cgroup is gone: absent, not 0
  // A restart again does not record b twice, nor re-adopt a twice over.
  service.reset();
  reopen();
  ASSERT_TRUE(service->recover());
  EXPECT_EQ(kinds(b).size(), 3u);
  EXPECT_EQ(kinds(a).back(), "readopted");
  // A cgroup re-created under the same name is not the same workload.
  // (Renamed away first, so the new directory cannot reuse the old inode.)
  service.reset();
  std::string aDir = host.cgroupRoot() + "/system.slice/a.service";
  ASSERT_EQ(::rename(aDir.c_str(), (aDir + ".old").c_str()), 0);
  workloadCgroup("/system.slice/a.service", true);
  ASSERT_EQ(::system(("rm -rf " + aDir + ".old").c_str()), 0);
  reopen();
  ASSERT_TRUE(service->recover());
  EXPECT_EQ(kinds(a).back(), "lost");
  EXPECT_NE(
      json::parse(rows(a).back().body)["outcome"]["summary"].get<std::string>().find("re-created"),
      std::string::npos);
  // The run lease: its client resumes after the restart.
  EXPECT_TRUE(call(3, 0, "resume", {{"lease", run}})["ok"]);
  EXPECT_TRUE(ledgerDb->verify()->problems.empty());
}

// The Slurm plugin waits at a step's end with the cgroup kept for the
// outcome: a daemon restarted then finds the cgroup empty. Its attacher still
// reports how the tasks ended, so the lease is re-adopted and the outcome
// waits for the word (or the deadline) as before the restart; an attach lease
// nobody reports for is lost, as before.
TEST_F(ServiceTest, AnEmptiedLeaseWhoseAttacherReportsIsWaitedForAcrossARestart) {
  clockStep = 0;
  const std::string stepCg = "/system.slice/slurmstepd.scope/job_11/step_0/user";
  workloadCgroup(stepCg, true);
  workloadCgroup("/system.slice/quiet.service", true);
  json r = call(
      1, 0, "attach",
      {{"pools", {"gpu"}}, {"cgroup", stepCg}, {"gpu_memory_max", GiB}, {"reports_exit", true}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string step = r["result"]["lease"];
  EXPECT_EQ(json::parse(rows(step).front().body)["reports_exit"], true)
      << "the promise is in the granted row, for a restarted daemon";
  std::string quiet = call(1, 0, "attach",
                           {{"pools", {"gpu"}},
                            {"cgroup", "/system.slice/quiet.service"},
                            {"gpu_memory_max", GiB}})["result"]["lease"];
  service.reset();  // kill -9; both empty while no daemon runs
  for (const std::string& cg : {stepCg, std::string("/system.slice/quiet.service")})
    writeFile(host.cgroupRoot() + cg + "/cgroup.events", "populated 0\nfrozen 0\n");
  reopen();
  ASSERT_TRUE(service->recover());
  EXPECT_EQ(kinds(quiet).back(), "lost");
  EXPECT_EQ(kinds(step), (std::vector<std::string>{"granted", "adopted", "readopted"}))
      << "waits for its attacher's word";
  ASSERT_TRUE(call(2, 0, "exited", {{"lease", step}, {"exit_code", 3}})["ok"]);
  ASSERT_EQ(kinds(step).back(), "outcome");
  json outcome = json::parse(rows(step).back().body);
  EXPECT_EQ(outcome["outcome"]["exit_code"], 3) << outcome.dump(2);
  EXPECT_EQ(outcome["daemon"]["readopted_after_restart"], true);
  // The word never comes after a restart: the deadline ends it, as it would have.
  const std::string silentCg = "/system.slice/slurmstepd.scope/job_12/step_0/user";
  workloadCgroup(silentCg, true);
  std::string silent = call(1, 0, "attach",
                            {{"pools", {"gpu"}},
                             {"cgroup", silentCg},
                             {"gpu_memory_max", GiB},
                             {"reports_exit", true}})["result"]["lease"];
  service.reset();
  writeFile(host.cgroupRoot() + silentCg + "/cgroup.events", "populated 0\nfrozen 0\n");
  reopen();
  ASSERT_TRUE(service->recover());
  service->tick();
  EXPECT_EQ(kinds(silent).back(), "readopted");
  clockUs += rpc::api::kExitReportWaitUs;
  service->tick();
  EXPECT_EQ(kinds(silent).back(), "outcome");
}

}  // namespace
}  // namespace tally

namespace tally::testing {
namespace {

// tally attach --container: the client sends the engine's answer (its init
// pid, id and name); the daemon leases the container's whole cgroup after
// checking the kernel puts that pid in it, and records the name.
TEST_F(ServiceTest, AContainerIsLeasedWholeByItsInitPidAndNamed) {
  const std::string id = "3f2a9c0d1b2e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a";
  const std::string scope = "/machine.slice/libpod-" + id + ".scope";
  workloadCgroup(scope, true);
  workloadCgroup(scope + "/container", true);
  FakeProcess init;
  init.pid = 5010;
  init.cgroup = scope + "/container";
  host.addProcess(init);
  json container = {{"engine", "podman"}, {"id", id}, {"name", "comfyui"}};
  json r = call(1, 0, "attach",
                {{"pools", {"gpu"}},
                 {"gpu_memory_max", GiB},
                 {"pid", 5010},
                 {"container", container},
                 {"name", "comfyui"}});
  ASSERT_TRUE(r["ok"]) << r;
  std::string lease = r["result"]["lease"];
  EXPECT_EQ(r["result"]["cgroup"], scope);  // the whole container, not its nested part
  json granted = json::parse(rows(lease)[0].body);
  EXPECT_EQ(granted["target"]["container"], container) << granted.dump(2);
  EXPECT_EQ(granted["target"]["pid"], 5010);
  // The same container by its scope: one workload, one lease.
  json twice =
      call(2, 0, "attach", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"cgroup", scope}});
  EXPECT_EQ(twice["error"]["code"], "conflict") << twice;
  EXPECT_NE(twice["error"]["message"].get<std::string>().find(lease + " (comfyui)"),
            std::string::npos)
      << twice;
  // A pid that is not in the container the engine named (it restarted, or
  // the answer is stale) is refused, naming both.
  FakeProcess other;
  other.pid = 5020;
  other.cgroup = "/system.slice/llama.service";
  host.addProcess(other);
  workloadCgroup("/system.slice/llama.service", true);
  json wrong =
      call(3, 0, "attach",
           {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"pid", 5020}, {"container", container}});
  EXPECT_EQ(wrong["error"]["code"], "refused") << wrong;
  EXPECT_EQ(wrong["error"]["message"],
            "process 5020 is in cgroup /system.slice/llama.service, which is not podman container "
            "comfyui (3f2a9c0d1b2e); did it restart? Run tally attach --container comfyui again");
  // A container without its pid is a malformed request.
  EXPECT_EQ(
      call(4, 0, "attach",
           {{"pools", {"gpu"}}, {"cgroup", scope}, {"container", container}})["error"]["code"],
      "invalid-params");
}

}  // namespace
}  // namespace tally::testing

namespace tally::testing {
namespace {

// tally lease release on a running run lease (a detached job's too): the
// daemon's SIGTERM ends the workload, and the outcome names who stopped it.
TEST_F(ServiceTest, AReleasedRunLeasesOutcomeSaysTheReleaseStoppedIt) {
  std::string id = call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  std::string slice = "/tally.slice/tally-" + id + ".slice";
  std::string scope = slice + "/tally-" + id + ".scope";
  workloadCgroup(slice, true, 1000);
  workloadCgroup(scope, true, 1000);
  ASSERT_TRUE(call(1, 1000, "started",
                   {{"lease", id}, {"cgroup", scope}, {"counters_cgroup", slice}})["ok"]);
  EXPECT_EQ(call(2, 1000, "release", {{"lease", id}})["result"]["state"], "stopping");
  json record = {
      {"schema", 1},
      {"lease", {{"id", id}}},
      {"outcome",
       {{"class", "killed-by-signal"}, {"signal", 15}, {"summary", "killed by SIGTERM"}}}};
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", id}, {"record", record}})["ok"]);
  json stored = json::parse(rows(id).back().body);
  EXPECT_EQ(stored["outcome"]["class"], "stopped");
  EXPECT_EQ(stored["outcome"]["summary"], "stopped by tally lease release: killed by SIGTERM");
  EXPECT_EQ(stored["client"]["outcome"]["class"], "killed-by-signal");  // its word, kept
  // Not released: the wait status the client reaped names it.
  std::string other = call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["lease"];
  std::string slice2 = "/tally.slice/tally-" + other + ".slice";
  workloadCgroup(slice2, true, 1000);
  workloadCgroup(slice2 + "/tally-" + other + ".scope", true, 1000);
  ASSERT_TRUE(call(1, 1000, "started",
                   {{"lease", other},
                    {"cgroup", slice2 + "/tally-" + other + ".scope"},
                    {"counters_cgroup", slice2}})["ok"]);
  record["lease"]["id"] = other;
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", other}, {"record", record}})["ok"]);
  EXPECT_EQ(json::parse(rows(other).back().body)["outcome"]["class"], "killed-by-signal");
}

}  // namespace
}  // namespace tally::testing
