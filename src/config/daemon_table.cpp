// The [daemon] table of the config: socket, state, sampling, retention,
// metrics, and the per-user bounds that keep one user from stalling others.
#include <fmt/format.h>
#include <toml++/toml.h>

#include "config/listen_address.h"
#include "config/toml_reader.h"
#include "util/clean_text.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::config::detail {

void readDaemon(Reader& r, const toml::table& t, Daemon& d) {
  r.onlyKeys(t, "[daemon]",
             {"socket",
              "socket_group",
              "state_dir",
              "sample_interval",
              "near_bound_margin",
              "near_bound_interval",
              "queue_timeout",
              "samples_full_resolution",
              "samples_max_age",
              "samples_max_rows",
              "client_grace",
              "coverage_probe",
              "coverage_probe_size",
              "keep_gpu_memory_max",
              "kernel_charge",
              "kernel_objects_per_lease",
              "metrics_textfile",
              "metrics_listen",
              "metrics_beyond_loopback",
              "metrics_allow_users",
              "max_connections",
              "max_connections_per_uid",
              "max_queued",
              "max_queued_per_connection",
              "max_queued_per_uid",
              "max_leases_per_uid",
              "max_children_per_lease",
              "max_replays_per_uid",
              "max_cgroups_walked_per_uid",
              "queries_per_second_per_uid",
              "query_time_per_second_per_uid",
              "ledger_rows_per_minute_per_uid",
              "ledger_bytes_per_minute_per_uid",
              "priority_group",
              "idle_timeout",
              "request_timeout"});
  if (auto s = r.string(t, "socket", "daemon")) {
    if (s->empty() || (*s)[0] != '/' || s->size() > 107)
      r.problem(*t.get("socket"), "daemon.socket must be an absolute path of at most 107 bytes");
    else
      d.socket = *s;
  }
  if (auto s = r.string(t, "socket_group", "daemon")) d.socketGroup = *s;
  if (auto s = r.string(t, "state_dir", "daemon")) {
    if (s->empty() || (*s)[0] != '/')
      r.problem(*t.get("state_dir"), "daemon.state_dir must be an absolute path");
    else
      d.stateDir = *s;
  }
  if (auto v = r.duration(t, "sample_interval", "daemon")) {
    if (*v < 100'000)
      r.problem(*t.get("sample_interval"), "daemon.sample_interval must be at least 100ms");
    else
      d.sampleIntervalUs = *v;
  }
  if (auto v = r.count(t, "near_bound_margin", "daemon", 0, 100))
    d.nearBoundMarginPercent = static_cast<unsigned>(*v);
  if (auto v = r.duration(t, "near_bound_interval", "daemon")) {
    if (*v < 10'000)
      r.problem(*t.get("near_bound_interval"), "daemon.near_bound_interval must be at least 10ms");
    else
      d.nearBoundIntervalUs = *v;
  }
  if (d.nearBoundIntervalUs > d.sampleIntervalUs) d.nearBoundIntervalUs = d.sampleIntervalUs;
  if (auto v = r.duration(t, "queue_timeout", "daemon")) d.queueTimeoutUs = *v;
  if (auto v = r.duration(t, "samples_full_resolution", "daemon")) d.samplesFullResolutionUs = *v;
  if (auto v = r.duration(t, "samples_max_age", "daemon")) d.samplesMaxAgeUs = *v;
  if (auto v = r.count(t, "samples_max_rows", "daemon", 1000, 1'000'000'000)) d.samplesMaxRows = *v;
  if (auto v = r.duration(t, "client_grace", "daemon")) d.clientGraceUs = *v;
  if (auto v = r.boolean(t, "coverage_probe", "daemon")) d.coverageProbe = *v;
  if (auto v = r.size(t, "coverage_probe_size", "daemon")) {
    if (*v < (1ULL << 20) || *v > (1ULL << 32))
      r.problem(*t.get("coverage_probe_size"), "daemon.coverage_probe_size must be 1MiB..4GiB");
    else
      d.coverageProbeBytes = *v;
  }
  if (auto v = r.boolean(t, "keep_gpu_memory_max", "daemon")) d.keepGpuMemoryMax = *v;
  if (auto v = r.boolean(t, "kernel_charge", "daemon")) d.kernelCharge = *v;
  if (auto v = r.count(t, "kernel_objects_per_lease", "daemon", 1024, 1ULL << 24))
    d.kernelObjectsPerLease = *v;
  if (auto s = r.string(t, "metrics_textfile", "daemon")) {
    if (s->empty() || (*s)[0] != '/')
      r.problem(*t.get("metrics_textfile"),
                "daemon.metrics_textfile must be an absolute path (e.g. "
                "/var/lib/prometheus/node-exporter/tally.prom)");
    else
      d.metricsTextfile = *s;
  }
  if (auto v = r.boolean(t, "metrics_beyond_loopback", "daemon")) d.metricsBeyondLoopback = *v;
  if (auto s = r.string(t, "metrics_listen", "daemon")) {
    if (auto at = parseListenAddress(*s, d.metricsBeyondLoopback); !at)
      r.problem(*t.get("metrics_listen"), "daemon.metrics_listen " + at.error().message);
    else
      d.metricsListen = *s;
  }
  readNames(r, t, "metrics_allow_users", "daemon", d.metricsAllowUsers);
  if (!d.metricsAllowUsers.empty() && d.metricsBeyondLoopback)
    r.problem(*t.get("metrics_allow_users"),
              "daemon.metrics_allow_users needs a loopback metrics_listen: a peer beyond this "
              "host has no user the kernel can name (drop metrics_beyond_loopback, or firewall "
              "the port instead)");
  if (auto v = r.count(t, "max_connections", "daemon", 16, 1'000'000)) d.maxConnections = *v;
  if (auto v = r.count(t, "max_connections_per_uid", "daemon", 4, 1'000'000))
    d.maxConnectionsPerUid = *v;
  if (auto v = r.count(t, "max_queued", "daemon", 1, 10'000'000)) d.maxQueued = *v;
  if (auto v = r.count(t, "max_queued_per_connection", "daemon", 1, 1'000'000))
    d.maxQueuedPerConnection = *v;
  if (auto v = r.count(t, "max_queued_per_uid", "daemon", 1, 10'000'000)) d.maxQueuedPerUid = *v;
  if (auto v = r.count(t, "max_leases_per_uid", "daemon", 1, 1'000'000)) d.maxLeasesPerUid = *v;
  if (auto v = r.count(t, "max_children_per_lease", "daemon", 1, 100'000))
    d.maxChildrenPerLease = *v;
  if (auto v = r.count(t, "max_replays_per_uid", "daemon", 1, 1'000)) d.maxReplaysPerUid = *v;
  if (auto v = r.count(t, "max_cgroups_walked_per_uid", "daemon", 64, 10'000'000))
    d.maxCgroupsWalkedPerUid = *v;
  if (auto v = r.count(t, "queries_per_second_per_uid", "daemon", 1, 1'000'000))
    d.queriesPerSecondPerUid = *v;
  if (auto v = r.count(t, "ledger_rows_per_minute_per_uid", "daemon", 10, 10'000'000))
    d.ledgerRowsPerMinutePerUid = *v;
  if (auto v = r.count(t, "ledger_bytes_per_minute_per_uid", "daemon", 64 * 1024,
                       std::uint64_t{1} << 40))
    d.ledgerBytesPerMinutePerUid = *v;
  if (auto v = r.duration(t, "query_time_per_second_per_uid", "daemon")) {
    if (*v < 1'000 || *v > 1'000'000)
      r.problem(*t.get("query_time_per_second_per_uid"),
                "daemon.query_time_per_second_per_uid must be 1ms..1s (of the daemon's loop, "
                "each second, that one user's listings and lease histories may take)");
    else
      d.queryTimePerSecondPerUidUs = *v;
  }
  if (auto s = r.string(t, "priority_group", "daemon")) d.priorityGroup = *s;
  if (auto v = r.duration(t, "idle_timeout", "daemon")) {
    if (*v < 1'000'000)
      r.problem(*t.get("idle_timeout"), "daemon.idle_timeout must be at least 1s");
    else
      d.idleTimeoutUs = *v;
  }
  if (auto v = r.duration(t, "request_timeout", "daemon")) {
    if (*v < 1'000'000 || *v > 600'000'000)
      r.problem(*t.get("request_timeout"), "daemon.request_timeout must be 1s..10m");
    else
      d.requestTimeoutUs = *v;
  }
  if (d.samplesMaxAgeUs < d.samplesFullResolutionUs) {
    r.problems.push_back(
        {lineOf(t),
         "daemon.samples_max_age must not be shorter than daemon.samples_full_resolution"});
  }
}

}  // namespace tally::config::detail
