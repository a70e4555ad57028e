#include "views/top.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <optional>
#include <set>

#include "util/clean_text.h"
#include "util/json_view.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::views {
namespace {

using json = nlohmann::json;

using jsonview::count;
using jsonview::get;
using jsonview::joined;
std::string str(const json& j, const char* key, const char* dflt = "-") {
  return jsonview::text(j, key, dflt);
}

std::string bytes(const json& v) { return jsonview::bytesOrDash(v); }

std::string pair(const json& a, const json& b) {
  if (!count(a) && !count(b)) return "-";
  return bytes(a) + "/" + bytes(b);
}

std::string runningText(const json& row) {
  const json& r = get(row, "running");
  return r.is_boolean() ? (r.get<bool>() ? "yes" : "no") : "?";
}

// Whose lease: the name the client looked up ("user"), else the uid.
std::string userText(const json& row) {
  if (auto u = str(row, "user", ""); !u.empty()) return u;
  auto uid = count(get(row, "owner_uid"));
  return uid ? std::to_string(*uid) : std::string("-");
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

std::string clockText(std::uint64_t ns) {
  std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000u);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

}  // namespace

// Every line tally top shows goes through here: made printable first (names,
// units, cgroup paths and attributes come from clients and the kernel; a
// terminal must show them, never obey them), then cut to the width.
std::string fit(const std::string& raw, std::size_t width) {
  const std::string line = text::printable(raw);
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

namespace {

// "41.2G": a size in at most 6 columns, for a table that must fit 80.
std::string compact(const json& v) {
  auto n = count(v);
  if (!n) return "-";
  static const char* kUnits[] = {"B", "K", "M", "G", "T", "P"};
  double x = static_cast<double>(*n);
  std::size_t u = 0;
  while (x >= 1024 && u + 1 < std::size(kUnits)) {
    x /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{}B", *n);
  return x < 100 ? fmt::format("{:.1f}{}", x, kUnits[u]) : fmt::format("{:.0f}{}", x, kUnits[u]);
}

std::optional<std::uint64_t> percent(const json& used, const json& limit) {
  if (!count(used) || !count(limit) || *count(limit) == 0) return std::nullopt;
  return *count(used) * 100 / *count(limit);
}

// "41.2G/48.0G  86%"
std::string compactAgainst(const json& used, const json& limit) {
  if (!count(used) && !count(limit)) return "-";
  std::string s = compact(used) + "/" + compact(limit);
  if (auto p = percent(used, limit)) s += fmt::format(" {:>3}%", *p);
  return s;
}

constexpr const char* kRefusedHeader = "REFUSED";

// A column of one of top's tables (leases, pools, devices).
struct Column {
  const char* header;
  std::size_t width;  // 0: the rest of the line
  int drop;           // dropped first when the line is too narrow: higher first; 0 never
  bool right;
  std::function<std::string(const json& row, bool fresh)> value;
};

const std::vector<Column>& seatColumns() {
  static const std::vector<Column> columns = {
      {"LEASE", 12, 0, false, [](const json& s, bool) { return str(s, "lease"); }},
      // A child lease (a Slurm step in its job) under its parent, as ps draws a forest.
      {"NAME", 12, 0, false,
       [](const json& s, bool) {
         return str(s, "parent", "").empty() ? str(s, "name") : "\\_ " + str(s, "name");
       }},
      {"USER", 8, 1, false, [](const json& s, bool) { return userText(s); }},
      {"STATE", 7, 0, false,
       [](const json& s, bool fresh) {
         std::string state = str(s, "state");
         return state == "running" && !fresh ? std::string("stale") : state;
       }},
      {"MEM NOW/MAX", 16, 0, true,
       [](const json& s, bool fresh) {
         const json& h = get(s, "host");
         return fresh ? compactAgainst(get(h, "current_bytes"), get(h, "max_bytes")) : "-";
       }},
      {"GPU NOW/MAX", 16, 0, true,
       [](const json& s, bool fresh) {
         const json& g = get(s, "gpu");
         return fresh ? compactAgainst(get(g, "current_bytes"), get(g, "limit_bytes")) : "-";
       }},
      {"MEM PEAK", 8, 3, true,
       [](const json& s, bool fresh) {
         return fresh ? compact(get(get(s, "host"), "peak_bytes")) : "-";
       }},
      {"GTT", 7, 4, true,
       [](const json& s, bool fresh) {
         return fresh ? compact(get(get(get(get(s, "gpu"), "regions"), "gtt"), "current_bytes"))
                      : "-";
       }},
      {"VRAM", 7, 4, true,
       [](const json& s, bool fresh) {
         return fresh ? compact(get(get(get(get(s, "gpu"), "regions"), "vram"), "current_bytes"))
                      : "-";
       }},
      // Allocations the kernel refused at the bound: a column only where some
      // lease is charged in the kernel ("-" for one that is not).
      {kRefusedHeader, 7, 4, true,
       [](const json& s, bool) {
         const json& n = get(get(s, "gpu"), "allocations_refused");
         return count(n) ? std::to_string(*count(n)) : std::string("-");
       }},
      // A stale row's "running" is as old as its figures: not shown as now.
      {"RUN", 3, 5, false,
       [](const json& s, bool fresh) { return fresh ? runningText(s) : std::string("-"); }},
      {"WORKLOAD", 0, 2, false,
       [](const json& s, bool) {
         // The workload under its header; the declared attributes ("which
         // model runs in this lane") after it, bracketed.
         // A queued lease has no workload yet: why it waits, as its client hears it.
         if (str(s, "state") == "queued") return "waits: " + str(s, "waiting", "for its turn");
         std::string extra = attributes(s);
         return workload(s) + (extra.empty() ? "" : "  [" + extra + "]");
       }},
  };
  return columns;
}

// The columns that fit `width`: the least important go whole, first (a
// column is never cut mid-word), the rest line up.
std::vector<const Column*> fittingColumns(std::vector<const Column*> shown, std::size_t width) {
  auto fixed = [&] {
    std::size_t w = 0;
    for (const auto* c : shown) w += c->width + 1;
    return w;
  };
  for (;;) {
    bool restShown = !shown.empty() && shown.back()->width == 0;
    std::size_t need = fixed() + (restShown ? 12 : 0);  // the rest needs room to say something
    if (need <= width + 1) break;
    auto victim = std::max_element(shown.begin(), shown.end(),
                                   [](const auto* a, const auto* b) { return a->drop < b->drop; });
    if ((*victim)->drop == 0) break;  // only the essentials left: they are cut at the edge
    shown.erase(victim);
  }
  return shown;
}

// One cell, exactly its column's width: a long value cut with "…", figures right-aligned.
std::string cell(const Column& c, const std::string& text) {
  if (c.width == 0) return text;
  std::string t = text.size() > c.width ? fit(text, c.width - 1) + "…" : text;
  if (c.right && t.size() < c.width) return std::string(c.width - t.size(), ' ') + t;
  return fit(t, c.width);
}

std::string headerLine(const std::vector<const Column*>& columns, std::size_t width) {
  std::string header;
  for (const auto* c : columns) {
    if (!header.empty()) header += ' ';
    header += c->right ? fmt::format("{:>{}}", c->header, c->width)
                       : (c->width ? fit(c->header, c->width) : std::string(c->header));
  }
  return fit(header, width);
}

std::string rowLine(const std::vector<const Column*>& columns, const json& s, bool fresh,
                    std::size_t width) {
  std::string line;
  for (const auto* c : columns) {
    if (!line.empty()) line += ' ';
    line += cell(*c, c->value(s, fresh));
  }
  return fit(line, width);
}

// The pools table: the daemon's live state (holders, queue, declarations,
// headroom) is "-" when it is not current; the budgets are the config's.
const std::vector<Column>& poolColumns() {
  static const std::vector<Column> columns = {
      {"POOL", 12, 0, false, [](const json& p, bool) { return str(p, "pool"); }},
      {"HOLDERS", 7, 0, true,
       [](const json& p, bool fresh) {
         std::string cap = get(p, "capacity").is_number() ? get(p, "capacity").dump() : "?";
         return fresh && get(p, "holders").is_array()
                    ? fmt::format("{}/{}", get(p, "holders").size(), cap)
                    : "-/" + cap;
       }},
      {"QUEUE", 5, 1, true,
       [](const json& p, bool fresh) {
         return fresh && get(p, "queue").is_array() ? std::to_string(get(p, "queue").size())
                                                    : std::string("-");
       }},
      {"MEMORY DECLARED/BUDGET", 23, 3, true,
       [](const json& p, bool fresh) {
         return fresh ? pair(get(p, "memory_declared"), get(p, "memory_budget"))
                      : "-/" + bytes(get(p, "memory_budget"));
       }},
      {"GPU DECLARED/BUDGET", 23, 0, true,
       [](const json& p, bool fresh) {
         return fresh ? pair(get(p, "gpu_memory_declared"), get(p, "gpu_memory_budget"))
                      : "-/" + bytes(get(p, "gpu_memory_budget"));
       }},
      {"HOST ROOM", 10, 2, true,
       [](const json& p, bool fresh) {
         return fresh ? bytes(get(get(p, "headroom"), "host_bytes")) : std::string("-");
       }},
      {"GPU ROOM", 10, 0, true,
       [](const json& p, bool fresh) {
         return fresh ? bytes(get(get(p, "headroom"), "gpu_bytes")) : std::string("-");
       }},
      {"DEVICES", 0, 4, false,
       [](const json& p, bool) {
         return joined(get(p, "devices")).empty() ? std::string("all") : joined(get(p, "devices"));
       }},
  };
  return columns;
}

const std::vector<Column>& deviceColumns() {
  static const std::vector<Column> columns = {
      {"DEVICE", 14, 0, false, [](const json& d, bool) { return str(d, "device"); }},
      {"DRIVER", 8, 2, false, [](const json& d, bool) { return str(d, "driver"); }},
      {"GTT USED/TOTAL", 23, 0, true,
       [](const json& d, bool fresh) {
         const json& r = get(get(d, "regions"), "gtt");
         return fresh ? pair(get(r, "used_bytes"), get(r, "total_bytes"))
                      : "-/" + bytes(get(r, "total_bytes"));
       }},
      {"VRAM USED/TOTAL", 23, 0, true,
       [](const json& d, bool fresh) {
         const json& r = get(get(d, "regions"), "vram");
         return fresh ? pair(get(r, "used_bytes"), get(r, "total_bytes"))
                      : "-/" + bytes(get(r, "total_bytes"));
       }},
  };
  return columns;
}

// A table of `rows` in the columns that fit `width`.
std::vector<std::string> table(const std::vector<Column>& columns, const json& rows, bool fresh,
                               std::size_t width) {
  std::vector<const Column*> all;
  for (const auto& c : columns) all.push_back(&c);
  auto shown = fittingColumns(all, width);
  std::vector<std::string> lines{headerLine(shown, width)};
  if (rows.is_array())
    for (const auto& r : rows) lines.push_back(rowLine(shown, r, fresh, width));
  return lines;
}

// A sentence cut at a word when it is wider than `width`, ending "…".
std::string fitWords(const std::string& line, std::size_t width) {
  if (line.size() <= width) return fit(line, width);
  std::size_t cut = line.rfind(' ', width > 1 ? width - 1 : 0);
  if (cut == std::string::npos || cut == 0) cut = width > 1 ? width - 1 : 0;
  return fit(line.substr(0, cut) + "…", width);
}

enum class Tone { Plain, Near, Over, Stale };

Tone toneOf(const json& s, bool fresh) {
  if (str(s, "state") == "running" && !fresh) return Tone::Stale;
  std::uint64_t worst = 0;
  const json& h = get(s, "host");
  const json& g = get(s, "gpu");
  // A GPU limit of 0 (no GPU memory: a Slurm job without the GRES) has no
  // percentage; anything held is over it.
  if (auto limit = count(get(g, "limit_bytes")); limit && *limit == 0)
    if (count(get(g, "current_bytes")).value_or(0) > 0) return Tone::Over;
  for (auto p : {percent(get(h, "current_bytes"), get(h, "max_bytes")),
                 percent(get(g, "current_bytes"), get(g, "limit_bytes"))})
    worst = std::max(worst, p.value_or(0));
  return worst >= 100 ? Tone::Over : worst >= 90 ? Tone::Near : Tone::Plain;
}

std::string paint(const std::string& line, Tone t) {
  switch (t) {
    case Tone::Over:
      return "\x1b[31m" + line + "\x1b[0m";
    case Tone::Near:
      return "\x1b[33m" + line + "\x1b[0m";
    case Tone::Stale:
      return "\x1b[2m" + line + "\x1b[0m";
    case Tone::Plain:
      break;
  }
  return line;
}

}  // namespace

std::vector<std::string> seatTable(const json& seats, std::size_t width) {
  ViewOptions o;
  o.width = width;
  return seatTable(seats, o);
}

// Each child lease right below its parent, in the order sorted; a child
// whose parent is not listed stays where it is.
static std::vector<const json*> parentsThenChildren(const std::vector<const json*>& rows) {
  std::set<std::string> listed;
  auto parentOf = [](const json& s) { return str(s, "parent", ""); };
  for (const json* s : rows) listed.insert(str(*s, "lease", ""));
  listed.erase("");
  std::vector<const json*> out;
  for (const json* s : rows) {
    if (listed.count(parentOf(*s))) continue;  // placed under its parent below
    out.push_back(s);
    std::string id = str(*s, "lease", "");
    for (const json* c : rows)
      if (!id.empty() && parentOf(*c) == id) out.push_back(c);
  }
  return out;
}

std::vector<std::string> seatTable(const json& seats, const ViewOptions& o) {
  bool kernelCharged = false;
  if (seats.is_array())
    for (const auto& s : seats)
      kernelCharged = kernelCharged || get(get(s, "gpu"), "allocations_refused").is_number();
  std::vector<const Column*> all;
  for (const auto& c : seatColumns())
    if (kernelCharged || c.header != kRefusedHeader) all.push_back(&c);
  auto columns = fittingColumns(all, o.width);
  std::vector<std::string> lines;
  lines.push_back(headerLine(columns, o.width));
  std::vector<const json*> rows;
  if (seats.is_array())
    for (const auto& s : seats) rows.push_back(&s);
  auto now = [](const json& s, const char* what) {
    return count(get(get(s, what), "current_bytes")).value_or(0);
  };
  switch (o.sort) {
    case SortKey::Memory:
      std::stable_sort(rows.begin(), rows.end(),
                       [&](auto* a, auto* b) { return now(*a, "host") > now(*b, "host"); });
      break;
    case SortKey::Gpu:
      std::stable_sort(rows.begin(), rows.end(),
                       [&](auto* a, auto* b) { return now(*a, "gpu") > now(*b, "gpu"); });
      break;
    case SortKey::Name:
      std::stable_sort(rows.begin(), rows.end(),
                       [](auto* a, auto* b) { return str(*a, "name") < str(*b, "name"); });
      break;
    case SortKey::Lease:
      break;
  }
  rows = parentsThenChildren(rows);
  for (const json* s : rows) {
    // The daemon gone: nothing shown is current, so every row is stale.
    bool fresh = !o.daemonGone && get(*s, "fresh").is_boolean() && (*s)["fresh"].get<bool>();
    std::string line = rowLine(columns, *s, fresh, o.width);
    lines.push_back(o.colour ? paint(line, toneOf(*s, fresh)) : line);
  }
  if (lines.size() == 1) lines.push_back(fit("(no leases)", o.width));
  // GPU memory a lease holds in a region GPU memory does not count: its size
  // and why, so "GPU 0 B" never hides that memory exists there.
  for (const json* s : rows) {
    if (o.daemonGone || !get(*s, "fresh").is_boolean() || !(*s)["fresh"].get<bool>()) continue;
    const json& regions = get(get(*s, "gpu"), "regions");
    if (!regions.is_object()) continue;
    for (const auto& [name, r] : regions.items()) {
      auto bytes = count(get(r, "current_bytes"));
      if (!bytes || *bytes == 0 || str(r, "not_counted", "").empty()) continue;
      lines.push_back(
          fitWords(fmt::format("  {} {}: {} in region {} not counted as GPU memory ({})",
                               str(*s, "lease"), str(*s, "name"), compact(get(r, "current_bytes")),
                               name, str(r, "not_counted")),
                   o.width));
    }
  }
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
  std::string live =
      get(daemon, "leases_live").is_number() ? get(daemon, "leases_live").dump() : "?";
  std::string queued = get(daemon, "queued").is_number() ? get(daemon, "queued").dump() : "?";
  static constexpr const char* kSortNames[] = {"lease", "memory", "gpu", "name"};
  const char* sortedBy = kSortNames[static_cast<int>(opts.sort)];
  const bool fresh = !opts.daemonGone;
  if (opts.daemonGone) {
    // Nothing below is current: said first, and every measured figure is "-".
    head.push_back(fitWords(
        fmt::format("tally top  STALE: no answer from the daemon since {}; nothing below is "
                    "current  [q quits]",
                    when),
        w));
  } else {
    std::string wide = fmt::format(
        "tally top  {}  every {}  coverage: MemoryMax covers {}  host MemAvailable {}  leases "
        "{} queued {}  [q quits; sorted by {}: m/g/n/l]",
        when, units::humanDuration(opts.refreshMs * 1000), str(cov, "state", "?"),
        bytes(get(host, "mem_available_bytes")), live, queued, sortedBy);
    // A narrow terminal gets the same facts, shorter, rather than a cut line.
    std::string narrow =
        fmt::format("tally top {}  covers {}  MemAvail {}  {}, {} queued  by {}", when,
                    str(cov, "state", "?"), compact(get(host, "mem_available_bytes")),
                    live == "?" ? "? leases" : text::counted(std::stoull(live), "lease", "leases"),
                    queued, sortedBy);
    head.push_back(wide.size() <= w ? fit(wide, w) : fitWords(narrow, w));
  }
  if (!opts.status.empty()) head.push_back(fitWords("! " + opts.status, w));
  head.push_back(fit("", w));
  leases = seatTable(get(o, "seats"), opts);
  // The daemon sends the first page of live leases; the rest are counted.
  if (auto liveAll = count(get(get(o, "seats_page"), "live")),
      listedLive = count(get(get(o, "seats_page"), "listed"));
      liveAll && listedLive && *liveAll > *listedLive)
    leases.push_back(
        fitWords(fmt::format("({} more live leases not shown: tally seats lists them all)",
                             *liveAll - *listedLive),
                 w));

  rest.push_back(fit("", w));
  for (auto& line : table(poolColumns(), get(o, "pools"), fresh, w)) rest.push_back(line);
  rest.push_back(fit("", w));
  const json& devices = get(o, "devices");
  for (auto& line : table(deviceColumns(), devices, fresh, w)) rest.push_back(line);
  if (!devices.is_array() || devices.empty()) rest.push_back(fit("(no DRM device)", w));
  const json& outside = get(o, "outside_leases");
  std::string outsideLine = w >= 100 ? "GPU memory outside leases (devices' used minus leases'):"
                                     : "GPU memory outside leases:";
  for (const char* region : {"gtt", "vram"}) {
    const json& u = get(outside, region);
    outsideLine += fmt::format("  {} {}", region,
                               !fresh                   ? std::string("-")
                               : count(get(u, "bytes")) ? bytes(u["bytes"])
                                                        : "- (" + str(u, "unknown", "?") + ")");
  }
  rest.push_back(fitWords(outsideLine, w));

  if (opts.height && head.size() + leases.size() + rest.size() > opts.height) {
    // Cut the lease rows (keeping the header row) and say how many are hidden.
    std::size_t room = opts.height > head.size() + rest.size() + 2
                           ? opts.height - head.size() - rest.size() - 2
                           : 0;
    std::size_t hidden = leases.size() - 1 - std::min(room, leases.size() - 1);
    leases.resize(1 + std::min(room, leases.size() - 1));
    leases.push_back(fit(fmt::format("... {} not shown; enlarge the terminal or use 'tally seats'",
                                     text::counted(hidden, "lease", "leases")),
                         w));
  }
  std::vector<std::string> all = head;
  all.insert(all.end(), leases.begin(), leases.end());
  all.insert(all.end(), rest.begin(), rest.end());
  if (opts.height && all.size() > opts.height) all.resize(opts.height);
  return all;
}

}  // namespace tally::views
