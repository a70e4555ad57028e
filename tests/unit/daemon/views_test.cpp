// What the service shows: seat rows, the overview and its metrics, the
// lifecycle entries in the journal.
#include "daemon/service_fixture.h"

namespace tally {
namespace {

using namespace tally::testing;
using json = nlohmann::json;
constexpr std::uint64_t GiB = 1ULL << 30;

TEST_F(ServiceViewsTest, ASeatRowIsMeasuredDeclaredOrAbsentWithTheReason) {
  std::string id = attachLlama();
  service->sample();
  json reply = call(3, 1000, "seats", json::object());  // any connected user may read seats
  ASSERT_TRUE(reply["ok"]) << reply;
  ASSERT_EQ(reply["result"]["seats"].size(), 1u);
  EXPECT_EQ(reply["result"]["sample_interval_us"], 1'000'000);
  json s = reply["result"]["seats"][0];
  EXPECT_EQ(s["lease"], id);
  EXPECT_EQ(s["name"], "llama");
  EXPECT_EQ(s["kind"], "attach");
  EXPECT_EQ(s["state"], "running");
  EXPECT_EQ(s["pools"], json({"gpu"}));
  EXPECT_EQ(s["workload"]["cgroup"], kPodman);
  EXPECT_EQ(s["workload"]["container"], "podman:3f2a9c0d1b2e");
  EXPECT_EQ(s["running"], true);
  EXPECT_EQ(s["running_source"], "cgroup.events populated");
  EXPECT_EQ(s["fresh"], true);
  EXPECT_TRUE(s["observed_at_ns"].is_number_unsigned());
  EXPECT_EQ(s["host"]["current_bytes"], GiB);     // memory.current of the fixture
  EXPECT_EQ(s["host"]["peak_bytes"], 2 * GiB);    // memory.peak
  EXPECT_TRUE(s["host"]["max_bytes"].is_null());  // memory.max is "max": absent, with the reason
  EXPECT_EQ(s["host"]["max_bytes_unknown"], "memory.max is max: no limit");
  EXPECT_EQ(s["gpu"]["regions"]["gtt"]["current_bytes"], 4 * GiB);
  EXPECT_EQ(s["gpu"]["regions"]["gtt"]["peak_bytes"], 4 * GiB);
  EXPECT_EQ(s["gpu"]["current_bytes"], 4 * GiB);
  EXPECT_EQ(s["gpu"]["limit_bytes"], 8 * GiB);
  EXPECT_EQ(s["gpu"]["source"], "drm-fdinfo");
  EXPECT_EQ(s["devices"], json({"0000:c6:00.0"}));
  EXPECT_EQ(s["declared"]["gpu_memory_max"], 8 * GiB);
  EXPECT_TRUE(s["declared"]["memory_max"].is_null());
  EXPECT_EQ(s["declared"]["attributes"],
            json({{"context_window", "32768"}, {"model", "qwen3-32b"}}));
  // `tally lease show` reads the same attributes from the lease view.
  json shown = call(7, 0, "lease", {{"lease", id}})["result"];
  EXPECT_EQ(shown["attributes"], json({{"context_window", "32768"}, {"model", "qwen3-32b"}}));

  // Three intervals later with no sample in between: stale, and no figure at all.
  std::uint64_t observed = s["observed_at_ns"];
  json stale = service->seats(observed + 3'000'000'000ULL)[0];
  EXPECT_EQ(stale["fresh"], false);
  EXPECT_FALSE(stale.contains("host"));
  EXPECT_FALSE(stale.contains("gpu"));
  EXPECT_EQ(stale["measured_unknown"], "stale: the last sample is older than 2 x sample_interval");
  EXPECT_EQ(stale["declared"]["attributes"]["model"], "qwen3-32b");  // declared facts stay
  // Exactly 2 x interval is still fresh; a sample stamped in the future is not trusted.
  EXPECT_EQ(service->seats(observed + 2'000'000'000ULL)[0]["fresh"], true);
  EXPECT_EQ(service->seats(observed - 1)[0]["fresh"], false);

  // The workload's processes exit: "running" is read now, not at the last sample.
  writeFile(host.cgroupRoot() + kPodman + "/cgroup.events", "populated 0\nfrozen 0\n");
  EXPECT_EQ(service->seats(observed)[0]["running"], false);
}

// Seats, the overview and the metrics show what the lease's sample read,
// never cgroupfs at the request: asking often costs the daemon no read, and
// a change shows at the next sample.
TEST_F(ServiceViewsTest, ASeatShowsWhatTheSampleReadNotCgroupfsAtTheRequest) {
  attachLlama();
  service->sample();
  std::string dir = host.cgroupRoot() + kPodman;
  writeFile(dir + "/memory.peak", "3221225472\n");
  writeFile(dir + "/memory.max", "8589934592\n");
  json before = service->seats(clock::realtimeNs())[0];
  EXPECT_EQ(before["host"]["peak_bytes"], 2 * GiB);
  EXPECT_TRUE(before["host"]["max_bytes"].is_null());
  service->sample();  // the sampler's clock is a second on
  json after = service->seats(clock::realtimeNs())[0];
  EXPECT_EQ(after["host"]["peak_bytes"], 3 * GiB);
  EXPECT_EQ(after["host"]["max_bytes"], 8 * GiB);
}

TEST_F(ServiceViewsTest, AQueuedLeaseHasASeatWithNothingMeasured) {
  workloadCgroup("/system.slice/a.service", true);
  workloadCgroup("/system.slice/b.service", true);
  ASSERT_TRUE(
      call(1, 0, "attach", {{"pools", {"one"}}, {"cgroup", "/system.slice/a.service"}})["ok"]);
  // Queued: an attach (its workload already runs, outside any lease) and a run lease (nothing runs
  // yet).
  service->handle(
      2, daemon::Peer{1000, 0, 0},
      rpc::Request{
          json(98),
          "attach",
          {{"pools", {"one"}}, {"cgroup", "/system.slice/b.service"}, {"name", "waiting"}}});
  service->handle(3, daemon::Peer{1001, 0, 0},
                  rpc::Request{json(99), "acquire", {{"pools", {"one"}}, {"name", "batch"}}});
  json seats = service->seats(clock::realtimeNs());
  ASSERT_EQ(seats.size(), 3u);
  json attachQueued = seats[1], runQueued = seats[2];
  EXPECT_EQ(attachQueued["state"], "queued");
  EXPECT_EQ(attachQueued["running"],
            true);  // measured: its cgroup is populated, the lease just is not granted
  EXPECT_EQ(attachQueued["fresh"], false);
  EXPECT_EQ(attachQueued["measured_unknown"], "the lease is queued, nothing to meter");
  EXPECT_EQ(runQueued["name"], "batch");
  EXPECT_EQ(runQueued["state"], "queued");
  EXPECT_EQ(runQueued["running"], false);
  EXPECT_EQ(runQueued["running_source"], "no cgroup yet: nothing runs in the lease");
  EXPECT_TRUE(runQueued["observed_at_ns"].is_null());
  EXPECT_FALSE(runQueued.contains("host"));
}

TEST_F(ServiceViewsTest, HostileAttributesAreRefusedAndGoodOnesSurviveARestart) {
  workloadCgroup("/system.slice/x.service", true);
  json badKey = call(1, 0, "attach",
                     {{"pools", {"gpu"}},
                      {"cgroup", "/system.slice/x.service"},
                      {"attributes", {{"Model", "x"}}}});
  EXPECT_EQ(badKey["error"]["code"], "invalid-params");
  EXPECT_NE(badKey["error"]["message"].get<std::string>().find("[a-z0-9_]"), std::string::npos)
      << badKey;
  json control = call(1, 0, "attach",
                      {{"pools", {"gpu"}},
                       {"cgroup", "/system.slice/x.service"},
                       {"attributes", {{"model", "a\nb"}}}});
  EXPECT_EQ(control["error"]["code"], "invalid-params");
  json many = json::object();
  for (int i = 0; i < 17; ++i) many[fmt::format("k{}", i)] = "v";
  EXPECT_EQ(call(1, 0, "attach",
                 {{"pools", {"gpu"}},
                  {"cgroup", "/system.slice/x.service"},
                  {"attributes", many}})["error"]["code"],
            "invalid-params");
  EXPECT_EQ(call(1, 0, "attach",
                 {{"pools", {"gpu"}},
                  {"cgroup", "/system.slice/x.service"},
                  {"attributes", "model=x"}})["error"]["code"],
            "invalid-params");
  std::string id = attachLlama();
  reopen();
  ASSERT_TRUE(service->recover());
  service->sample();
  json s = service->seats(clock::realtimeNs())[0];
  EXPECT_EQ(s["lease"], id);
  EXPECT_EQ(s["declared"]["attributes"]["context_window"], "32768");
}

TEST_F(ServiceViewsTest, OverviewAttributesDeviceMemoryAndMetricsCountWhatHappened) {
  std::string id = attachLlama(4);
  service->sample();
  json o = service->overview(clock::realtimeNs());
  // The fixture device: 20 GiB GTT used, 256 MiB VRAM used; the lease holds 4 GiB GTT.
  EXPECT_EQ(o["outside_leases"]["gtt"]["bytes"], 16 * GiB);
  EXPECT_EQ(o["outside_leases"]["gtt"]["device_used_bytes"], 20 * GiB);
  EXPECT_EQ(o["outside_leases"]["vram"]["bytes"], 256ULL << 20);
  EXPECT_EQ(o["devices"][0]["device"], "0000:c6:00.0");
  EXPECT_EQ(o["devices"][0]["regions"]["gtt"]["total_bytes"], 120 * GiB);
  EXPECT_EQ(o["host"]["mem_available_bytes"], 100 * GiB);
  EXPECT_EQ(o["coverage"]["state"], "host");
  EXPECT_EQ(o["daemon"]["leases_live"], 1u);
  EXPECT_EQ(o["daemon"]["version"], "0.9.0-test");  // ServiceEnv::build, as the binary sets it
  EXPECT_EQ(o["daemon"]["commit"], "feedc0ffee12");

  std::string text = call(3, 1000, "metrics", json::object())["result"]["text"];
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("tally_build_info{version=\"0.9.0-test\",commit=\"feedc0ffee12\"} 1")) << text;
  EXPECT_TRUE(
      has(fmt::format("tally_lease_gpu_memory_bytes{{lease=\"{}\",region=\"gtt\",source=\"drm-"
                      "fdinfo\"}} 4294967296",
                      id)))
      << text;
  EXPECT_TRUE(
      has(fmt::format("tally_lease_gpu_memory_counted_bytes{{lease=\"{}\"}} 4294967296", id)));
  EXPECT_TRUE(
      has(fmt::format("tally_lease_declared_gpu_memory_max_bytes{{lease=\"{}\"}} 8589934592", id)));
  EXPECT_TRUE(has(fmt::format("tally_lease_memory_bytes{{lease=\"{}\"}} 1073741824", id)));
  EXPECT_TRUE(has(fmt::format(
      "tally_lease_declared_info{{lease=\"{}\",key=\"model\",value=\"qwen3-32b\"}} 1", id)));
  EXPECT_TRUE(has("tally_gpu_memory_outside_leases_bytes{region=\"gtt\"} 17179869184"));
  EXPECT_TRUE(
      has("tally_device_memory_used_bytes{device=\"0000:c6:00.0\",driver=\"amdgpu\",region=\"gtt\"}"
          " 21474836480"));
  EXPECT_TRUE(has("tally_pool_holders{pool=\"gpu\"} 1"));
  EXPECT_TRUE(has("tally_coverage_info{coverage=\"host\",kernel=\"\"} 1"));
  EXPECT_TRUE(has("tally_memcg_charges_gtt 0"));
  EXPECT_TRUE(has("tally_gpu_bound_events_total{kind=\"gpu-memory-kill\"} 0"));
  EXPECT_TRUE(has("# TYPE tally_lease_outcomes_total counter"));
  // memory.max is "max": no sample for the limit, never a 0.
  EXPECT_EQ(text.find(fmt::format("tally_lease_memory_max_bytes{{lease=\"{}\"}}", id)),
            std::string::npos);

  // The lease grows past its gpu_memory_max: killed after two samples, then it ends.
  writeFile(host.procRoot() + "/5010/fdinfo/3",
            amdgpuFdinfo(21, "0000:c6:00.0", 9 * 1024 * 1024, 0));
  service->sample();
  service->sample();
  ASSERT_TRUE(killed(kPodman));
  writeFile(host.cgroupRoot() + kPodman + "/cgroup.events", "populated 0\nfrozen 0\n");
  service->cgroupChanged(id);
  text = call(3, 1000, "metrics", json::object())["result"]["text"];
  EXPECT_TRUE(has("tally_gpu_bound_events_total{kind=\"gpu-memory-kill\"} 1")) << text;
  EXPECT_TRUE(has("tally_lease_outcomes_total{outcome=\"killed-by-tally\"} 1")) << text;
  EXPECT_EQ(text.find(fmt::format("lease=\"{}\"", id)),
            std::string::npos);  // an ended lease has no seat

  // Its life in the journal, with the structured fields.
  const auto* granted = noteWith("lease-granted", id);
  ASSERT_NE(granted, nullptr);
  EXPECT_EQ(field(*granted, "TALLY_POOL"), "gpu");
  EXPECT_EQ(field(*granted, "TALLY_LEASE_NAME"), "llama");
  const auto* adopted = noteWith("lease-adopted", id);
  ASSERT_NE(adopted, nullptr);
  EXPECT_EQ(field(*adopted, "TALLY_CGROUP"), kPodman);
  const auto* ended = noteWith("lease-outcome", id);
  ASSERT_NE(ended, nullptr);
  EXPECT_EQ(ended->priority, 4);
  EXPECT_EQ(field(*ended, "TALLY_OUTCOME"), "killed-by-tally");
  EXPECT_EQ(field(*ended, "TALLY_MEMORY_PEAK_BYTES"), "2147483648");
  EXPECT_EQ(field(*ended, "TALLY_GPU_PEAK_BYTES"), std::to_string(9 * GiB));
  EXPECT_EQ(field(*ended, "TALLY_EXIT_CODE"), "<absent>");  // an attached workload has none
}

}  // namespace
}  // namespace tally
