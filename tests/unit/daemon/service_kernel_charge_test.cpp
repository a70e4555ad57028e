// The daemon over the kernel charge (bpf/kernel_charge.h), in memory: each
// lease armed with its bound at its start and disarmed at its end, its GPU
// figure the kernel's charge, refusals said as gpu-bound events (at most one
// per lease per minute), and leases nobody claims after a restart forgotten.
#include <sys/stat.h>

#include <map>

#include "bpf/gpu_charge_abi.h"
#include "bpf/kernel_charge.h"
#include "daemon/kernel_upkeep.h"
#include "daemon/service_fixture.h"
#include "util/clock.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::uint64_t MiB = 1ULL << 20;

// What the kernel holds, as the programs would leave it; every call observed.
struct FakeCharge : bpf::KernelCharge {
  std::map<std::uint64_t, bpf::ArmSpec> specs;
  std::map<std::uint64_t, std::optional<std::uint64_t>> bounds;
  std::map<std::uint64_t, bpf::LeaseCharge> charges;
  std::map<std::uint64_t, bpf::LeaseCharge> endedCharges;  // retired, buffers alive
  std::vector<bpf::Refusal> queued;
  std::vector<std::uint64_t> disarmed;  // retired, in order
  std::vector<bpf::DeviceRule> registered;
  std::optional<Error> armFails;
  bpf::Totals counters;
  bpf::Capabilities capabilities() const override { return {true, true}; }
  Status arm(std::uint64_t id, const bpf::ArmSpec& spec) override {
    if (armFails) return *armFails;
    specs[id] = spec;
    bounds[id] = spec.boundBytes;
    // A charge already there (kept, or an ended lease's of the same cgroup) is carried.
    if (auto e = endedCharges.find(id); e != endedCharges.end()) {
      charges[id] = e->second;
      endedCharges.erase(e);
    }
    charges.emplace(id, bpf::LeaseCharge{});
    return Ok{};
  }
  void retire(std::uint64_t id) override {
    bounds.erase(id);
    auto it = charges.find(id);
    if (it != charges.end() &&
        (it->second.objects ||
         it->second.bytes > it->second.unseenBytes))  // as the kernel keeps it
      endedCharges[id] = it->second;
    if (it != charges.end()) charges.erase(it);
    disarmed.push_back(id);
  }
  std::vector<std::uint64_t> reap() override {
    std::vector<std::uint64_t> gone;
    for (auto it = endedCharges.begin(); it != endedCharges.end();) {
      if (it->second.objects == 0 && it->second.bytes <= it->second.unseenBytes) {
        gone.push_back(it->first);
        it = endedCharges.erase(it);
      } else {
        ++it;
      }
    }
    return gone;
  }
  std::vector<bpf::Ended> ended() const override {
    std::vector<bpf::Ended> out;
    for (const auto& [id, c] : endedCharges) {
      auto spec = specs.find(id);
      out.push_back({id, spec == specs.end() ? 0 : spec->second.parent, c});
    }
    return out;
  }
  std::optional<bpf::LeaseCharge> read(std::uint64_t id) const override {
    auto it = charges.find(id);
    if (it != charges.end()) return it->second;
    it = endedCharges.find(id);
    if (it != endedCharges.end()) return it->second;
    return std::nullopt;
  }
  std::vector<std::uint64_t> armed() const override {
    std::vector<std::uint64_t> ids;
    for (const auto& [id, c] : charges) ids.push_back(id);
    return ids;
  }
  std::vector<bpf::Refusal> refusals(std::size_t) override { return std::exchange(queued, {}); }
  bpf::Totals totals() const override { return counters; }
  Result<std::size_t> addDevices(const std::vector<bpf::DeviceRule>& rules) override {
    std::size_t added = 0;
    for (const auto& r : rules)
      if (std::find(registered.begin(), registered.end(), r) == registered.end()) {
        registered.push_back(r);
        ++added;
      }
    return added;
  }
  std::vector<bpf::DeviceRule> devices() const override { return registered; }
};

class ServiceKernelChargeTest : public ServiceBoundTest {
 protected:
  void SetUp() override {
    kernelCharge = &charge;
    ServiceBoundTest::SetUp();
  }
  std::uint64_t inode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat((host.cgroupRoot() + path).c_str(), &st), 0) << path;
    return st.st_ino;
  }
  json seat(const std::string& lease) {
    json s = service->overview(clock::realtimeNs())["seats"];
    for (const auto& r : s)
      if (r["lease"] == lease) return r;
    return json();
  }
  static std::string scopeOf(const std::string& lease) {
    return "/tally.slice/tally-" + lease + ".scope";
  }
  // A run lease started in its scope with nothing on the GPU yet; `scope` is set to it.
  std::string startedRun(std::string& scope, std::uint64_t gpuMax, const char* action = nullptr) {
    json params = {{"pools", {"gpu"}}, {"gpu_memory_max", gpuMax}, {"name", "model"}};
    if (action) params["gpu_memory_action"] = action;
    json a = call(1, 1000, "acquire", params);
    EXPECT_TRUE(a["ok"]) << a;
    std::string id = a["result"]["lease"];
    scope = scopeOf(id);
    workloadCgroup(scope, true, 1000);
    host.addCgroup(scope, {});  // its processes: none with a DRM fd yet
    json st = call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}});
    EXPECT_TRUE(st["ok"]) << st;
    return id;
  }
  FakeCharge charge;
};

TEST_F(ServiceKernelChargeTest, ARunLeaseIsArmedWithItsBoundAndMeteredFromTheCharge) {
  std::string scope;
  std::string id = startedRun(scope, GiB);
  std::uint64_t cg = inode(scope);
  ASSERT_EQ(charge.bounds.count(cg), 1u) << "armed at its start";
  EXPECT_EQ(charge.bounds[cg], GiB);
  // Buffers the kernel charged it that no fd of its processes shows.
  charge.charges[cg] = {512 * MiB, 900 * MiB, 3, 0, 0};
  service->sample();
  json s = seat(id);
  EXPECT_EQ(s["gpu"]["current_bytes"], 512 * MiB) << s.dump(2);
  EXPECT_EQ(s["gpu"]["peak_bytes"], 900 * MiB) << "the kernel's own peak, between samples too";
  EXPECT_EQ(s["gpu"]["source"], "kernel-charge");
  EXPECT_EQ(s["gpu"]["fdinfo_bytes"], 0u) << "fdinfo's sum, shown beside it";
  EXPECT_EQ(s["gpu"]["allocations_refused"], 0u);
  // Over the bound in the charge (an allocation no decoded ioctl made):
  // the sampled kill stays the backstop.
  writeFile(host.cgroupRoot() + scope + "/cgroup.kill", "");
  charge.charges[cg].bytes = 2 * GiB;
  service->sample();
  service->sample();
  EXPECT_TRUE(killed(scope));
  json rows = json::array();
  for (const auto& r : this->rows(id)) rows.push_back(r.kind);
  EXPECT_EQ(rows.back(), "gpu-bound") << rows;
  EXPECT_NE(json::parse(this->rows(id).back().body)["summary"].get<std::string>().find(
                "(kernel-charge, 2 samples"),
            std::string::npos);
}

// --gpu-memory-action: only `refuse` (the default) gives the kernel the bound;
// `kill` and `report` leases are still charged (the meter stays true) but
// never refused, and only `report` never kills.
TEST_F(ServiceKernelChargeTest, OnlyARefusingLeaseGivesTheKernelItsBound) {
  std::string refuseScope, killScope, reportScope;
  startedRun(refuseScope, GiB, "refuse");
  std::string killer = startedRun(killScope, GiB, "kill");
  std::string reporter = startedRun(reportScope, GiB, "report");
  EXPECT_EQ(charge.bounds.at(inode(refuseScope)), GiB);
  ASSERT_EQ(charge.bounds.count(inode(killScope)), 1u) << "charged all the same";
  EXPECT_EQ(charge.bounds.at(inode(killScope)), std::nullopt);
  EXPECT_EQ(charge.bounds.at(inode(reportScope)), std::nullopt);
  for (const auto& scope : {killScope, reportScope}) {
    writeFile(host.cgroupRoot() + scope + "/cgroup.kill", "");
    charge.charges[inode(scope)].bytes = 2 * GiB;
  }
  service->sample();
  service->sample();
  EXPECT_TRUE(killed(killScope)) << "kill: the sampled kill";
  EXPECT_FALSE(killed(reportScope)) << "report: events only";
  EXPECT_EQ(json::parse(rows(killer).back().body)["kind"], "gpu-memory-kill");
  EXPECT_EQ(json::parse(rows(reporter).back().body)["kind"], "gpu-memory-max-exceeded");
}

TEST_F(ServiceKernelChargeTest, RefusalsAreSaidAsEventsAtMostOncePerLeasePerMinute) {
  std::string scope;
  std::string id = startedRun(scope, GiB);
  std::uint64_t cg = inode(scope);
  EXPECT_TRUE(call(9, 0, "subscribe", json::object())["ok"]);
  charge.charges[cg] = {GiB - 4 * MiB, GiB - 4 * MiB, 2, 3, 48 * MiB};
  for (int i = 0; i < 3; ++i)
    charge.queued.push_back({cg, 16 * MiB, GiB - 4 * MiB, GiB, 4242, 0xc0206440});
  charge.queued.push_back({999, 4096, 0, 4096, 1, 1});  // no lease's: dropped
  service->sample();
  ASSERT_EQ(kinds(id), (std::vector<std::string>{"granted", "started", "gpu-bound"}));
  json row = json::parse(rows(id).back().body);
  EXPECT_EQ(row["kind"], "refused");
  EXPECT_EQ(row["samples"], 3);
  EXPECT_EQ(row["bytes"], 48 * MiB);
  EXPECT_EQ(row["limit"], GiB);
  EXPECT_EQ(row["summary"],
            "3 GPU allocations (48.0 MiB) refused in the kernel at gpu_memory_max 1.0 GiB: the "
            "last asked 16.0 MiB with 1020.0 MiB held (pid 4242); the lease runs on");
  EXPECT_EQ(outbox.last(9)["kind"], "refused");
  ASSERT_FALSE(journal.notes.empty());
  EXPECT_NE(journal.notes.back().message.find("3 GPU allocations (48.0 MiB) refused"),
            std::string::npos);
  // A program retrying in a loop: counted, said again only a minute later.
  charge.queued.push_back({cg, 16 * MiB, GiB - 4 * MiB, GiB, 4242, 0xc0206440});
  charge.queued.push_back({cg, 16 * MiB, GiB - 4 * MiB, GiB, 4242, 0xc0206440});
  service->sample();
  EXPECT_EQ(kinds(id).size(), 3u) << "within the minute: no row";
  clockUs += 61'000'000;
  service->sample();
  ASSERT_EQ(kinds(id).size(), 4u);
  EXPECT_EQ(json::parse(rows(id).back().body)["samples"], 2);
  json s = seat(id);
  EXPECT_EQ(s["gpu"]["allocations_refused"], 3u) << "the kernel's own count";
  EXPECT_EQ(s["gpu"]["refused_bytes"], 48 * MiB);
  // The end: the outcome carries the kernel's figures, and the lease is disarmed.
  json record = {{"schema", 1},
                 {"lease", {{"id", id}}},
                 {"outcome", {{"class", "exited"}, {"exit_code", 0}, {"summary", "exited"}}}};
  json done = call(1, 1000, "complete", {{"lease", id}, {"record", record}});
  ASSERT_TRUE(done["ok"]) << done;
  // The reply says the kernel's figures to the client, which sampled only fdinfo.
  EXPECT_EQ(done["result"]["kernel_charge"]["allocations_refused"], 3u) << done;
  EXPECT_EQ(done["result"]["kernel_charge"]["refused_bytes"], 48 * MiB) << done;
  EXPECT_EQ(done["result"]["kernel_charge"]["peak_bytes"], GiB - 4 * MiB) << done;
  json outcome = json::parse(rows(id).back().body);
  EXPECT_EQ(outcome["gpu"]["kernel_charge"]["allocations_refused"], 3u) << outcome.dump(2);
  EXPECT_EQ(outcome["gpu"]["kernel_charge"]["refused_bytes"], 48 * MiB);
  EXPECT_EQ(charge.disarmed, (std::vector<std::uint64_t>{cg}));
  EXPECT_TRUE(charge.charges.empty());
}

// The meter never reads below what the lease's own processes hold: a buffer
// passed in (or made before the lease was armed, or by a task moved in) is
// in no charge of this lease, but its fdinfo counts once a walk sees it, and
// a lasting disagreement is said with both figures.
TEST_F(ServiceKernelChargeTest, TheFigureIsNeverBelowWhatTheLeasesOwnProcessesHold) {
  std::string clean;
  std::string a = startedRun(clean, GiB);
  std::uint64_t cg = inode(clean);
  gpuWorkload(clean, 5030, 41, 4);  // passed in: 4 GiB its processes hold, none charged
  service->sample();
  EXPECT_EQ(seat(a)["gpu"]["current_bytes"], 0u) << "not walked yet: the charge held still";
  // A task moved into the lease (the kernel counts it): walked at once.
  charge.charges[cg].movedIn = 1;
  service->sample();
  json s = seat(a);
  EXPECT_EQ(s["gpu"]["current_bytes"], 4 * GiB) << s.dump(2);
  EXPECT_EQ(s["gpu"]["source"], "drm-fdinfo");
  EXPECT_EQ(s["gpu"]["fdinfo_bytes"], 4 * GiB);
  // Over its 1 GiB bound at fdinfo's figure, walked every sample now: killed.
  service->sample();
  EXPECT_TRUE(killed(clean));
  service->sample();
  // Said once, with both figures, after three walks above the charge.
  int said = 0;
  for (const auto& n : journal.notes)
    if (n.message.find("its processes hold 4.0 GiB of GPU memory by fdinfo, the kernel charged it "
                       "0 B") != std::string::npos)
      ++said;
  EXPECT_EQ(said, 1);

  // Attached to a workload already holding 4 GiB: made before it was armed,
  // in no charge; fdinfo is its figure from the first sample, and it is bounded by it.
  std::string early = "/machine.slice/early.scope";
  gpuWorkload(early, 5031, 42, 4);
  json b = call(2, 0, "attach",
                {{"pools", {"gpu"}}, {"cgroup", early}, {"gpu_memory_max", GiB}, {"force", true}});
  ASSERT_TRUE(b["ok"]) << b;
  std::string bid = b["result"]["lease"];
  service->sample();
  service->sample();
  EXPECT_EQ(seat(bid)["gpu"]["source"], "drm-fdinfo");
  EXPECT_TRUE(killed(early));
}

// The Slurm plugin asks for the lease as the step's tasks end, between
// samples: the reply carries the kernel's counters as of the question, and
// the refusal waiting in the kernel is already a ledger row.
TEST_F(ServiceKernelChargeTest, ALeaseQueryBetweenSamplesSeesTheKernelsRefusalsNow) {
  std::string scope;
  std::string id = startedRun(scope, 64 * MiB);
  std::uint64_t cg = inode(scope);
  service->sample();
  charge.charges[cg] = {0, 0, 0, 1, 128 * MiB};
  charge.queued.push_back({cg, 128 * MiB, 0, 64 * MiB, 4242, 0xc0106442});
  json r = call(3, 0, "lease", {{"lease", id}});
  ASSERT_TRUE(r["ok"]) << r;
  EXPECT_EQ(r["result"]["gpu"]["allocations_refused"], 1u) << r.dump(2);
  EXPECT_EQ(r["result"]["gpu"]["refused_bytes"], 128 * MiB);
  bool refusedRow = false;
  for (const auto& row : r["result"]["ledger"])
    refusedRow = refusedRow || (row["kind"] == "gpu-bound" && row["body"]["kind"] == "refused");
  EXPECT_TRUE(refusedRow) << r["result"]["ledger"].dump(2);
  EXPECT_FALSE(r["result"]["samples"].is_null());

  // `live` (the plugin at each step's end): the same counters, now, without
  // the rows and samples whose number grows with the lease's age.
  charge.charges[cg] = {0, 0, 0, 2, 192 * MiB};
  charge.queued.push_back({cg, 64 * MiB, 0, 64 * MiB, 4242, 0xc0106442});
  json live = call(4, 0, "lease", {{"lease", id}, {"live", true}});
  ASSERT_TRUE(live["ok"]) << live;
  EXPECT_EQ(live["result"]["gpu"]["allocations_refused"], 2u) << live.dump(2);
  EXPECT_EQ(live["result"]["gpu"]["refused_bytes"], 192 * MiB);
  EXPECT_EQ(live["result"]["state"], "running");
  EXPECT_FALSE(live["result"].contains("ledger")) << live.dump(2);
  EXPECT_FALSE(live["result"].contains("samples")) << live.dump(2);
}

// A lease metered by its charge is walked (fdinfo, the breakdown beside the
// charge) only when the charge moves, and on a few samples after while the
// two disagree; holding still it costs no per-process walk however long.
TEST_F(ServiceKernelChargeTest, FdinfoIsWalkedWhenTheChargeMovesNotWhileItHoldsStill) {
  std::string scope;
  std::string id = startedRun(scope, 16 * GiB);
  std::uint64_t cg = inode(scope);
  service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 0u);
  // fdinfo changes behind a charge that holds still (a buffer passed in):
  // not walked until the charge moves or the slow refresh comes round.
  gpuWorkload(scope, 5040, 43, 1);
  service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 0u) << "the charge held still and agreed: no walk";
  // The charge moves: walked at once.
  charge.charges[cg].bytes = 2 * GiB;
  service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], GiB);
  EXPECT_EQ(seat(id)["gpu"]["current_bytes"], 2 * GiB);
  // They disagree (the new buffer's handle is not in fdinfo yet): walked on
  // the next samples, which see it.
  gpuWorkload(scope, 5041, 44, 2);  // the cgroup's one process now
  service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 2 * GiB);
  // Moved again, and fdinfo trails: walked again after 1, 2, 4, ... samples.
  charge.charges[cg].bytes = 3 * GiB;
  service->sample();  // the move: walked (2 GiB)
  service->sample();  // 1 sample on: walked (2 GiB)
  service->sample();
  service->sample();  // 2 samples on: walked (2 GiB)
  gpuWorkload(scope, 5042, 45, 3);
  for (unsigned i = 0; i < 3; ++i) service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 2 * GiB) << "the next walk is 4 samples on";
  service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 3 * GiB);
  // Agreeing now: not walked again until the charge moves.
  gpuWorkload(scope, 5044, 47, 4);
  for (unsigned i = 0; i < 20; ++i) service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 3 * GiB) << "holding still and agreeing: not walked";
  charge.charges[cg].bytes = 4 * GiB;
  service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 4 * GiB) << "the next move walks it";
  // Holding still and agreeing: walked once in the slow refresh's samples.
  gpuWorkload(scope, 5043, 46, 5);
  for (unsigned i = 1; i < lease::LeaseMeter::kSteadyWalkEvery; ++i) service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 4 * GiB);
  service->sample();
  EXPECT_EQ(seat(id)["gpu"]["fdinfo_bytes"], 5 * GiB);
}

TEST_F(ServiceKernelChargeTest, AfterARestartTheLeasesChargesAreKeptAndUnclaimedOnesForgotten) {
  std::string scope;
  std::string id = startedRun(scope, GiB);
  std::uint64_t cg = inode(scope);
  charge.charges[cg] = {256 * MiB, 300 * MiB, 1, 1, 8 * MiB};
  charge.charges[777] = {64 * MiB, 64 * MiB, 1, 0, 0};  // a lease that ended while no daemon ran
  reopen();
  auto lines = service->recover();
  ASSERT_TRUE(lines) << lines.error().message;
  EXPECT_EQ(charge.charges.count(777), 0u) << "no lease claims it";
  ASSERT_EQ(charge.charges.count(cg), 1u);
  EXPECT_EQ(charge.charges[cg].refused, 1u) << "re-armed with its charge intact";
  EXPECT_EQ(charge.bounds[cg], GiB);
  service->sample();
  EXPECT_EQ(seat(id)["gpu"]["current_bytes"], 256 * MiB);
}

// A lease the kernel's charge cannot cover is refused before it runs, with
// the reason: never armed and blind.
TEST_F(ServiceKernelChargeTest, ALeaseTheChargeCannotCoverIsRefusedBeforeItRuns) {
  // No room in the kernel's maps.
  charge.armFails = Error{E2BIG, "the kernel charge has no room for cgroup 7"};
  gpuWorkload("/machine.slice/full.scope", 5060, 60, 1);
  json a = call(
      2, 0, "attach",
      {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/full.scope"}, {"gpu_memory_max", 2 * GiB}});
  ASSERT_FALSE(a["ok"]) << a;
  EXPECT_NE(a["error"]["message"].get<std::string>().find("cannot be charged in the kernel: the "
                                                          "kernel charge has no room"),
            std::string::npos)
      << a;
  EXPECT_EQ(service->liveLeases(), 0u);
  // A run lease's start is refused the same (its client never lets the workload go).
  json acq =
      call(1, 1000, "acquire", {{"pools", {"gpu"}}, {"gpu_memory_max", GiB}, {"name", "model"}});
  ASSERT_TRUE(acq["ok"]) << acq;
  std::string id = acq["result"]["lease"];
  std::string scope = scopeOf(id);
  workloadCgroup(scope, true, 1000);
  json st = call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}});
  ASSERT_FALSE(st["ok"]) << st;
  EXPECT_EQ(st["error"]["code"], "refused");
  charge.armFails.reset();
  json again = call(1, 1000, "started", {{"lease", id}, {"cgroup", scope}});
  EXPECT_TRUE(again["ok"]) << again;

  // A cgroup deeper than the programs' lease lookup walks (64 levels).
  std::string deep = "/machine.slice";
  for (int i = 0; i < 70; ++i) deep += "/d";
  gpuWorkload(deep, 5061, 61, 1);
  json d =
      call(2, 0, "attach", {{"pools", {"gpu"}}, {"cgroup", deep}, {"gpu_memory_max", 2 * GiB}});
  ASSERT_FALSE(d["ok"]) << d;
  EXPECT_NE(d["error"]["message"].get<std::string>().find("71 levels deep: the kernel "
                                                          "charge finds a lease in the first 64 "
                                                          "levels only"),
            std::string::npos)
      << d;
  EXPECT_EQ(charge.specs.count(inode(deep)), 0u) << "never armed";
}

// Buffers that outlive their lease stay counted: said and recorded when it
// ends holding them, counted against its pool's GPU budget (a waiter waits)
// until freed, then said and recorded again.
TEST_F(ServiceKernelChargeTest, BuffersThatOutliveTheirLeaseCountAgainstItsPoolUntilFreed) {
  std::string scope;
  std::string id = startedRun(scope, 8 * GiB);
  std::uint64_t cg = inode(scope);
  charge.charges[cg] = {6 * GiB, 6 * GiB, 3};
  service->sample();
  json record = {{"schema", 1},
                 {"lease", {{"id", id}}},
                 {"outcome", {{"class", "exited"}, {"exit_code", 0}, {"summary", "exited"}}}};
  ASSERT_TRUE(call(1, 1000, "complete", {{"lease", id}, {"record", record}})["ok"]);
  ASSERT_EQ(charge.endedCharges.count(cg), 1u) << "retired, its buffers alive";
  bool said = false;
  for (const auto& n : journal.notes)
    said = said || n.message.find(
                       "ended holding 6.0 GiB in 3 GPU buffers it created; they stay "
                       "counted against pool gpu's GPU budget until freed") != std::string::npos;
  EXPECT_TRUE(said);
  auto residueRows = [&] {
    std::vector<json> out;
    auto events = ledgerDb->events(std::string());
    if (!events) return out;
    for (const auto& e : *events)
      if (e.kind == "gpu-residue") out.push_back(json::parse(e.body));
    return out;
  };
  ASSERT_EQ(residueRows().size(), 1u);
  EXPECT_EQ(residueRows()[0]["event"], "ended-holding");
  EXPECT_EQ(residueRows()[0]["bytes"], 6 * GiB);
  EXPECT_EQ(residueRows()[0]["lease"], id);
  // The pool (96 GiB of GPU budget) sees 6 GiB held: a 92 GiB request waits.
  clockUs += daemon::KernelUpkeep::kRefreshUs;
  service->sample();
  json pools = service->overview(clock::realtimeNs())["pools"];
  EXPECT_EQ(pools[0]["gpu_residue_bytes"], 6 * GiB) << pools.dump(2);
  (void)call(3, 1000, "acquire",
             {{"pools", {"gpu"}}, {"gpu_memory_max", 92 * GiB}, {"name", "big"}});
  EXPECT_EQ(service->overview(clock::realtimeNs())["queued"]["total"], 1u);
  json ended = service->overview(clock::realtimeNs())["kernel_charge"]["ended_leases"];
  ASSERT_EQ(ended.size(), 1u) << ended.dump(2);
  EXPECT_EQ(ended[0]["lease"], id);
  EXPECT_EQ(ended[0]["bytes"], 6 * GiB);
  EXPECT_EQ(service->liveLeases(), 0u) << "the big request waits for the budget";
  // Freed: said, recorded, and the waiter granted.
  charge.endedCharges[cg] = {};
  clockUs += daemon::KernelUpkeep::kRefreshUs;
  service->sample();
  ASSERT_EQ(residueRows().size(), 2u);
  EXPECT_EQ(residueRows()[1]["event"], "freed");
  EXPECT_EQ(service->overview(clock::realtimeNs())["pools"][0]["gpu_residue_bytes"], 0u);
  EXPECT_EQ(service->liveLeases(), 1u) << "granted once the buffers were freed";
}

// Attached again to the same cgroup (to change a bound): the charge its
// workload holds is carried into the new lease's figure; the earlier
// lease's refusals are not the new one's.
TEST_F(ServiceKernelChargeTest, AttachedAgainTheWorkloadsChargeIsCarriedNotItsRefusals) {
  gpuWorkload("/machine.slice/model.scope", 5070, 70, 0);
  std::uint64_t cg = inode("/machine.slice/model.scope");
  json a = call(
      2, 0, "attach",
      {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/model.scope"}, {"gpu_memory_max", 4 * GiB}});
  ASSERT_TRUE(a["ok"]) << a;
  std::string first = a["result"]["lease"];
  charge.charges[cg] = {3 * GiB, 3 * GiB + 512 * MiB, 2, 5, 5 * GiB};
  service->sample();
  ASSERT_TRUE(call(2, 0, "release", {{"lease", first}})["ok"]);
  ASSERT_EQ(charge.endedCharges.count(cg), 1u);
  json b = call(
      2, 0, "attach",
      {{"pools", {"gpu"}}, {"cgroup", "/machine.slice/model.scope"}, {"gpu_memory_max", 8 * GiB}});
  ASSERT_TRUE(b["ok"]) << b;
  std::string second = b["result"]["lease"];
  EXPECT_EQ(charge.bounds[cg], 8 * GiB);
  service->sample();
  json s = seat(second);
  EXPECT_EQ(s["gpu"]["current_bytes"], 3 * GiB) << "what its workload holds";
  EXPECT_EQ(s["gpu"]["allocations_refused"], 0u) << "the first lease's refusals are not its own";
  charge.charges[cg].refused = 6;
  charge.charges[cg].refusedBytes = 5 * GiB + 64 * MiB;
  service->sample();
  EXPECT_EQ(seat(second)["gpu"]["allocations_refused"], 1u);
  EXPECT_EQ(seat(second)["gpu"]["refused_bytes"], 64 * MiB);
}

// A refusal that failed closed (the kernel could not charge it exactly) is
// said as such, with its reason; what the programs could not do exactly is
// said when it grows, and exported.
TEST_F(ServiceKernelChargeTest, RefusalsThatFailedClosedAndTheProgramsMissesAreSaid) {
  std::string scope;
  std::string id = startedRun(scope, 64 * MiB);
  std::uint64_t cg = inode(scope);
  service->sample();
  charge.charges[cg] = {0, 0, 0, 1, 8 * MiB, 1};
  bpf::Refusal r{cg,
                 8 * MiB,
                 0,
                 64 * MiB,
                 4242,
                 0xc0106442,
                 static_cast<std::uint32_t>(bpf::RefusalReason::Unreadable)};
  charge.queued.push_back(r);
  service->sample();
  json row = json::parse(rows(id).back().body);
  EXPECT_NE(
      row["summary"].get<std::string>().find(
          "1 of them refused failing closed, not at the bound (the last: unreadable-argument)"),
      std::string::npos)
      << row.dump(2);
  // The kernel's counters: a baseline at start, then each rise said.
  clockUs += daemon::KernelUpkeep::kRefreshUs;
  service->sample();
  charge.counters.unseenObjects = 2;
  charge.counters.recursionMisses = 3;
  clockUs += daemon::KernelUpkeep::kAnomalySayUs;
  service->sample();
  bool said = false;
  for (const auto& n : journal.notes)
    said = said || (n.message.find("2 unseen-objects") != std::string::npos &&
                    n.message.find("3 recursion-misses") != std::string::npos);
  EXPECT_TRUE(said);
  json kc = service->overview(clock::realtimeNs())["kernel_charge"];
  EXPECT_EQ(kc["anomalies"]["unseen-objects"], 2u) << kc.dump(2);
  EXPECT_EQ(kc["anomalies"]["recursion-misses"], 3u);
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// A GPU that appears after the daemon started (a hot-plugged eGPU, a driver
// loaded late) is registered for the kernel's charge at the next look, once.
TEST_F(ServiceKernelChargeTest, ADeviceThatAppearsLaterIsRegistered) {
  service->sample();
  clockUs += daemon::KernelUpkeep::kRefreshUs;
  service->sample();  // the first look: the listing as it is
  EXPECT_TRUE(charge.registered.empty());
  FakeDevice egpu;
  egpu.bdf = "0000:0a:00.0";
  egpu.minors = {2, 130};
  host.addDevice(egpu);
  clockUs += daemon::KernelUpkeep::kRefreshUs;
  service->sample();
  bool card = false, render = false;
  for (const auto& r : charge.registered) {
    card = card || (r.major == 226 && r.minor == 2 && r.kind == TALLY_DEVICE_AMDGPU && r.charged);
    render = render || (r.major == 226 && r.minor == 130 && r.charged);
  }
  EXPECT_TRUE(card && render) << charge.registered.size();
  std::size_t n = charge.registered.size();
  clockUs += daemon::KernelUpkeep::kRefreshUs;
  service->sample();
  EXPECT_EQ(charge.registered.size(), n) << "registered once";
  json devices = service->overview(clock::realtimeNs())["kernel_charge"]["devices"];
  EXPECT_EQ(devices.size(), n) << devices.dump(2);
}

// A reload may raise capacities within the room the kernel charge's lease
// map was made with (a quarter of its slots: bpf/sizing.h), and is refused
// past it, saying why; the map outlives the daemon, so a restart would not
// help either.
TEST_F(ServiceKernelChargeTest, AReloadPastTheKernelChargesRoomIsRefused) {
  charge.counters.leasesCapacity = 64;  // room for 16 leases at once
  std::string pools =
      "[pools.gpu]\ncapacity = {}\ngpu_memory_budget = \"96GiB\"\n"
      "[pools.one]\ncapacity = 1\n";
  std::string text;
  readConfig = [&]() -> Result<config::Config> {
    auto p = config::parse(text, "t.toml");
    if (!p.config) return Error{0, config::formatProblems(p, "t.toml")};
    return *p.config;
  };
  reopen();
  text = fmt::format(fmt::runtime(pools), 15);  // 15 + 1: exactly the room
  json ok = call(9, 0, "reload", json::object());
  ASSERT_TRUE(ok["ok"]) << ok;
  text = fmt::format(fmt::runtime(pools), 16);
  json past = call(9, 0, "reload", json::object());
  ASSERT_FALSE(past["ok"]) << past;
  EXPECT_EQ(past["error"]["message"].get<std::string>().rfind(
                "the pools' capacities add up to 17 leases at once, more than the kernel "
                "charge's maps have room for (64 slots, 4 per lease)",
                0),
            0u)
      << past;
}

}  // namespace
}  // namespace tally
