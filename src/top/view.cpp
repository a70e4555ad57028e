#include "top/view.h"

#include <fmt/format.h>

#include <ctime>
#include <optional>

#include "util/json_view.h"
#include "util/units.h"

namespace tally::top {
namespace {

using json = nlohmann::json;

using jsonview::count;
using jsonview::get;
using jsonview::joined;
std::string str(const json& j, const char* key, const char* dflt = "-") {
  return jsonview::text(j, key, dflt);
}

std::string bytes(const json& v) { return count(v) ? units::humanBytes(*count(v)) : "-"; }

std::string pair(const json& a, const json& b) {
  if (!count(a) && !count(b)) return "-";
  return bytes(a) + "/" + bytes(b);
}

// "41.2 GiB/48.0 GiB 86%": used against a limit, the share when both are known.
std::string against(const json& used, const json& limit) {
  std::string s = pair(used, limit);
  if (count(used) && count(limit) && *count(limit) > 0)
    s += fmt::format(" {:>3}%", *count(used) * 100 / *count(limit));
  return s;
}

std::string runningText(const json& row) {
  const json& r = get(row, "running");
  return r.is_boolean() ? (r.get<bool>() ? "yes" : "no") : "?";
}

std::string workload(const json& row) {
  const json& w = get(row, "workload");
  if (auto c = str(w, "container", ""); !c.empty()) return c;
  if (auto u = str(w, "unit", ""); !u.empty()) return u;
  return str(w, "cgroup");
}

std::string attributes(const json& row) {
  std::string out;
  const json& a = get(get(row, "declared"), "attributes");
  if (!a.is_object()) return out;
  for (const auto& [k, v] : a.items()) {
    if (v.is_string())
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v.get<std::string>());
  }
  return out;
}

constexpr const char* kSeatHeader =
    "{:<12} {:<14} {:<8} {:<3} {:<5} {:>21} {:>10} {:>10} {:>10} {:>26}  {}";

std::string seatLine(const json& s) {
  bool fresh = get(s, "fresh").is_boolean() && s["fresh"].get<bool>();
  const json& host = get(s, "host");
  const json& gpu = get(s, "gpu");
  const json& regions = get(gpu, "regions");
  std::string state = str(s, "state");
  if (state == "running" && !fresh) state = "stale";
  // Declared attributes first: "which model runs in this lane" is what a seat meter reads.
  std::string extra = attributes(s);
  extra += (extra.empty() ? "" : "  ") + workload(s);
  return fmt::format(fmt::runtime(kSeatHeader), str(s, "lease"), str(s, "name"), state,
                     runningText(s), fresh ? "yes" : "no",
                     fresh ? against(get(host, "current_bytes"), get(host, "max_bytes")) : "-",
                     fresh ? bytes(get(host, "peak_bytes")) : "-",
                     fresh ? bytes(get(get(regions, "gtt"), "current_bytes")) : "-",
                     fresh ? bytes(get(get(regions, "vram"), "current_bytes")) : "-",
                     fresh ? against(get(gpu, "current_bytes"), get(gpu, "limit_bytes")) : "-",
                     extra);
}

std::string clockText(std::uint64_t ns) {
  std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000u);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

}  // namespace

std::string fit(const std::string& line, std::size_t width) {
  std::string out;
  std::size_t cols = 0;
  for (std::size_t i = 0; i < line.size() && cols < width;) {
    auto c = static_cast<unsigned char>(line[i]);
    std::size_t len = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xe  ? 3
                      : (c >> 3) == 0x1e ? 4
                                         : 1;
    out.append(line, i, len);
    i += len;
    ++cols;
  }
  if (cols < width) out.append(width - cols, ' ');
  return out;
}

std::vector<std::string> seatTable(const json& seats, std::size_t width) {
  std::vector<std::string> lines;
  lines.push_back(fit(fmt::format(fmt::runtime(kSeatHeader), "LEASE", "NAME", "STATE", "RUN",
                                  "FRESH", "MEMORY NOW/MAX", "MEM PEAK", "GTT", "VRAM",
                                  "GPU NOW/LIMIT", "DECLARED  WORKLOAD"),
                      width));
  if (seats.is_array()) {
    for (const auto& s : seats) lines.push_back(fit(seatLine(s), width));
  }
  if (lines.size() == 1) lines.push_back(fit("(no leases)", width));
  return lines;
}

std::vector<std::string> render(const json& o, const ViewOptions& opts) {
  std::size_t w = opts.width;
  std::vector<std::string> head, leases, rest;
  const json& cov = get(o, "coverage");
  const json& host = get(o, "host");
  const json& daemon = get(o, "daemon");
  std::string when =
      count(get(o, "observed_at_ns")) ? clockText(*count(get(o, "observed_at_ns"))) : "--:--:--";
  head.push_back(fit(
      fmt::format("tally top  {}  every {} ms  coverage: MemoryMax covers {}  host MemAvailable {} "
                  " leases {} queued {}  [q quits]",
                  when, opts.refreshMs, str(cov, "state", "?"),
                  bytes(get(host, "mem_available_bytes")),
                  get(daemon, "leases_live").is_number() ? get(daemon, "leases_live").dump() : "?",
                  get(daemon, "queued").is_number() ? get(daemon, "queued").dump() : "?"),
      w));
  if (!opts.status.empty()) head.push_back(fit("! " + opts.status, w));
  head.push_back(fit("", w));
  leases = seatTable(get(o, "seats"), w);

  rest.push_back(fit("", w));
  rest.push_back(fit(fmt::format("{:<12} {:>7} {:>6} {:>23} {:>23} {:>10} {:>10}  {}", "POOL",
                                 "HOLDERS", "QUEUE", "MEMORY DECLARED/BUDGET",
                                 "GPU DECLARED/BUDGET", "HOST ROOM", "GPU ROOM", "DEVICES"),
                     w));
  if (const json& pools = get(o, "pools"); pools.is_array()) {
    for (const auto& p : pools) {
      const json& h = get(p, "headroom");
      std::string holders =
          fmt::format("{}/{}", get(p, "holders").is_array() ? get(p, "holders").size() : 0,
                      get(p, "capacity").is_number() ? get(p, "capacity").dump() : "?");
      rest.push_back(
          fit(fmt::format("{:<12} {:>7} {:>6} {:>23} {:>23} {:>10} {:>10}  {}", str(p, "pool"),
                          holders, get(p, "queue").is_array() ? get(p, "queue").size() : 0,
                          pair(get(p, "memory_declared"), get(p, "memory_budget")),
                          pair(get(p, "gpu_memory_declared"), get(p, "gpu_memory_budget")),
                          bytes(get(h, "host_bytes")), bytes(get(h, "gpu_bytes")),
                          joined(get(p, "devices")).empty() ? "all" : joined(get(p, "devices"))),
              w));
    }
  }
  rest.push_back(fit("", w));
  rest.push_back(fit(fmt::format("{:<14} {:<8} {:>23} {:>23}", "DEVICE", "DRIVER", "GTT USED/TOTAL",
                                 "VRAM USED/TOTAL"),
                     w));
  const json& devices = get(o, "devices");
  if (devices.is_array()) {
    for (const auto& d : devices) {
      const json& r = get(d, "regions");
      rest.push_back(fit(
          fmt::format("{:<14} {:<8} {:>23} {:>23}", str(d, "device"), str(d, "driver"),
                      pair(get(get(r, "gtt"), "used_bytes"), get(get(r, "gtt"), "total_bytes")),
                      pair(get(get(r, "vram"), "used_bytes"), get(get(r, "vram"), "total_bytes"))),
          w));
    }
  }
  if (!devices.is_array() || devices.empty()) rest.push_back(fit("(no DRM device)", w));
  const json& outside = get(o, "outside_leases");
  std::string outsideLine = "GPU memory outside leases (devices' used minus leases'):";
  for (const char* region : {"gtt", "vram"}) {
    const json& u = get(outside, region);
    outsideLine += fmt::format(
        "  {} {}", region,
        count(get(u, "bytes")) ? bytes(u["bytes"]) : "- (" + str(u, "unknown", "?") + ")");
  }
  rest.push_back(fit(outsideLine, w));

  if (opts.height && head.size() + leases.size() + rest.size() > opts.height) {
    // Cut the lease rows (keeping the header row) and say how many are hidden.
    std::size_t room = opts.height > head.size() + rest.size() + 2
                           ? opts.height - head.size() - rest.size() - 2
                           : 0;
    std::size_t hidden = leases.size() - 1 - std::min(room, leases.size() - 1);
    leases.resize(1 + std::min(room, leases.size() - 1));
    leases.push_back(fit(
        fmt::format("... {} more lease(s); enlarge the terminal or use 'tally seats'", hidden), w));
  }
  std::vector<std::string> all = head;
  all.insert(all.end(), leases.begin(), leases.end());
  all.insert(all.end(), rest.begin(), rest.end());
  if (opts.height && all.size() > opts.height) all.resize(opts.height);
  return all;
}

}  // namespace tally::top
