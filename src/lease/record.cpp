#include "lease/record.h"

#include <fmt/format.h>

#include "util/clean_text.h"
#include "util/json_view.h"
#include "util/units.h"

namespace tally::lease {
namespace {

using json = nlohmann::ordered_json;

json limitJson(const probes::MemoryLimit& l) { return l.unlimited ? json("max") : json(l.bytes); }

// The memory.stat figures worth keeping per lease (the file has ~70 keys).
constexpr const char* kStatKeys[] = {"anon",        "file",   "kernel", "kernel_stack",
                                     "pagetables",  "shmem",  "sock",   "slab",
                                     "file_mapped", "percpu", "vmalloc"};
// ... and its cumulative counters, meaningful at the end of a lease.
constexpr const char* kStatCounters[] = {"pgfault",
                                         "pgmajfault",
                                         "pgscan",
                                         "pgsteal",
                                         "pgrefill",
                                         "workingset_refault_anon",
                                         "workingset_refault_file",
                                         "pswpin",
                                         "pswpout",
                                         "thp_fault_alloc"};

}  // namespace

json recordJson(const LeaseRecord& r) {
  const auto& s = r.spec;
  json j;
  j["schema"] = 1;
  j["lease"] = {
      {"id", s.id}, {"name", s.declaration.name}, {"command", s.command}, {"manager", r.manager}};
  if (!r.unit.empty()) j["lease"]["unit"] = r.unit;
  if (!r.slice.empty()) j["lease"]["slice"] = r.slice;
  if (!r.cgroup.empty()) j["lease"]["cgroup"] = r.cgroup;
  j["declared"] = {{"memory_max", jsonview::orNull(s.declaration.memoryMax)},
                   {"memory_high", jsonview::orNull(s.memoryHigh)},
                   {"memory_swap_max", jsonview::orNull(s.memorySwapMax)},
                   {"oom_policy", oomPolicyName(s.oomPolicy)},
                   {"gpu_memory_max", jsonview::orNull(s.declaration.gpuMemoryMax)},
                   {"gpu_memory_high", jsonview::orNull(s.declaration.gpuMemoryHigh)},
                   {"sample_interval_us", s.sampleIntervalUs},
                   {"source", "declared"}};
  if (!s.declaration.attributes.empty()) {
    json attrs = json::object();
    for (const auto& [k, v] : s.declaration.attributes) attrs[k] = v;
    j["declared"]["attributes"] = attrs;
  }
  const enforce::Plan plan = s.plan();
  if (plan.memoryMaxWithGpu) {
    // The hand-over: GTT is charged to memcg here, so MemoryMax holds both.
    j["declared"]["memory_max_with_gpu"] = jsonview::orNull(plan.memoryMax);
    j["declared"]["gtt_charged_to_memcg"] = true;
  }
  if (r.applied) {
    j["applied"] = {
        {"memory_max", limitJson(r.applied->memoryMax)},
        {"memory_high", limitJson(r.applied->memoryHigh)},
        {"memory_swap_max",
         r.applied->memorySwapMax ? limitJson(*r.applied->memorySwapMax) : json(nullptr)},
        {"memory_oom_group", r.applied->oomGroup ? 1 : 0},
        {"source", "cgroup"},
        {"verified", true}};
  }
  j["started_at_ns"] = r.startedAtNs;
  j["ended_at_ns"] = r.endedAtNs;
  j["duration_us"] = (r.endedAtNs - r.startedAtNs) / 1000;

  json o;
  o["class"] = outcomeClassName(r.outcome.cls);
  if (r.outcome.exitCode) o["exit_code"] = *r.outcome.exitCode;
  if (r.outcome.signal) {
    o["signal"] = *r.outcome.signal;
    o["signal_name"] = signalName(*r.outcome.signal);
  }
  if (r.outcome.oomKills) o["oom_kill"] = *r.outcome.oomKills;
  o["summary"] = text::printable(r.outcome.summary);  // it names kernel text (cgroup paths)
  // Only a workload tally ran has an exit status; an attached or lost one has none.
  if (r.outcome.hasExitStatus) o["tally_exit_status"] = r.outcome.exitStatus;
  j["outcome"] = o;

  json mem;
  mem["cgroup"] = r.counters.cgroup;
  mem["source"] = "cgroup";
  if (r.counters.memoryPeak)
    mem["peak_bytes"] = *r.counters.memoryPeak;
  else if (r.counters.memoryPeakUnknown)
    mem["peak_unknown"] = *r.counters.memoryPeakUnknown;
  if (r.counters.swapPeak) mem["swap_peak_bytes"] = *r.counters.swapPeak;
  if (r.counters.readBeforeEnd)
    mem["read_before_end"] = {{"at_ns", r.counters.readBeforeEndAtNs},
                              {"when", *r.counters.readBeforeEnd}};
  if (r.counters.events) {
    json ev;
    for (const auto& [k, v] : r.counters.events->entries) ev[k] = v;
    mem["events"] = ev;
  } else if (r.counters.eventsUnknown) {
    mem["events_unknown"] = *r.counters.eventsUnknown;
  }
  if (r.counters.stat) {
    json st;
    for (const char* k : kStatCounters) {
      if (auto v = r.counters.stat->get(k)) st[k] = *v;
    }
    mem["stat_counters"] = st;
  }
  json sampled;
  sampled["samples"] = r.host.samples;
  if (r.host.peakCurrent) {
    sampled["peak_current_bytes"] = *r.host.peakCurrent;
    sampled["peak_at_ns"] = r.host.peakAtNs;
    if (r.host.statAtPeak) {
      json st;
      for (const char* k : kStatKeys) {
        if (auto v = r.host.statAtPeak->get(k)) st[k] = *v;
      }
      sampled["stat_at_peak"] = st;
    }
  } else {
    sampled["peak_unknown"] =
        r.host.lastError.value_or("no sample was taken while the workload ran");
  }
  mem["sampled"] = sampled;
  j["memory"] = mem;

  json gpu;
  gpu["source"] = "drm-fdinfo";
  gpu["samples"] = r.gpu.samples;
  // What the peak counts (gpumem/gpu_memory.h); the rest shown only.
  json classes = json::object();
  for (const auto& [region, cls] : r.gpu.classesSeen)
    classes[region] = devices::memoryClassName(cls);
  gpu["region_classes"] = classes;
  gpu["counts"] = "device, host-uncharged and host-mixed regions; KFD a floor, never added";
  if (r.gpu.peakBytes) {
    gpu["peak_bytes"] = *r.gpu.peakBytes;
    gpu["peak_at_ns"] = r.gpu.peakAtNs;
    gpu["at_peak"] = r.gpu.atPeak;
    gpu["region_peaks"] = r.gpu.regionPeaks;
    gpu["max_clients"] = r.gpu.maxClients;
  } else {
    gpu["peak_unknown"] =
        r.gpu.unknownSeen ? "no sample's figure was known: " + *r.gpu.unknownSeen
                          : r.gpu.lastError.value_or("no sample was taken while the workload ran");
  }
  if (r.gpu.samplesIncomplete) {
    gpu["samples_incomplete"] = r.gpu.samplesIncomplete;
    // A peak of the known samples only: say what it leaves out.
    if (r.gpu.peakBytes)
      gpu["peak_covers"] = fmt::format("{} of {} samples; {} had an unknown figure{}",
                                       r.gpu.samples - r.gpu.samplesIncomplete, r.gpu.samples,
                                       r.gpu.samplesIncomplete,
                                       r.gpu.unknownSeen ? " (" + *r.gpu.unknownSeen + ")" : "");
  }
  if (r.gpu.samplesWithUnreadable) {
    gpu["samples_with_unreadable_processes"] = r.gpu.samplesWithUnreadable;
    gpu["unreadable_example"] = r.gpu.lastUnreadable.value_or("");
  }
  if (r.gpu.samples || r.gpu.kernel) gpu["source"] = r.gpu.lastSource;
  if (r.gpu.kernel) {
    const bpf::LeaseCharge& k = *r.gpu.kernel;
    gpu["kernel_charge"] = {{"bytes", k.bytes},
                            {"peak_bytes", k.peakBytes},
                            {"objects", k.objects},
                            {"allocations_refused", k.refused},
                            {"refused_bytes", k.refusedBytes}};
    gpu["fdinfo_bytes"] = jsonview::orNull(r.gpu.lastFdinfoBytes);
  }
  if (s.declaration.gpuBounded()) {
    const enforce::GpuBound& b = plan.bound;
    json bound;
    bound["gpu_memory_max"] = jsonview::orNull(b.max);
    bound["gpu_memory_high"] = jsonview::orNull(b.high);
    bound["action"] = enforce::actionName(b.action);
    bound["consecutive_samples"] = b.consecutive;
    if (b.max) bound["samples_over_gpu_memory_max"] = r.gpu.samplesOverBudget;
    bound["events"] = boundEventsJson(r.gpuBound);
    gpu["bound"] = bound;
  }
  j["gpu"] = gpu;
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  return j;
}

std::string startLine(const LeaseRecord& r) {
  std::vector<std::string> limits;
  auto add = [&](const char* name, const std::optional<std::uint64_t>& v) {
    if (v) limits.push_back(fmt::format("{}={}", name, units::humanBytes(*v)));
  };
  add("MemoryMax", r.spec.memoryMax());
  add("MemoryHigh", r.spec.memoryHigh);
  add("MemorySwapMax", r.spec.memorySwapMax);
  add("gpu_memory_max", r.spec.declaration.gpuMemoryMax);
  add("gpu_memory_high", r.spec.declaration.gpuMemoryHigh);
  std::string where =
      r.unit.empty() ? fmt::format("in cgroup {}", r.cgroup) : fmt::format("as {}", r.unit);
  return fmt::format("tally: lease {} running {} ({})", r.spec.id, where,
                     limits.empty() ? std::string("no limits declared")
                                    : fmt::format("{}", fmt::join(limits, ", ")));
}

std::string summaryLine(const LeaseRecord& r) {
  std::string line = fmt::format("tally: lease {} ({}) {}", r.spec.id, r.spec.declaration.name,
                                 outcomeWords(outcomeClassName(r.outcome.cls), r.outcome.summary));
  if (r.outcome.cls == OutcomeClass::ContainmentRefused) return line;
  if (r.counters.memoryPeak)
    line += fmt::format("; memory peak {}", units::humanBytes(*r.counters.memoryPeak));
  else if (r.host.peakCurrent)
    line += fmt::format("; memory sampled peak {} ({} unreadable: {})",
                        units::humanBytes(*r.host.peakCurrent), cgroup::file::kMemoryPeak,
                        r.counters.memoryPeakUnknown.value_or("no reason given"));
  if (r.gpu.peakBytes && r.gpu.kernel) {
    // The kernel's own high-water mark: every allocation moved it.
    const bpf::LeaseCharge& k = *r.gpu.kernel;
    line += fmt::format("; GPU peak {} (charged in the kernel to the buffers it created)",
                        units::humanBytes(*r.gpu.peakBytes));
    if (k.refused)
      line += fmt::format("; {} GPU allocation{} refused at its bound ({})", k.refused,
                          k.refused == 1 ? "" : "s", units::humanBytes(k.refusedBytes));
    if (r.spec.declaration.gpuMemoryMax && *r.gpu.peakBytes <= *r.spec.declaration.gpuMemoryMax)
      line += fmt::format(", never over gpu_memory_max {}",
                          units::humanBytes(*r.spec.declaration.gpuMemoryMax));
  } else if (r.gpu.peakBytes) {
    // Sampled, not a kernel high-water mark: a spike between two samples is
    // not seen, so the line says what it is and how often it looked.
    line += fmt::format(
        "; GPU sampled peak {} ({} sample{} every {}, drm-fdinfo; shorter spikes are not seen)",
        units::humanBytes(*r.gpu.peakBytes), r.gpu.samples, r.gpu.samples == 1 ? "" : "s",
        units::humanDuration(r.spec.sampleIntervalUs));
    if (r.spec.declaration.gpuMemoryMax && r.gpu.samplesOverBudget &&
        r.outcome.cls != OutcomeClass::KilledByTally) {
      line +=
          fmt::format(", over gpu_memory_max {} in {} samples ({})",
                      units::humanBytes(*r.spec.declaration.gpuMemoryMax), r.gpu.samplesOverBudget,
                      r.spec.plan().bound.action == enforce::Action::Report
                          ? "report only"
                          : "not in a row long enough to act");
    }
  }
  return line;
}

}  // namespace tally::lease
