#include "metrics/tally_metrics.h"

#include <fmt/format.h>

#include <optional>

#include "util/json_view.h"

namespace tally::metrics {
namespace {

using json = nlohmann::json;

// Families in a fixed order, each created on first use.
class Builder {
 public:
  Family& family(const std::string& name, const std::string& help, Type type = Type::Gauge) {
    for (auto& f : families_) {
      if (f.name == name) return f;
    }
    families_.push_back(Family{name, help, type, {}});
    return families_.back();
  }
  // A sample only when `v` is a non-negative integer (absent figures stay absent).
  void bytes(const std::string& name, const std::string& help, Labels labels, const json& v) {
    auto& f = family(name, help);
    if (auto n = jsonview::count(v)) f.samples.push_back({std::move(labels), *n});
  }
  void flag(const std::string& name, const std::string& help, Labels labels, const json& v) {
    auto& f = family(name, help);
    if (v.is_boolean())
      f.samples.push_back({std::move(labels), std::uint64_t{v.get<bool>() ? 1u : 0u}});
  }
  std::vector<Family> take() { return std::move(families_); }

 private:
  std::vector<Family> families_;
};

using jsonview::count;
using jsonview::get;
using jsonview::joined;
std::string str(const json& j, const char* key) { return jsonview::text(j, key); }

void declareAll(Builder& b) {
  // Declared up front so every family appears (HELP/TYPE) even with no lease.
  b.family("tally_lease_info",
           "A lease of the daemon: its name, kind, state, pools, workload and parent lease (a "
           "child lease's; value 1)");
  b.family("tally_lease_declared_info",
           "An operator-declared attribute of a lease, e.g. model or context_window (value 1; "
           "declared, not measured)");
  b.family("tally_lease_running",
           "1 when the lease cgroup has a process (cgroup.events populated), else 0");
  b.family("tally_lease_fresh",
           "1 when the lease was sampled within 2 x sample_interval; a stale lease exports no "
           "measured figure");
  b.family("tally_lease_observed_timestamp_seconds",
           "When the lease's figures were sampled (Unix time)");
  b.family("tally_lease_memory_bytes",
           "Host memory charged to the lease cgroup at the last sample (memory.current)");
  b.family("tally_lease_memory_peak_bytes", "Peak host memory of the lease cgroup (memory.peak)");
  b.family("tally_lease_memory_max_bytes",
           "The memory limit in force on the lease cgroup (memory.max; absent when unlimited)");
  b.family(
      "tally_lease_gpu_memory_bytes",
      "GPU memory of the lease's DRM clients at the last sample, per region (drm-fdinfo resident)");
  b.family("tally_lease_gpu_memory_peak_bytes",
           "Peak GPU memory of the lease's DRM clients per region over its samples");
  b.family("tally_lease_gpu_memory_counted_bytes",
           "The lease's GTT + VRAM at the last sample: the figure gpu_memory_max bounds");
  b.family("tally_lease_gpu_memory_counted_peak_bytes",
           "Peak of the lease's GTT + VRAM over its samples");
  b.family("tally_lease_gpu_allocations_refused_total",
           "GPU allocations the kernel refused the lease at its gpu_memory_max (kernel charge)",
           Type::Counter);
  b.family("tally_lease_gpu_allocations_refused_bytes_total",
           "Bytes those refused allocations asked for", Type::Counter);
  b.family("tally_kernel_charge_active",
           "1 when GPU memory is charged to leases in the kernel (mode=charging) and allocations "
           "past a bound are refused there (mode=refusing), else 0");
  b.family("tally_lease_declared_memory_max_bytes", "memory_max the lease declared");
  b.family("tally_lease_declared_gpu_memory_max_bytes",
           "gpu_memory_max the lease declared (bounds GTT + VRAM together)");
  b.family("tally_lease_declared_gpu_memory_high_bytes",
           "gpu_memory_high the lease declared (events only)");
  b.family("tally_pool_capacity", "Leases a pool admits at once");
  b.family("tally_pool_holders", "Leases holding the pool now");
  b.family("tally_pool_queued", "Requests waiting for the pool");
  b.family("tally_pool_memory_budget_bytes", "The pool's memory_budget");
  b.family("tally_pool_memory_declared_bytes", "Sum of memory_max its holders declared");
  b.family("tally_pool_gpu_memory_budget_bytes", "The pool's gpu_memory_budget");
  b.family("tally_pool_gpu_memory_declared_bytes", "Sum of gpu_memory_max its holders declared");
  b.family("tally_pool_gpu_residue_bytes",
           "GPU memory buffers of the pool's ended leases still hold (counted against its budget "
           "until freed)");
  b.family("tally_kernel_charge_ended_lease_bytes",
           "GPU memory an ended lease's buffers still hold, charged to it in the kernel");
  b.family("tally_kernel_charge_objects",
           "Buffer objects in the kernel charge's object map (and reserved for allocations in "
           "flight)");
  b.family("tally_kernel_charge_objects_capacity", "The object map's room");
  b.family("tally_kernel_charge_anomalies_total",
           "What the kernel charge programs could not do exactly, by kind, since their maps "
           "were made (docs/enforcement.md)",
           Type::Counter);
  b.family("tally_pool_headroom_host_bytes",
           "Measured host headroom for one more grant (MemAvailable minus holders' unused "
           "declarations)");
  b.family("tally_pool_headroom_gpu_bytes",
           "Measured GPU headroom for one more grant on the pool's devices");
  b.family("tally_device_memory_used_bytes",
           "GPU memory in use on a device, per region (sysfs mem_info_*_used)");
  b.family("tally_device_memory_total_bytes",
           "GPU memory a device has, per region (sysfs mem_info_*_total)");
  b.family("tally_gpu_memory_outside_leases_bytes",
           "Device GPU memory in use outside every lease, per region (devices' used minus leases' "
           "current)");
  b.family("tally_host_memory_available_bytes", "MemAvailable of the host (/proc/meminfo)");
  b.family("tally_coverage_info",
           "What a lease's MemoryMax covers on this kernel: host, or host+gtt (value 1)");
  b.family("tally_memcg_charges_gtt",
           "1 when this kernel charges GTT to the memory cgroup (tally hands the GPU bound over), "
           "else 0");
  b.family("tally_gpu_bound_events_total", "GPU bound events since the daemon started, by kind",
           Type::Counter);
  b.family("tally_lease_outcomes_total", "Leases ended since the daemon started, by outcome class",
           Type::Counter);
  b.family("tally_queue_ended_total",
           "Requests that left the queue without a grant since the daemon started, by reason "
           "(queue-timeout, cancelled, refused-by-reload)",
           Type::Counter);
  b.family("tally_placed_shortfall_total",
           "Leases the site's scheduler placed (a Slurm job's) granted with less measured headroom "
           "than they declare, since the daemon started, by resource (host, gpu)",
           Type::Counter);
  b.family("tally_placed_shortfall_bytes_total",
           "Bytes those placed leases declared past the measured headroom, by resource",
           Type::Counter);
  b.family("tally_daemon_start_time_seconds", "When the daemon started (Unix time)");
  b.family("tally_containment_possible",
           "1 when the daemon's host can contain leases (cgroup v2 memory controller, systemd or "
           "a delegated cgroup); 0 when none can be (tally daemon status says why)");
  b.family("tally_build_info",
           "What the daemon was built from: its version and commit (value 1), as tally --version");
  b.family("tally_sample_interval_seconds", "The daemon's sample interval");
  b.family("tally_observed_timestamp_seconds",
           "When the daemon made these figures (Unix time); a textfile whose value stops moving "
           "was left by a daemon that stopped");
  b.family("tally_leases_live", "Live leases (granted or running), all of them");
  b.family("tally_leases_unlisted",
           "Live leases past the first page (rpc kMaxPageLeases, in lease-id order) whose "
           "tally_lease_* series are not exported; tally_pool_* counts them all");
  b.family("tally_ledger_writes",
           "1 when the ledger writes, 0 when it cannot (new leases and releases are refused "
           "until it does)");
}

void seat(Builder& b, const json& s) {
  Labels id{{"lease", str(s, "lease")}};
  const json& w = get(s, "workload");
  Labels info{{"lease", str(s, "lease")},         {"name", str(s, "name")},
              {"kind", str(s, "kind")},           {"state", str(s, "state")},
              {"pools", joined(get(s, "pools"))}, {"unit", str(w, "unit")},
              {"cgroup", str(w, "cgroup")},       {"container", str(w, "container")},
              {"parent", str(s, "parent")}};
  b.family("tally_lease_info", "").samples.push_back({info, std::uint64_t{1}});
  const json& declared = get(s, "declared");
  if (const json& attrs = get(declared, "attributes"); attrs.is_object()) {
    for (const auto& [k, v] : attrs.items()) {
      if (!v.is_string()) continue;
      b.family("tally_lease_declared_info", "")
          .samples.push_back(
              {{{"lease", str(s, "lease")}, {"key", k}, {"value", v.get<std::string>()}},
               std::uint64_t{1}});
    }
  }
  b.bytes("tally_lease_declared_memory_max_bytes", "", id, get(declared, "memory_max"));
  b.bytes("tally_lease_declared_gpu_memory_max_bytes", "", id, get(declared, "gpu_memory_max"));
  b.bytes("tally_lease_declared_gpu_memory_high_bytes", "", id, get(declared, "gpu_memory_high"));
  b.flag("tally_lease_running", "", id, get(s, "running"));
  b.flag("tally_lease_fresh", "", id, get(s, "fresh"));
  if (!get(s, "fresh").is_boolean() || !s["fresh"].get<bool>())
    return;  // stale: no measured figure
  if (auto at = count(get(s, "observed_at_ns"))) {
    b.family("tally_lease_observed_timestamp_seconds", "")
        .samples.push_back({id, static_cast<double>(*at) / 1e9});
  }
  const json& host = get(s, "host");
  b.bytes("tally_lease_memory_bytes", "", id, get(host, "current_bytes"));
  b.bytes("tally_lease_memory_peak_bytes", "", id, get(host, "peak_bytes"));
  b.bytes("tally_lease_memory_max_bytes", "", id, get(host, "max_bytes"));
  const json& gpu = get(s, "gpu");
  if (const json& regions = get(gpu, "regions"); regions.is_object()) {
    for (const auto& [region, r] : regions.items()) {
      Labels l{{"lease", str(s, "lease")}, {"region", region}, {"source", str(gpu, "source")}};
      b.bytes("tally_lease_gpu_memory_bytes", "", l, get(r, "current_bytes"));
      b.bytes("tally_lease_gpu_memory_peak_bytes", "", l, get(r, "peak_bytes"));
    }
  }
  b.bytes("tally_lease_gpu_memory_counted_bytes", "", id, get(gpu, "current_bytes"));
  b.bytes("tally_lease_gpu_memory_counted_peak_bytes", "", id, get(gpu, "peak_bytes"));
  b.bytes("tally_lease_gpu_allocations_refused_total", "", id, get(gpu, "allocations_refused"));
  b.bytes("tally_lease_gpu_allocations_refused_bytes_total", "", id, get(gpu, "refused_bytes"));
}

void pool(Builder& b, const json& p) {
  Labels id{{"pool", str(p, "pool")}};
  b.bytes("tally_pool_capacity", "", id, get(p, "capacity"));
  if (const json& h = get(p, "holders"); h.is_array())
    b.family("tally_pool_holders", "").samples.push_back({id, std::uint64_t{h.size()}});
  // The queue's length, not the names listed (the first 256).
  if (auto n = count(get(p, "queue_length")))
    b.family("tally_pool_queued", "").samples.push_back({id, *n});
  else if (const json& q = get(p, "queue"); q.is_array())
    b.family("tally_pool_queued", "").samples.push_back({id, std::uint64_t{q.size()}});
  b.bytes("tally_pool_memory_budget_bytes", "", id, get(p, "memory_budget"));
  b.bytes("tally_pool_memory_declared_bytes", "", id, get(p, "memory_declared"));
  b.bytes("tally_pool_gpu_memory_budget_bytes", "", id, get(p, "gpu_memory_budget"));
  b.bytes("tally_pool_gpu_memory_declared_bytes", "", id, get(p, "gpu_memory_declared"));
  b.bytes("tally_pool_gpu_residue_bytes", "", id, get(p, "gpu_residue_bytes"));
  b.bytes("tally_pool_headroom_host_bytes", "", id, get(get(p, "headroom"), "host_bytes"));
  b.bytes("tally_pool_headroom_gpu_bytes", "", id, get(get(p, "headroom"), "gpu_bytes"));
}

}  // namespace

std::vector<Family> fromOverview(const json& o) {
  Builder b;
  declareAll(b);
  if (const json& seats = get(o, "seats"); seats.is_array()) {
    for (const auto& s : seats) seat(b, s);
  }
  if (const json& pools = get(o, "pools"); pools.is_array()) {
    for (const auto& p : pools) pool(b, p);
  }
  if (const json& devices = get(o, "devices"); devices.is_array()) {
    for (const auto& d : devices) {
      const json& regions = get(d, "regions");
      if (!regions.is_object()) continue;
      for (const auto& [region, r] : regions.items()) {
        Labels l{{"device", str(d, "device")}, {"driver", str(d, "driver")}, {"region", region}};
        b.bytes("tally_device_memory_used_bytes", "", l, get(r, "used_bytes"));
        b.bytes("tally_device_memory_total_bytes", "", l, get(r, "total_bytes"));
      }
    }
  }
  if (const json& out = get(o, "outside_leases"); out.is_object()) {
    for (const auto& [region, v] : out.items()) {
      if (v.is_object())
        b.bytes("tally_gpu_memory_outside_leases_bytes", "", {{"region", region}}, get(v, "bytes"));
    }
  }
  b.bytes("tally_host_memory_available_bytes", "", {}, get(get(o, "host"), "mem_available_bytes"));
  const json& cov = get(o, "coverage");
  if (auto state = str(cov, "state"); !state.empty()) {
    b.family("tally_coverage_info", "")
        .samples.push_back(
            {{{"coverage", state}, {"kernel", str(cov, "kernel")}}, std::uint64_t{1}});
    b.family("tally_memcg_charges_gtt", "")
        .samples.push_back({{}, std::uint64_t{state == "host+gtt" ? 1u : 0u}});
  }
  const json& kc = get(o, "kernel_charge");
  b.flag("tally_kernel_charge_active", "", {{"mode", "charging"}}, get(kc, "charging"));
  b.flag("tally_kernel_charge_active", "", {{"mode", "refusing"}}, get(kc, "refusing"));
  if (const json& ended = get(kc, "ended_leases"); ended.is_array())
    for (const auto& e : ended)
      b.bytes("tally_kernel_charge_ended_lease_bytes", "",
              {{"lease", str(e, "lease")},
               {"name", str(e, "name")},
               {"cgroup_id", std::to_string(count(get(e, "cgroup_id")).value_or(0))}},
              get(e, "bytes"));
  b.bytes("tally_kernel_charge_objects", "", {}, get(kc, "objects"));
  b.bytes("tally_kernel_charge_objects_capacity", "", {}, get(kc, "objects_capacity"));
  if (const json& an = get(kc, "anomalies"); an.is_object())
    for (const auto& [k, v] : an.items())
      if (auto n = count(v))
        b.family("tally_kernel_charge_anomalies_total", "", Type::Counter)
            .samples.push_back({{{"kind", k}}, *n});
  const json& enf = get(o, "enforcement");
  for (const auto& [key, fam] : {std::pair{"gpu_bound_events", "tally_gpu_bound_events_total"},
                                 std::pair{"outcomes", "tally_lease_outcomes_total"}}) {
    const json& counts = get(enf, key);
    if (!counts.is_object()) continue;
    const char* label = std::string_view(key) == "outcomes" ? "outcome" : "kind";
    for (const auto& [k, v] : counts.items()) {
      if (auto n = count(v)) b.family(fam, "", Type::Counter).samples.push_back({{{label, k}}, *n});
    }
  }
  if (const json& ends = get(enf, "queue_ends"); ends.is_object())
    for (const auto& [k, v] : ends.items())
      if (auto n = count(v))
        b.family("tally_queue_ended_total", "", Type::Counter)
            .samples.push_back({{{"reason", k}}, *n});
  if (const json& sf = get(enf, "placed_shortfalls"); sf.is_object())
    for (const auto& [k, v] : sf.items()) {
      if (auto n = count(get(v, "grants")))
        b.family("tally_placed_shortfall_total", "", Type::Counter)
            .samples.push_back({{{"resource", k}}, *n});
      if (auto n = count(get(v, "bytes")))
        b.family("tally_placed_shortfall_bytes_total", "", Type::Counter)
            .samples.push_back({{{"resource", k}}, *n});
    }
  const json& d = get(o, "daemon");
  if (const json& c = get(get(d, "containment"), "possible"); c.is_boolean())
    b.family("tally_containment_possible", "")
        .samples.push_back({{}, std::uint64_t{c.get<bool>() ? 1u : 0u}});
  if (const json& v = get(d, "version"); v.is_string())
    b.family("tally_build_info", "")
        .samples.push_back(
            {{{"version", v.get<std::string>()}, {"commit", str(d, "commit")}}, std::uint64_t{1}});
  if (auto t = count(get(d, "started_at_ns"))) {
    b.family("tally_daemon_start_time_seconds", "")
        .samples.push_back({{}, static_cast<double>(*t) / 1e9});
  }
  if (auto at = count(get(o, "observed_at_ns"))) {
    b.family("tally_observed_timestamp_seconds", "")
        .samples.push_back({{}, static_cast<double>(*at) / 1e9});
  }
  b.flag("tally_ledger_writes", "", {}, get(get(o, "ledger"), "writes"));
  const json& page = get(o, "seats_page");
  auto live = count(get(page, "live")), listed = count(get(page, "listed"));
  if (live) b.family("tally_leases_live", "").samples.push_back({{}, *live});
  if (live && listed)
    b.family("tally_leases_unlisted", "")
        .samples.push_back({{}, *live > *listed ? *live - *listed : 0});
  if (auto iv = count(get(o, "sample_interval_us"))) {
    b.family("tally_sample_interval_seconds", "")
        .samples.push_back({{}, static_cast<double>(*iv) / 1e6});
  }
  return b.take();
}

}  // namespace tally::metrics
