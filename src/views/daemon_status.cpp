#include "views/daemon_status.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/json_view.h"
#include "util/units.h"
#include "views/ledger_view.h"

namespace tally::views {

using json = nlohmann::json;
using jsonview::count;
using jsonview::get;
using jsonview::text;

DaemonStatus daemonStatus(const json& o, std::uint64_t nowNs, bool utc) {
  DaemonStatus s;
  const json& d = get(o, "daemon");
  std::string pid = count(get(d, "pid")) ? std::to_string(*count(get(d, "pid"))) : "?";
  // What it runs, as `tally --version` says it (absent from an older daemon).
  if (const json& v = get(d, "version"); v.is_string())
    pid += fmt::format(", tally {} (commit {})", text(d, "version"), text(d, "commit"));
  if (auto since = count(get(d, "started_at_ns")); since && *since <= nowNs)
    s.lines.push_back(fmt::format("daemon: pid {}, up {} (since {})", pid,
                                  units::roughDuration((nowNs - *since) / 1000),
                                  wallTime(*since, utc)));
  else
    s.lines.push_back(fmt::format("daemon: pid {}", pid));
  // A host where no lease can be contained, said second: it outweighs the rest.
  if (const json& c = get(d, "containment"); get(c, "possible").is_boolean()) {
    if (!get(c, "possible").get<bool>())
      s.lines.push_back(
          fmt::format("containment: NONE: no lease can be contained here ({}); "
                      "run leases end as containment-refused (tally doctor)",
                      jsonview::joined(get(c, "problems"))));
  }
  std::string interval = count(get(o, "sample_interval_us"))
                             ? units::humanDuration(*count(get(o, "sample_interval_us")))
                             : "?";
  // A figure the reply lacks is '?', never 0.
  auto figure = [&](const char* key) {
    auto n = count(get(d, key));
    return n ? std::to_string(*n) : std::string("?");
  };
  s.lines.push_back(fmt::format("leases: {} live, {} queued; sampled every {}",
                                figure("leases_live"), figure("queued"), interval));
  const json& kc = get(o, "kernel_charge");
  std::string charge = text(kc, "line");
  // The line says why when it is off (bpf::describe): said once.
  s.lines.push_back("kernel charge: " + (charge.empty() ? std::string("not reported") : charge));
  // Buffers of ended leases, still counted until freed.
  for (const auto& e :
       get(kc, "ended_leases").is_array() ? get(kc, "ended_leases") : json::array()) {
    std::string who =
        text(e, "lease").empty()
            ? fmt::format("an ended lease (cgroup id {})", count(get(e, "cgroup_id")).value_or(0))
            : fmt::format("ended lease {} ({})", text(e, "lease"), text(e, "name"));
    auto bytes = count(get(e, "bytes"));
    s.lines.push_back(fmt::format("  held by buffers of {}: {}", who,
                                  bytes ? units::humanBytes(*bytes) : std::string("?")));
  }
  // What the programs could not do exactly, since their maps were made.
  std::vector<std::string> odd;
  if (get(kc, "anomalies").is_object())
    for (const auto& [name, v] : get(kc, "anomalies").items())
      if (count(v).value_or(0)) odd.push_back(fmt::format("{} {}", *count(v), name));
  if (!odd.empty())
    s.lines.push_back(fmt::format("  not exact: {} (tally doctor says what each means)",
                                  fmt::format("{}", fmt::join(odd, ", "))));
  const json& cov = get(o, "coverage");
  s.lines.push_back(fmt::format("coverage: MemoryMax covers {} on kernel {}",
                                text(cov, "state").empty() ? "?" : text(cov, "state"),
                                text(cov, "kernel").empty() ? "?" : text(cov, "kernel")));
  const json& ledger = get(o, "ledger");
  if (get(ledger, "writes").is_boolean() && !get(ledger, "writes").get<bool>()) {
    s.ledgerWrites = false;
    s.lines.push_back(fmt::format(
        "ledger: {} CANNOT WRITE: {}; new leases and releases are refused until it does (free "
        "space or fix the state directory)",
        text(ledger, "path"), text(ledger, "failure")));
  } else if (get(ledger, "writes").is_boolean()) {
    s.lines.push_back(fmt::format("ledger: {} writes", text(ledger, "path")));
  }
  return s;
}

}  // namespace tally::views
