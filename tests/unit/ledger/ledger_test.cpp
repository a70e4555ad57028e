#include "ledger/ledger.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <filesystem>

#include "ledger/head_witness.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using namespace tally::testing;

std::string record(const std::string& id, const std::string& cls, int status) {
  return R"({"schema":1,"lease":{"id":")" + id +
         R"(","name":"job","manager":"system"},"started_at_ns":1,"ended_at_ns":2,)" +
         R"("outcome":{"class":")" + cls + R"(","tally_exit_status":)" + std::to_string(status) +
         "}}";
}

// Raw SQL on the ledger file, as someone with write access to it could run.
void sql(const std::string& path, const std::string& statement) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(raw, statement.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(raw);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

constexpr const char* kDropGuards =
    "DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete; DROP INDEX events_one_terminal;";

TEST(Ledger, AppendsAndReadsBackInOrder) {
  TempDir dir;
  std::string state = dir.path() + "/deep/state";
  {
    auto db = ledger::Ledger::open(state);
    ASSERT_TRUE(db) << db.error().message;
    ASSERT_TRUE(db->appendOutcome("a1", record("a1", "exited", 0)));
    ASSERT_TRUE(db->appendOutcome("a2", record("a2", "oom-killed", 137)));
  }
  struct stat st {};
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto db = ledger::Ledger::open(state);  // reopened: the rows survived
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->appendOutcome("a3", record("a3", "containment-refused", 125)));
  auto rows = db->recent(10);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].entry.leaseId, "a1");
  EXPECT_EQ((*rows)[1].entry.outcomeClass, "oom-killed");
  EXPECT_EQ((*rows)[1].entry.exitStatus, 137);
  EXPECT_EQ((*rows)[2].entry.recordJson, record("a3", "containment-refused", 125));
  EXPECT_EQ((*rows)[2].entry.name, "job");
  EXPECT_EQ((*rows)[2].entry.manager, "system");
  EXPECT_EQ((*rows)[2].entry.startedAtNs, 1u);
  auto last = db->recent(1);
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].entry.leaseId, "a3");
  // What append stored: one terminal "outcome" chain row per lease, holding
  // the record as given, chained to the row before it.
  auto events = db->events();
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& e = (*events)[i];
    EXPECT_EQ(e.seq, static_cast<std::int64_t>(i + 1));
    EXPECT_EQ(e.kind, "outcome");
    EXPECT_EQ(e.leaseId, "a" + std::to_string(i + 1));
    EXPECT_EQ(e.prevHash, i == 0 ? std::string(ledger::kGenesisHash) : (*events)[i - 1].hash);
    EXPECT_EQ(e.hash, ledger::rowHash(e.seq, e.atNs, e.leaseId, e.kind, e.body, e.prevHash));
  }
  EXPECT_EQ((*events)[1].body, record("a2", "oom-killed", 137));
}

TEST(Ledger, LeaseIdsAreUniqueAndRowsAreNeverRewritten) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->appendOutcome("same", record("same", "exited", 0)));
  EXPECT_FALSE(db->appendOutcome("same", record("same", "exited", 1)));
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db->path().c_str(), &raw), SQLITE_OK);
  char* err = nullptr;
  EXPECT_NE(sqlite3_exec(raw, "UPDATE events SET body = '{}'", nullptr, nullptr, &err), SQLITE_OK);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(err).find("never rewritten"), std::string::npos);
  sqlite3_free(err);
  EXPECT_NE(sqlite3_exec(raw, "DELETE FROM events", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  EXPECT_EQ(db->recent(5)->size(), 1u);
}

TEST(Ledger, UnwritableStateDirIsAnErrorThatNamesTheFix) {
  TempDir dir;
  writeFile(dir.path() + "/file", "x");
  auto db = ledger::Ledger::open(dir.path() + "/file/state");
  ASSERT_FALSE(db);
  EXPECT_NE(db.error().message.find("state directory"), std::string::npos) << db.error().message;
}

TEST(LedgerChain, EachRowLinksToThePreviousAndVerifies) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db);
  auto a = db->appendEvent("l1", ledger::kGranted, R"({"pools":["gpu"]})", 100);
  auto b = db->appendEvent("l1", ledger::kStarted, R"({"cgroup":"/x"})", 200);
  auto c = db->appendEvent("l1", ledger::kOutcome, record("l1", "exited", 0), 300);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->seq, 1);
  EXPECT_EQ(a->prevHash, ledger::kGenesisHash);
  EXPECT_EQ(b->prevHash, a->hash);
  EXPECT_EQ(c->prevHash, b->hash);
  EXPECT_EQ(a->hash,
            ledger::rowHash(1, 100, "l1", "granted", R"({"pools":["gpu"]})", ledger::kGenesisHash));
  // The chain's format is pinned: every existing ledger's hashes depend on
  // it. This digest was computed outside tally, from the documented format:
  //   printf 'tally-ledger-v2\n1\n100\n2:l1\n7:granted\n17:{"pools":["gpu"]}\n%064d' 0 | sha256sum
  EXPECT_EQ(a->hash, "549fa35b795b805c0f295fc42215fc859dd299d12c9a64a8f4ce400145df274b");
  auto rep = db->verify();
  ASSERT_TRUE(rep);
  EXPECT_TRUE(rep->problems.empty());
  EXPECT_EQ(rep->rows, 3u);
  EXPECT_EQ(rep->headSeq, 3);
  EXPECT_EQ(rep->headHash, c->hash);
  // Field boundaries are part of the hash: moving text between fields changes it.
  EXPECT_NE(ledger::rowHash(1, 1, "ab", "c", "{}", "0"),
            ledger::rowHash(1, 1, "a", "bc", "{}", "0"));
}

TEST(LedgerChain, AnOutcomeIsRecordedOnce) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db->appendEvent("l1", ledger::kGranted, "{}"));
  ASSERT_TRUE(db->appendEvent("l1", ledger::kOutcome, record("l1", "exited", 0)));
  auto again = db->appendEvent("l1", ledger::kLost, "{}");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, EEXIST);
  EXPECT_NE(again.error().message.find("recorded once"), std::string::npos);
  ASSERT_TRUE(
      db->appendEvent("l1", ledger::kNote, R"({"correction":"x"})"));  // corrections are new rows
  EXPECT_TRUE(db->verify()->problems.empty());  // the refused append left no hole
  EXPECT_EQ(db->events()->size(), 3u);
}

TEST(LedgerChain, OpenLeasesAreThoseWithoutATerminalRow) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db->appendEvent("done", ledger::kGranted, "{}"));
  ASSERT_TRUE(db->appendEvent("live", ledger::kGranted, "{}"));
  ASSERT_TRUE(db->appendEvent("live", ledger::kStarted, "{}"));
  ASSERT_TRUE(db->appendEvent("done", ledger::kOutcome, "{}"));
  ASSERT_TRUE(db->appendEvent("gone", ledger::kGranted, "{}"));
  ASSERT_TRUE(db->appendEvent("gone", ledger::kWithdrawn, "{}"));
  ASSERT_TRUE(db->appendEvent("standalone", ledger::kOutcome, "{}"));
  auto open = db->openLeases();
  ASSERT_TRUE(open);
  ASSERT_EQ(open->size(), 1u);
  ASSERT_EQ((*open)[0].size(), 2u);
  EXPECT_EQ((*open)[0][0].leaseId, "live");
  EXPECT_EQ((*open)[0][1].kind, "started");
}

class LedgerTamper : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = ledger::Ledger::open(dir.path());
    ASSERT_TRUE(db);
    for (int i = 1; i <= 5; ++i)
      ASSERT_TRUE(db->appendEvent("l" + std::to_string(i), ledger::kOutcome,
                                  record("l" + std::to_string(i), "exited", i)));
    path = db->path();
  }
  std::vector<std::string> problems() {
    auto db = ledger::Ledger::open(dir.path());
    auto rep = db->verify();
    EXPECT_TRUE(rep);
    return rep->problems;
  }
  TempDir dir;
  std::string path;
};

TEST_F(LedgerTamper, AnEditedRowIsNamed) {
  sql(path, std::string(kDropGuards) +
                "UPDATE events SET body = replace(body, '\"tally_exit_status\":3', "
                "'\"tally_exit_status\":0') WHERE seq = 3;");
  auto p = problems();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("row 3 (lease l3, outcome) was edited"), std::string::npos) << p[0];
}

TEST_F(LedgerTamper, AnEditedRowWithARecomputedHashBreaksTheNextLink) {
  // The forger recomputes row 3's own hash; row 4 still points at the old one.
  auto db = ledger::Ledger::open(dir.path());
  auto rows = db->events();
  const auto& r3 = (*rows)[2];
  std::string body = record("l3", "exited", 0);
  std::string forged = ledger::rowHash(3, r3.atNs, "l3", "outcome", body, r3.prevHash);
  sql(path, std::string(kDropGuards) + "UPDATE events SET body = '" + body + "', hash = '" +
                forged + "' WHERE seq = 3;");
  auto p = problems();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("row 4 does not follow the row before it"), std::string::npos) << p[0];
}

TEST_F(LedgerTamper, ADeletedRowIsNamed) {
  sql(path, std::string(kDropGuards) + "DELETE FROM events WHERE seq = 2;");
  auto p = problems();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NE(p[0].find("row 2 is missing (deleted)"), std::string::npos) << p[0];
  EXPECT_NE(p[1].find("row 3 does not follow"), std::string::npos) << p[1];
}

TEST_F(LedgerTamper, ReorderedRowsAreNamed) {
  // Swap rows 2 and 4 (content and all), keeping each seq in place.
  sql(path, std::string(kDropGuards) +
                "CREATE TEMP TABLE t AS SELECT * FROM events WHERE seq IN (2, 4);"
                "UPDATE events SET at_ns = (SELECT at_ns FROM t WHERE seq = 4), lease_id = (SELECT "
                "lease_id FROM t WHERE seq = 4),"
                " body = (SELECT body FROM t WHERE seq = 4), prev_hash = (SELECT prev_hash FROM t "
                "WHERE seq = 4),"
                " hash = (SELECT hash FROM t WHERE seq = 4) WHERE seq = 2;"
                "UPDATE events SET at_ns = (SELECT at_ns FROM t WHERE seq = 2), lease_id = (SELECT "
                "lease_id FROM t WHERE seq = 2),"
                " body = (SELECT body FROM t WHERE seq = 2), prev_hash = (SELECT prev_hash FROM t "
                "WHERE seq = 2),"
                " hash = (SELECT hash FROM t WHERE seq = 2) WHERE seq = 4;");
  auto p = problems();
  ASSERT_GE(p.size(), 2u);
  std::string all;
  for (const auto& s : p) all += s + "\n";
  EXPECT_NE(all.find("row 2 (lease l4, outcome) was edited"), std::string::npos) << all;
  EXPECT_NE(all.find("row 4 (lease l2, outcome) was edited"), std::string::npos) << all;
}

TEST_F(LedgerTamper, AnUntouchedLedgerStaysIntactAcrossReopen) { EXPECT_TRUE(problems().empty()); }

TEST(LedgerSamples, OneTicksSamplesGoInTogether) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  std::vector<ledger::Sample> tick = {{"a", 10, 1, 2, {.hostUncharged = 2}},
                                      {"b", 10, 3, std::nullopt, {}}};
  ASSERT_TRUE(db->appendSamples(tick));
  ASSERT_TRUE(db->appendSamples({}));
  EXPECT_EQ(db->samples("a")->size(), 1u);
  EXPECT_EQ((*db->samples("a"))[0].byClass.hostUncharged, 2u);
  EXPECT_FALSE((*db->samples("a"))[0].byClass.device);
  EXPECT_EQ((*db->samples("b"))[0].memoryCurrent, 3u);
}

// A lease's chart is computed by the database in at most `points` equal
// spans of time, each the peaks of its span: a month of samples is 240
// points, a one-sample spike is kept, a span never read is absent (not 0).
TEST(LedgerSamples, AChartIsAtMostItsPointsOfPeaksComputedByTheDatabase) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  const std::uint64_t s = 1'000'000'000;
  std::vector<ledger::Sample> rows;
  for (std::uint64_t i = 0; i < 24'000; ++i) {
    std::optional<std::uint64_t> gpu;
    if (i < 12'000) gpu = 100 + i % 7;  // the second half never read the GPU
    rows.push_back({"l1", 1000 * s + i * 2 * s, i == 5'000 ? 9'999'999 : 1000 + i % 13, gpu, {}});
  }
  rows.push_back({"other", 1000 * s, 1, 1, {.device = 1, .hostUncharged = 1}});
  ASSERT_TRUE(db->appendSamples(rows));
  auto chart = db->chart("l1", 240);
  ASSERT_TRUE(chart);
  ASSERT_EQ(chart->size(), 240u);  // 24,000 samples in 240 spans of 100
  EXPECT_EQ(chart->front().atNs, 1000 * s);
  std::uint64_t spikes = 0;
  for (std::size_t i = 0; i < chart->size(); ++i) {
    const auto& p = (*chart)[i];
    if (i) {
      EXPECT_GT(p.atNs, (*chart)[i - 1].atNs);
    }
    if (p.memoryBytes == 9'999'999u) {
      ++spikes;
    } else {
      EXPECT_EQ(p.memoryBytes, 1012u) << i;  // the peak of 1000 + i % 13
    }
    if (i < 120) {
      EXPECT_EQ(p.gpuBytes, 106u) << i;
    } else {
      EXPECT_FALSE(p.gpuBytes) << i;  // never read: absent, not 0
    }
  }
  EXPECT_EQ(spikes, 1u);
  EXPECT_EQ(db->chart("l1", 1000)->size(), 1000u);
  EXPECT_EQ(db->chart("other", 240)->size(), 1u);
  EXPECT_TRUE(db->chart("none", 240)->empty());
}

// A lease's rows in a reply: its first and newest ones, and how many lie
// between (a client reporting bound events for a month writes millions).
TEST(Ledger, ALeasesRowsAreItsFirstAndLastAndACountOfTheRest) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(
        db->appendEvent("a", i == 0 ? "granted" : "gpu-bound", fmt::format("{{\"i\":{}}}", i)));
    ASSERT_TRUE(db->appendEvent("b", "gpu-bound", "{}"));
  }
  auto few = db->leaseRows("a", 64, 64);
  ASSERT_TRUE(few);
  EXPECT_EQ(few->rows.size(), 50u);
  EXPECT_EQ(few->omitted, 0u);
  auto some = db->leaseRows("a", 3, 5);
  ASSERT_TRUE(some);
  ASSERT_EQ(some->rows.size(), 8u);
  EXPECT_EQ(some->omitted, 42u);
  EXPECT_EQ(some->rows[0].kind, "granted");
  EXPECT_EQ(some->rows[2].body, R"({"i":2})");
  EXPECT_EQ(some->rows[3].body, R"({"i":45})");
  EXPECT_EQ(some->rows[7].body, R"({"i":49})");
  for (const auto& r : some->rows) EXPECT_EQ(r.leaseId, "a");
  EXPECT_TRUE(db->leaseRows("none", 3, 5)->rows.empty());
  // The time index: where a replay from a time starts, in one look-up.
  auto rows = db->events();
  ASSERT_EQ(*db->headSeq(), rows->back().seq);
  EXPECT_EQ(*db->seqBefore(0), 0);
  EXPECT_EQ(*db->seqBefore((*rows)[10].atNs + 1), (*rows)[10].seq) << "rows 0..10 are before it";
  EXPECT_EQ(*db->seqBefore(rows->back().atNs + 1), rows->back().seq) << "nothing since";
  // A wall clock stepped back: a later row with an earlier time. Every row
  // at or after the time is replayed, not only those after the earliest.
  TempDir other;
  auto stepped = ledger::Ledger::open(other.path());
  for (std::uint64_t at : {100u, 200u, 300u, 150u})
    ASSERT_TRUE(stepped->appendEvent("c", "x", "{}", at));
  auto all = stepped->events();
  EXPECT_EQ(*stepped->seqBefore(120), (*all)[1].seq - 1)
      << "from the row at 200, not the one at 150";
  EXPECT_EQ(*stepped->seqBefore(301), (*all)[3].seq) << "nothing at or after 301";
  EXPECT_EQ(db->firstOfKind("a", "granted")->value().body, R"({"i":0})");
  EXPECT_FALSE(*db->firstOfKind("b", "granted"));
}

TEST(LedgerSamples, RetentionThinsWithAgeAndCapsRows) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  const std::uint64_t s = 1'000'000'000, minute = 60 * s, hour = 60 * minute;
  const std::uint64_t now = 1000 * hour;
  // 10 s samples over the last 3 hours for one lease, plus one 40 days old.
  for (std::uint64_t t = now - 3 * hour; t < now; t += 10 * s) {
    ASSERT_TRUE(db->appendSample({"l1", t, 1000, std::nullopt, {}}));
  }
  ASSERT_TRUE(
      db->appendSample({"l1", now - 40 * 24 * hour, 5, 6, {.device = 8, .hostUncharged = 7}}));
  auto before = db->samples("l1");
  ASSERT_EQ(before->size(), 3u * 360 + 1);
  EXPECT_EQ(before->front().byClass.hostUncharged, 7u);
  EXPECT_FALSE(before->back().gpuBytes);  // absent stays absent, not 0
  auto removed = db->pruneSamples(now, hour, 30 * 24 * hour, 1'000'000);
  ASSERT_TRUE(removed);
  auto after = db->samples("l1");
  // The last hour at full resolution (360), the two hours before at one per minute (120).
  EXPECT_EQ(after->size(), 360u + 120u);
  EXPECT_EQ(*removed, before->size() - after->size());
  auto capped = db->pruneSamples(now, hour, 30 * 24 * hour, 100);
  ASSERT_TRUE(capped);
  after = db->samples("l1");
  ASSERT_EQ(after->size(), 100u);
  EXPECT_EQ(after->back().atNs, now - 10 * s);  // the newest are kept
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

using namespace tally::testing;

TEST(LedgerHead, TheWitnessReadsBackExactlyAndRefusesAnythingElse) {
  ledger::Head h{692, std::string(64, 'a')};
  auto back = ledger::decodeHead(ledger::encodeHead(h));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->seq, 692);
  EXPECT_EQ(back->hash, h.hash);
  EXPECT_EQ(ledger::encodeHead(h), "tally-ledger-head 1 692 " + std::string(64, 'a') + "\n");
  const std::string hash(64, 'b');
  for (const std::string& bad : std::vector<std::string>{
           std::string(), std::string("tally-ledger-head 1 692 ") + hash,  // no newline
           "tally-ledger-head 2 692 " + hash + "\n", "tally-ledger-head 1 0 " + hash + "\n",
           "tally-ledger-head 1 -3 " + hash + "\n", "tally-ledger-head 1 009 " + hash + "\n",
           "tally-ledger-head 1 +3 " + hash + "\n",
           "tally-ledger-head 1 99999999999999999999 " + hash + "\n",
           "tally-ledger-head 1 7 " + std::string(64, 'B') + "\n",
           "tally-ledger-head 1 7 " + std::string(63, 'b') + "\n",
           "tally-ledger-head 1 7 " + hash + " extra\n", std::string("tally-ledger-head 1 7\n"),
           "tally-ledger-head 1 7 " + hash + "\n\n", std::string("\x1b[2Jtally\0", 10)}) {
    EXPECT_FALSE(ledger::decodeHead(bad)) << bad;
  }
}

// The chain's own links cannot show rows lost at its end (a lost WAL, an
// older copy restored): every row left verifies. The head witness can.
class LedgerLostTail : public LedgerTamper {  // rows 1..5 written and checkpointed
 protected:
  void append(int from, int to, const std::string& cls = "exited") {
    auto db = ledger::Ledger::open(dir.path());
    ASSERT_TRUE(db);
    for (int i = from; i <= to; ++i)
      ASSERT_TRUE(db->appendEvent("l" + std::to_string(i), ledger::kOutcome,
                                  record("l" + std::to_string(i), cls, i)));
  }
  // What a crash that loses the WAL leaves: the database as it was at `copy`.
  void restore(const std::string& copy) {
    std::filesystem::copy_file(copy, path, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
  }
  std::string snapshot() {
    std::string copy = dir.path() + "/older.sqlite";
    std::filesystem::copy_file(path, copy);
    return copy;
  }
};

TEST_F(LedgerLostTail, RowsLostAtTheEndAreNamedThroughTheWitness) {
  std::string older = snapshot();
  append(6, 8);
  EXPECT_TRUE(problems().empty());
  restore(older);
  auto p = problems();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("rows 6..8 at the end are missing: the chain ends at row 5 but its head "
                      "witness"),
            std::string::npos)
      << p[0];
}

TEST_F(LedgerLostTail, ATailWrittenAgainOverLostRowsIsNamed) {
  std::string older = snapshot();
  append(6, 8);
  restore(older);
  {
    // A writer that did not look: the witness stays at the lost row 8.
    append(6, 8, "oom-killed");
  }
  auto p = problems();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("row 8 is not the row its head witness"), std::string::npos) << p[0];
}

TEST_F(LedgerLostTail, AnAcknowledgementAcceptsTheDamageItListsAndNoMore) {
  std::string older = snapshot();
  append(6, 8);
  restore(older);
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db);
  auto open = db->unacceptedDamage();
  ASSERT_EQ(open.size(), 1u);
  auto ack = db->acknowledgeDamage(open, 0);
  ASSERT_TRUE(ack) << ack.error().message;
  EXPECT_EQ(ack->seq, 6);
  EXPECT_EQ(ack->kind, ledger::kDamageAcknowledged);
  // The witness now names the acknowledgement: nothing is open, the chain
  // goes on and new rows are witnessed.
  EXPECT_TRUE(db->unacceptedDamage().empty());
  ASSERT_TRUE(db->appendEvent("l9", ledger::kOutcome, record("l9", "exited", 0)));
  EXPECT_TRUE(db->unacceptedDamage().empty());
  auto accepted = db->acknowledgedDamage();
  ASSERT_TRUE(accepted);
  EXPECT_EQ(*accepted, open);
  // Damage after the acknowledgement is not accepted by it.
  sql(db->path(), std::string(kDropGuards) + "UPDATE events SET at_ns = 1 WHERE seq = 2;");
  auto now = db->unacceptedDamage();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0].find("row 2 (lease l2, outcome) was edited"), std::string::npos) << now[0];
}

// The daemon's form: a row's append returns at its commit, and the witness
// moves once for the rows a turn of the loop committed. A witness left a
// turn behind (a crash before the move) is a shorter witnessed chain, never
// a problem; a move made late still names the newest row.
TEST_F(LedgerLostTail, ADeferredWitnessMovesOnceAtTheTurnsEndToItsLastRow) {
  auto witnessSeq = [&]() -> std::int64_t {
    auto h = ledger::readHead(path);
    return h && *h ? (*h)->seq : 0;
  };
  const std::int64_t before = witnessSeq();
  ASSERT_EQ(before, 5);
  {
    auto db = ledger::Ledger::open(dir.path());
    ASSERT_TRUE(db);
    db->deferHead();
    ASSERT_TRUE(db->appendEvent("l6", ledger::kOutcome, record("l6", "exited", 6)));
    ASSERT_TRUE(db->appendEvent("l7", ledger::kOutcome, record("l7", "exited", 7)));
    EXPECT_EQ(witnessSeq(), 5) << "rows 6 and 7 are committed; the witness waits for the turn";
    EXPECT_TRUE(problems().empty()) << "a witness behind the chain is no damage";
    db->flushHead();
    EXPECT_EQ(witnessSeq(), 7);
    db->flushHead();  // nothing new: nothing moves
    EXPECT_EQ(witnessSeq(), 7);
    ASSERT_TRUE(db->appendEvent("l8", ledger::kOutcome, record("l8", "exited", 8)));
    EXPECT_EQ(witnessSeq(), 7);
  }
  EXPECT_EQ(witnessSeq(), 8) << "a ledger closed with a row unwitnessed moves the witness";
  EXPECT_TRUE(problems().empty());
}

// A write the disk refuses (RLIMIT_FSIZE stands in for a full disk: every
// write past the first byte of a file fails with EFBIG) is remembered until
// a write of the same kind succeeds.
TEST(LedgerWrites, AFailedWriteIsRememberedUntilOneSucceeds) {
  TempDir dir;
  auto db = ledger::Ledger::open(dir.path());
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->appendEvent("a", ledger::kOutcome, record("a", "exited", 0)));
  EXPECT_FALSE(db->writeFailure());
  {
    FileSizeLimit full(1);
    auto ev = db->appendEvent("b", ledger::kOutcome, record("b", "exited", 0));
    EXPECT_FALSE(ev);
    ASSERT_TRUE(db->writeFailure());
    EXPECT_FALSE(db->appendSamples({ledger::Sample{"a", 1, 5, std::nullopt, {}}}));
  }
  EXPECT_TRUE(db->writeFailure());  // still said: nothing has written since
  ASSERT_TRUE(db->appendEvent("b", ledger::kOutcome, record("b", "exited", 0)));
  EXPECT_TRUE(db->writeFailure());  // the samples' failure stands until samples write
  ASSERT_TRUE(db->appendSamples({ledger::Sample{"a", 2, 5, std::nullopt, {}}}));
  EXPECT_FALSE(db->writeFailure());
  EXPECT_TRUE(db->verify()->problems.empty());
}

}  // namespace
}  // namespace tally
