// A config reload (tally daemon reload, SIGHUP): pools and declared leases
// change in place through config check's gate; a change that would strand a
// live lease is refused whole; a waiter the new pools can never grant is
// refused and counted; [daemon] settings are said, not applied.
#include <fstream>

#include "daemon/host_check.h"
#include "daemon/service_fixture.h"

namespace tally::testing {
namespace {

class ReloadTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    file = state.path() + "/tally.toml";
    stateDir = state.path() + "/state";
    ASSERT_EQ(::mkdir(stateDir.c_str(), 0700), 0);
    cfg.daemon.stateDir = stateDir;
    // The file the daemon started from says what `cfg` says.
    write(
        "[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"96GiB\"\n"
        "[pools.one]\ncapacity = 1\n");
    readConfig = [this] { return daemon::readChecked(file, *proc, *sys); };
    reopen();
  }
  void write(const std::string& pools) {
    std::ofstream(file) << fmt::format("[daemon]\nstate_dir = \"{}\"\nclient_grace = 0\n{}",
                                       stateDir, pools);
  }
  json reload(std::uint32_t uid = 0) { return call(9, uid, "reload", json::object()); }
  std::string file, stateDir;
};

TEST_F(ReloadTest, AChangeThatWouldStrandALiveLeaseIsRefusedWholeAndNothingChanges) {
  json one = call(1, 1000, "acquire", {{"pools", {"one"}}, {"name", "solo"}});
  ASSERT_EQ(one["result"]["state"], "granted") << one;
  json big =
      call(2, 1000, "acquire", {{"pools", {"gpu"}}, {"name", "big"}, {"gpu_memory_max", 40 * GiB}});
  ASSERT_EQ(big["result"]["state"], "granted") << big;

  write("[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"32GiB\"\n");
  json r = reload();
  ASSERT_FALSE(r["ok"]) << r;
  EXPECT_EQ(r["error"]["code"], "refused");
  EXPECT_EQ(r["error"]["message"],
            fmt::format("it would strand live leases: pool gpu's gpu_memory_budget 32.0 GiB is "
                        "below what its live leases declare, 40.0 GiB; pool one is removed but 1 "
                        "lease is live in it ({}). Let those leases end, or keep the limits they "
                        "hold, and reload again",
                        one["result"]["lease"].get<std::string>()));
  // Nothing changed: pool one still grants, under its old capacity.
  json pools = call(3, 1000, "pools", json::object());
  ASSERT_EQ(pools["result"]["pools"].size(), 2u) << pools;
  EXPECT_EQ(journal.notes.back().message.rfind("config reload refused, nothing changed: ", 0), 0u);

  // Only root (or the daemon's own user) reloads.
  if (::geteuid() == 0) {
    json user = reload(1000);
    EXPECT_EQ(user["error"]["code"], "forbidden") << user;
  }
  // A file with problems is refused with each, as config check says them.
  write("[pools.gpu]\ncapacity = 4\ngpu_memory_budgt = \"96GiB\"\n[pools.one]\ncapacity = 1\n");
  json bad = reload();
  ASSERT_FALSE(bad["ok"]);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("did you mean 'gpu_memory_budget'?"),
            std::string::npos)
      << bad;
}

TEST_F(ReloadTest, NewLimitsApplyAtOnceAndAWaiterTheyCanNeverGrantIsRefusedAndCounted) {
  ASSERT_EQ(call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["state"], "granted");
  call(2, 1000, "acquire", {{"pools", {"one"}}, {"name", "second"}});
  EXPECT_EQ(outbox.last(2)["event"], "queued");
  json big =
      call(3, 1000, "acquire", {{"pools", {"gpu"}}, {"name", "big"}, {"gpu_memory_max", 40 * GiB}});
  ASSERT_EQ(big["result"]["state"], "granted") << big;
  call(4, 1001, "acquire", {{"pools", {"gpu"}}, {"name", "huge"}, {"gpu_memory_max", 60 * GiB}});
  EXPECT_EQ(outbox.last(4)["waiting_for"], "gpu-memory-budget");

  write(
      "[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"50GiB\"\n"
      "[pools.one]\ncapacity = 2\nallow_users = [\"1000\"]\n");
  json r = reload();
  ASSERT_TRUE(r["ok"]) << r;
  auto reply = rpc::api::decodeReloadReply(r["result"]);
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->changes.size(), 4u) << r;
  EXPECT_EQ(reply->changes[0], "pools.gpu.gpu_memory_budget 96.0 GiB -> 50.0 GiB");
  EXPECT_EQ(reply->changes[1], "pools.one.capacity 1 -> 2");
  EXPECT_EQ(reply->changes[2], "pools.one.allow_users [] -> [1000]");
  EXPECT_NE(reply->changes[3].find("refused: --gpu-memory-max 60.0 GiB is larger than pool gpu's "
                                   "whole GPU memory budget 50.0 GiB"),
            std::string::npos)
      << reply->changes[3];
  // The waiter in "one" is granted under the new capacity; "huge" hears why it ends.
  EXPECT_EQ(outbox.last(2)["result"]["state"], "granted") << outbox.last(2);
  json huge = outbox.last(4);
  EXPECT_EQ(huge["error"]["code"], "refused");
  EXPECT_EQ(huge["error"]["message"].get<std::string>().rfind(
                "the reloaded config can never grant it: --gpu-memory-max 60.0 GiB", 0),
            0u)
      << huge;
  json overview = call(5, 0, "overview", json::object());
  EXPECT_EQ(overview["result"]["enforcement"]["queue_ends"]["refused-by-reload"], 1) << overview;
  // The new access list rules the next request.
  json other = call(6, 1001, "acquire", {{"pools", {"one"}}});
  EXPECT_EQ(other["error"]["code"], "forbidden") << other;
  // Every change is in the journal.
  bool said = false;
  for (const auto& n : journal.notes)
    said = said || n.message == "config reload: pools.one.capacity 1 -> 2";
  EXPECT_TRUE(said);
}

// Access is checked when a request arrives: a reload that narrows a pool's
// access list refuses the waiters it leaves out, rather than grant them later.
TEST_F(ReloadTest, ANarrowedAccessListRefusesTheWaitersItLeavesOut) {
  ASSERT_EQ(call(1, 1000, "acquire", {{"pools", {"one"}}})["result"]["state"], "granted");
  call(2, 1001, "acquire", {{"pools", {"one"}}, {"name", "bobs"}});
  ASSERT_EQ(outbox.last(2)["event"], "queued");
  write(
      "[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"96GiB\"\n"
      "[pools.one]\ncapacity = 1\nallow_users = [\"1000\"]\n");
  json r = reload();
  ASSERT_TRUE(r["ok"]) << r;
  json bob = outbox.last(2);
  EXPECT_EQ(bob["error"]["code"], "forbidden") << bob;
  EXPECT_EQ(
      bob["error"]["message"].get<std::string>().rfind("the reloaded config's access list: ", 0),
      0u)
      << bob;
  EXPECT_EQ(service->queuedRequests(), 0u);
  // Whose lease holds the pool keeps it: access is asked at arrival.
  EXPECT_EQ(service->liveLeases(), 1u);
}

TEST_F(ReloadTest, DaemonSettingsAreSaidNotAppliedAndNoChangeSaysSo) {
  json same = reload();
  ASSERT_TRUE(same["ok"]) << same;
  EXPECT_EQ(same["result"]["changes"], json::array({"nothing changed"}));
  std::ofstream(file) << fmt::format(
      "[daemon]\nstate_dir = \"{}\"\nclient_grace = 0\nsample_interval = \"2s\"\n"
      "[pools.gpu]\ncapacity = 4\ngpu_memory_budget = \"96GiB\"\n[pools.one]\ncapacity = 1\n",
      stateDir);
  json r = reload();
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["changes"],
            json::array({"daemon.sample_interval 1s -> 2s (read at start only: applies at the "
                         "next restart)"}));
}

TEST_F(ReloadTest, WithoutAFileToReadAgainAReloadIsRefusedSayingSo) {
  readConfig = nullptr;
  reopen();
  json r = reload();
  ASSERT_FALSE(r["ok"]);
  EXPECT_EQ(r["error"]["message"],
            "this daemon has no config file to read again; restart it with --config FILE");
}

}  // namespace
}  // namespace tally::testing
