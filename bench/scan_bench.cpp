// Google Benchmark: tally's host-wide and cgroup-scoped scans against the
// syscall floor and a naive reader, on the roots named by the environment:
//   TALLY_BENCH_PROC (default /proc), TALLY_BENCH_SYS (default /sys),
//   TALLY_BENCH_CGROUP + TALLY_BENCH_LEASE (a cgroup root and a lease path).
// After the run it prints each scanner's median time as a ratio to the floor
// (scripts/bench.sh records them in docs/PERFORMANCE.md).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "cgroup/cgroup.h"
#include "devices/drm_devices.h"
#include "enforce/gpu_bound.h"
#include "floor.h"
#include "fs/root.h"
#include "lease/meter.h"
#include "metrics/tally_metrics.h"
#include "probes/sysfs_value.h"
#include "scanner/scan.h"
#include "seats/seat.h"

namespace {

std::string env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? v : fallback;
}

struct Roots {
  tally::fs::Root proc, sys;
  std::optional<tally::fs::Root> cgroup;
  std::string lease;
};

Roots& roots() {
  static Roots r = [] {
    auto proc = tally::fs::Root::open(env("TALLY_BENCH_PROC", "/proc"));
    auto sys = tally::fs::Root::open(env("TALLY_BENCH_SYS", "/sys"));
    if (!proc || !sys) {
      std::fprintf(stderr, "cannot open bench roots\n");
      std::exit(2);
    }
    Roots out{std::move(*proc), std::move(*sys), std::nullopt, env("TALLY_BENCH_LEASE", "")};
    if (auto cg = tally::fs::Root::open(env("TALLY_BENCH_CGROUP", "/nonexistent"));
        cg && !out.lease.empty())
      out.cgroup.emplace(std::move(*cg));
    return out;
  }();
  return r;
}

void BM_TallyHostScan(benchmark::State& state) {
  tally::scanner::Scanner scanner(roots().proc, roots().sys);
  std::size_t clients = 0;
  for (auto _ : state) {
    auto scan = scanner.scanHost();
    if (!scan) state.SkipWithError(scan.error().message.c_str());
    clients = scan ? scan->clients.size() : 0;
    benchmark::DoNotOptimize(clients);
  }
  state.counters["pids"] = static_cast<double>(scanner.stats().pidsVisited);
  state.counters["fds"] = static_cast<double>(scanner.stats().fdsStatted);
  state.counters["drm_fds"] = static_cast<double>(scanner.stats().drmFds);
  state.counters["clients"] = static_cast<double>(clients);
}

void BM_Floor(benchmark::State& state) {
  tally::bench::FloorResult r;
  for (auto _ : state) {
    r = tally::bench::floorScan(roots().proc.fd());
    benchmark::DoNotOptimize(r);
  }
  state.counters["pids"] = static_cast<double>(r.pids);
  state.counters["fds"] = static_cast<double>(r.fds);
  state.counters["drm_fds"] = static_cast<double>(r.drmFds);
}

void BM_Naive(benchmark::State& state) {
  tally::bench::FloorResult r;
  for (auto _ : state) {
    r = tally::bench::naiveScan(roots().proc.path());
    benchmark::DoNotOptimize(r);
  }
  state.counters["pids"] = static_cast<double>(r.pids);
  state.counters["fds"] = static_cast<double>(r.fds);
  state.counters["drm_fds"] = static_cast<double>(r.drmFds);
}

void BM_CgroupFloor(benchmark::State& state) {
  if (!roots().cgroup) {
    state.SkipWithError("no TALLY_BENCH_CGROUP/TALLY_BENCH_LEASE");
    return;
  }
  std::string rel = roots().lease;
  while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
  int dir = ::openat(roots().cgroup->fd(), rel.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  tally::bench::FloorResult r;
  for (auto _ : state) {
    r = tally::bench::cgroupFloorScan(roots().proc.fd(), dir);
    benchmark::DoNotOptimize(r);
  }
  ::close(dir);
  state.counters["pids"] = static_cast<double>(r.pids);
  state.counters["fds"] = static_cast<double>(r.fds);
}

void BM_TallyCgroupScan(benchmark::State& state) {
  if (!roots().cgroup) {
    state.SkipWithError("no TALLY_BENCH_CGROUP/TALLY_BENCH_LEASE");
    return;
  }
  tally::scanner::Scanner scanner(roots().proc, roots().sys);
  for (auto _ : state) {
    auto scan = scanner.scanCgroup(*roots().cgroup, roots().lease);
    if (!scan) state.SkipWithError(scan.error().message.c_str());
    benchmark::DoNotOptimize(scan);
  }
  state.counters["pids"] = static_cast<double>(scanner.stats().pidsVisited);
  state.counters["drm_fds"] = static_cast<double>(scanner.stats().drmFds);
}

// The lease cgroup the lease benchmarks sample (TALLY_BENCH_CGROUP +
// TALLY_BENCH_LEASE); absent, the benchmark is skipped with the reason.
std::optional<tally::cgroup::Cgroup> benchLease(benchmark::State& state) {
  if (!roots().cgroup) {
    state.SkipWithError("no TALLY_BENCH_CGROUP/TALLY_BENCH_LEASE");
    return std::nullopt;
  }
  auto cg = tally::cgroup::Cgroup::open(*roots().cgroup, roots().lease);
  if (!cg) {
    state.SkipWithError(cg.error().message.c_str());
    return std::nullopt;
  }
  return std::move(*cg);
}

// One sample of a lease's meter (memory.current + the cgroup-scoped DRM scan
// + the lease's GPU figure), without and with the GPU bound evaluated on it:
// the bound's cost is the difference (docs/PERFORMANCE.md).
void leaseSample(benchmark::State& state, bool bound) {
  auto leaseCg = benchLease(state);
  if (!leaseCg) return;
  tally::lease::LeaseMeter meter(roots().proc, roots().sys, *leaseCg, std::nullopt);
  tally::enforce::GpuBound b{std::uint64_t{1} << 50, std::uint64_t{1} << 49,
                             tally::enforce::Action::Kill, 2, 1000000};
  tally::enforce::GpuBoundState st;
  std::uint64_t t = 0;
  for (auto _ : state) {
    meter.sample();
    if (bound) {
      auto d = tally::enforce::observe(b, st, meter.gpu().lastBytes, meter.gpu().lastSource, ++t);
      benchmark::DoNotOptimize(d);
    }
  }
  state.counters["gpu_bytes"] = static_cast<double>(meter.gpu().lastBytes.value_or(0));
}
void BM_LeaseSample(benchmark::State& state) { leaseSample(state, false); }
void BM_LeaseSampleWithBound(benchmark::State& state) { leaseSample(state, true); }

// The same lease metered from the kernel charge (bpf/), holding steady:
// the charge is read every sample, fdinfo walked every
// LeaseMeter::kSteadyWalkEvery samples. The map read is a stand-in here (this
// host cannot load the programs); its real cost is one bpf(2) lookup.
struct SteadyCharge : tally::bpf::KernelCharge {
  std::uint64_t bytes = 0;  // what the kernel charged: the lease's fdinfo sum (they agree)
  tally::bpf::Capabilities capabilities() const override { return {true, true}; }
  tally::Status arm(std::uint64_t, const tally::bpf::ArmSpec&) override { return tally::Ok{}; }
  void retire(std::uint64_t) override {}
  std::vector<std::uint64_t> reap() override { return {}; }
  std::vector<tally::bpf::Ended> ended() const override { return {}; }
  std::optional<tally::bpf::LeaseCharge> read(std::uint64_t) const override {
    return tally::bpf::LeaseCharge{bytes, bytes, 4, 0, 0};
  }
  std::vector<std::uint64_t> armed() const override { return {}; }
  std::vector<tally::bpf::Refusal> refusals(std::size_t) override { return {}; }
  tally::bpf::Totals totals() const override { return {}; }
  tally::Result<std::size_t> addDevices(const std::vector<tally::bpf::DeviceRule>&) override {
    return std::size_t{0};
  }
  std::vector<tally::bpf::DeviceRule> devices() const override { return {}; }
};

void BM_LeaseSampleKernelCharge(benchmark::State& state) {
  auto leaseCg = benchLease(state);
  if (!leaseCg) return;
  SteadyCharge charge;
  {
    tally::lease::LeaseMeter probe(roots().proc, roots().sys, *leaseCg, std::nullopt);
    probe.sample();
    charge.bytes = probe.gpu().lastBytes.value_or(0);
  }
  tally::lease::LeaseMeter meter(roots().proc, roots().sys, *leaseCg, std::nullopt);
  meter.useKernelCharge(&charge, 1);
  for (auto _ : state) meter.sample();
  state.counters["gpu_bytes"] = static_cast<double>(meter.gpu().lastBytes.value_or(0));
}

// One sample round of a one-lease daemon that also publishes metrics: the
// sample, then what the overview adds for it (cgroup.events, memory.peak and
// memory.max of the lease, its seat row, the DRM device walk of sysfs) and
// the Prometheus text rendered from it. Against BM_LeaseSample: the cost of
// keeping the textfile / GET /metrics current (docs/PERFORMANCE.md).
void BM_LeaseSampleWithMetrics(benchmark::State& state) {
  auto leaseCg = benchLease(state);
  if (!leaseCg) return;
  const tally::cgroup::Cgroup& cg = *leaseCg;
  tally::lease::LeaseMeter meter(roots().proc, roots().sys, cg, std::nullopt);
  std::size_t bytes = 0;
  for (auto _ : state) {
    meter.sample();
    tally::seats::SeatFacts f;
    f.lease = "0123456789ab";
    f.name = "bench";
    f.kind = "attach";
    f.state = "running";
    f.pools = {"gpu"};
    f.cgroup = roots().lease;
    auto populated = cg.populated();
    f.populated = populated && *populated;
    f.observedAtNs = meter.sampledAtNs();
    f.hostCurrent = tally::seats::Figure::of(meter.host().last, "unread");
    auto peak = cg.memoryPeak();
    f.hostPeak = tally::seats::Figure::of(peak ? std::optional<std::uint64_t>(*peak) : std::nullopt,
                                          "unread");
    auto max = cg.memoryMax();
    f.hostMax = tally::seats::Figure::of(
        max && !max->unlimited ? std::optional<std::uint64_t>(max->bytes) : std::nullopt, "unread");
    for (const auto& [r, b] : meter.gpu().lastRegions) f.gpuRegions[r].currentBytes = b;
    f.gpuCurrent = tally::seats::Figure::of(meter.gpu().lastBytes, "unread");
    f.devices = meter.gpu().lastDevices;
    nlohmann::json overview;
    overview["seats"] =
        nlohmann::json::array({tally::seats::seatRow(f, *f.observedAtNs, 1'000'000)});
    auto devices = tally::devices::discoverDrmDevices(roots().sys);
    overview["devices"] = nlohmann::json::array();
    if (devices) {
      for (const auto& d : devices->devices)
        overview["devices"].push_back({{"device", d.key}, {"driver", d.driver}});
    }
    std::string text = tally::metrics::renderOverview(overview);
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["metrics_bytes"] = static_cast<double>(bytes);
}

BENCHMARK(BM_Floor)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_TallyHostScan)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_Naive)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_CgroupFloor)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_TallyCgroupScan)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_LeaseSample)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_LeaseSampleWithBound)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_LeaseSampleKernelCharge)->Unit(benchmark::kMicrosecond)->MinTime(0.5);
BENCHMARK(BM_LeaseSampleWithMetrics)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

// Records the median real time of each benchmark to print ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  RatioReporter() : ConsoleReporter(OO_Tabular) {}  // no colour: the output goes into docs
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.error_occurred) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      const bool single = run.run_type == Run::RT_Iteration && run.repetitions <= 1;
      if (median || single) {
        std::string name = run.run_name.function_name;
        medianNs[name] = run.GetAdjustedRealTime() * unitToNs(run.time_unit);
        if (auto it = run.counters.find("pids"); it != run.counters.end())
          pids[name] = it->second.value;
      }
    }
  }
  static double unitToNs(benchmark::TimeUnit u) {
    switch (u) {
      case benchmark::kNanosecond:
        return 1;
      case benchmark::kMicrosecond:
        return 1e3;
      case benchmark::kMillisecond:
        return 1e6;
      case benchmark::kSecond:
        return 1e9;
    }
    return 1;
  }
  std::map<std::string, double> medianNs;
  std::map<std::string, double> pids;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto& m = reporter.medianNs;
  auto ratio = [&](const char* a, const char* b) {
    if (m.count(a) && m.count(b) && m[b] > 0)
      std::printf("ratio %s / %s = %.3f\n", a, b, m[a] / m[b]);
  };
  ratio("BM_TallyHostScan", "BM_Floor");
  ratio("BM_Naive", "BM_TallyHostScan");
  ratio("BM_TallyCgroupScan", "BM_TallyHostScan");
  ratio("BM_TallyCgroupScan", "BM_CgroupFloor");
  ratio("BM_LeaseSample", "BM_CgroupFloor");
  ratio("BM_LeaseSampleKernelCharge", "BM_LeaseSample");
  ratio("BM_LeaseSampleWithBound", "BM_LeaseSample");
  ratio("BM_LeaseSampleWithMetrics", "BM_LeaseSample");
  // Per process, for the scale run (scripts/bench-scale.sh): flat means linear.
  for (const char* name :
       {"BM_Floor", "BM_TallyHostScan", "BM_CgroupFloor", "BM_TallyCgroupScan"}) {
    if (m.count(name) && reporter.pids.count(name) && reporter.pids[name] > 0)
      std::printf("per-process %s = %.0f ns (%.0f processes)\n", name,
                  m[name] / reporter.pids[name], reporter.pids[name]);
  }
  benchmark::Shutdown();
  return 0;
}
