#include "views/ledger_view.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "util/json_view.h"
#include "util/text.h"
#include "util/units.h"

namespace tally::views {
namespace {

using json = nlohmann::json;

// Cut to `width` display columns (UTF-8 aware for what tally writes: ASCII
// names and the ellipsis), padding to exactly `width`.
std::string fit(std::string_view s, std::size_t width) {
  std::string out;
  if (s.size() <= width) {
    out.assign(s);
  } else {
    out = text::truncateUtf8(s, width - 1) + "…";
    return out;  // width columns: width-1 bytes of ASCII and one ellipsis
  }
  out.append(width - out.size(), ' ');
  return out;
}

}  // namespace

std::string wallTime(std::uint64_t ns, bool utc) {
  if (!ns) return "-";
  time_t secs = static_cast<time_t>(ns / 1000000000u);
  tm t{};
  if (utc)
    gmtime_r(&secs, &t);
  else
    localtime_r(&secs, &t);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &t);
  return buf;
}

namespace {

const json& at(const json& j, std::initializer_list<const char*> path) {
  static const json kNull;
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object()) return kNull;
    auto it = cur->find(k);
    if (it == cur->end()) return kNull;
    cur = &*it;
  }
  return *cur;
}

}  // namespace

std::optional<std::uint32_t> ownerOf(const std::string& recordJson) {
  const json rec = json::parse(recordJson, nullptr, false);
  const json& uid = at(rec, {"lease", "owner_uid"});
  if (!uid.is_number_unsigned() || uid.get<std::uint64_t>() > UINT32_MAX) return std::nullopt;
  return static_cast<std::uint32_t>(uid.get<std::uint64_t>());
}

Result<std::uint64_t> parseWhen(std::string_view text, std::uint64_t nowNs, bool utc) {
  auto bad = [&] {
    return Error{0, fmt::format("'{}' is not a time: use now, today, yesterday, 2026-11-30, "
                                "'2026-11-30 14:05[:09]' ({}) or a duration ago such as 90m, 2h, "
                                "3d",
                                text::truncateUtf8(text, 64), utc ? "UTC" : "local time")};
  };
  // journalctl's words: now, and the midnights that begin today and yesterday.
  if (text == "now") return nowNs;
  if (text == "today" || text == "yesterday") {
    time_t secs = static_cast<time_t>(nowNs / 1000000000u);
    tm t{};
    if (utc)
      gmtime_r(&secs, &t);
    else
      localtime_r(&secs, &t);
    t.tm_hour = t.tm_min = t.tm_sec = 0;
    if (text == "yesterday") t.tm_mday -= 1;  // mktime/timegm carry it across months
    t.tm_isdst = -1;
    time_t midnight = utc ? timegm(&t) : mktime(&t);
    if (midnight < 0) return bad();
    return static_cast<std::uint64_t>(midnight) * 1000000000ULL;
  }
  if (!text.empty() && text.find('-') == std::string_view::npos) {
    if (auto us = units::parseDurationUs(text)) {
      std::uint64_t ago = *us * 1000;
      return nowNs > ago ? nowNs - ago : 0;
    }
    // Days are not a duration unit elsewhere: "3d" here only.
    if (text.size() > 1 && text.back() == 'd') {
      auto n = text::parseU64(text.substr(0, text.size() - 1));
      if (n && *n < 100000) {
        std::uint64_t ago = *n * 86400ULL * 1000000000ULL;
        return nowNs > ago ? nowNs - ago : 0;
      }
    }
    return bad();
  }
  std::string s(text);
  std::replace(s.begin(), s.end(), 'T', ' ');
  tm t{};
  const char* end = nullptr;
  for (const char* format : {"%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"}) {
    t = tm{};
    end = strptime(s.c_str(), format, &t);
    if (end && *end == '\0') break;
    end = nullptr;
  }
  if (!end) return bad();
  t.tm_isdst = -1;
  time_t secs = utc ? timegm(&t) : mktime(&t);
  if (secs < 0) return bad();
  return static_cast<std::uint64_t>(secs) * 1000000000ULL;
}

std::vector<ledger::Row> filterRows(const std::vector<ledger::Row>& rows, const LedgerFilter& f) {
  std::vector<ledger::Row> out;
  for (const auto& r : rows) {
    const auto& e = r.entry;
    if (f.sinceNs && e.startedAtNs < *f.sinceNs) continue;
    if (f.untilNs && e.startedAtNs > *f.untilNs) continue;
    if (!f.name.empty() && e.name != f.name) continue;
    if (!f.outcome.empty() && e.outcomeClass != f.outcome) continue;
    if (!f.lease.empty() && e.leaseId.rfind(f.lease, 0) != 0) continue;
    if (f.owner && ownerOf(e.recordJson) != f.owner) continue;
    out.push_back(r);
  }
  if (f.last && out.size() > f.last)
    out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(f.last));
  return out;
}

std::vector<std::string> ledgerTable(const std::vector<ledger::Row>& rows, bool utc,
                                     const UserNameFn& userName) {
  std::vector<std::string> lines;
  constexpr const char* kRow = "{:>6}  {:<19}  {:>8}  {:<12}  {}  {}  {}  {}  {:>9}  {:>9}  {:>9}";
  lines.push_back(fmt::format(kRow, "SEQ", utc ? "STARTED (UTC)" : "STARTED", "DURATION", "LEASE",
                              fit("NAME", 16), fit("USER", 8), fit("POOL", 8), fit("OUTCOME", 19),
                              "EXIT", "MEM PEAK", "GPU PEAK"));
  bool gaps = false, sampledPeak = false;
  // memory.peak; where it was gone with the cgroup, the peak of the daemon's
  // samples of memory.current, marked '~' (measured, but between samples).
  auto memoryPeak = [&](const json& rec) {
    if (const json& peak = at(rec, {"memory", "peak_bytes"}); !peak.is_null())
      return jsonview::bytesOrDash(peak);
    const json& sampled = at(rec, {"memory", "sampled", "peak_current_bytes"});
    if (sampled.is_null()) return std::string("-");
    sampledPeak = true;
    return "~" + jsonview::bytesOrDash(sampled);
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const auto& e = r.entry;
    if (i && !r.legacy && !rows[i - 1].legacy && r.seq != rows[i - 1].seq + 1) gaps = true;
    json rec = json::parse(e.recordJson, nullptr, false);
    // A row written before owners were recorded names none: "-", never a guess.
    const json& uid = at(rec, {"lease", "owner_uid"});
    std::string user = uid.is_number_unsigned() && uid.get<std::uint64_t>() <= UINT32_MAX
                           ? userName(static_cast<std::uint32_t>(uid.get<std::uint64_t>()))
                           : std::string("-");
    std::string pools;
    const json& p = at(rec, {"lease", "pools"});
    if (p.is_array()) {
      for (const auto& v : p)
        if (v.is_string()) pools += (pools.empty() ? "" : ",") + v.get<std::string>();
    }
    // tally run's own status where it ran the command; else what the attacher
    // reported (an attached lease's task: its exit code or the signal's name).
    std::string exit = "-";
    if (e.exitStatus) {
      exit = std::to_string(*e.exitStatus);
    } else if (const json& code = at(rec, {"outcome", "exit_code"}); code.is_number_unsigned()) {
      exit = std::to_string(code.get<std::uint64_t>());
    } else if (const json& sig = at(rec, {"outcome", "signal_name"}); sig.is_string()) {
      exit = sig.get<std::string>();
      if (exit.size() > 9) exit = fit(exit, 9);
    }
    lines.push_back(fmt::format(
        kRow, r.legacy ? fmt::format("({})", r.seq) : std::to_string(r.seq),
        wallTime(e.startedAtNs, utc), jsonview::spanText(e.startedAtNs, e.endedAtNs), e.leaseId,
        fit(e.name, 16), fit(user, 8), fit(pools.empty() ? "-" : pools, 8), fit(e.outcomeClass, 19),
        exit, memoryPeak(rec), jsonview::bytesOrDash(at(rec, {"gpu", "peak_bytes"}))));
  }
  if (sampledPeak)
    lines.push_back(
        "(~: the peak of the daemon's samples of memory.current; memory.peak was gone with the "
        "cgroup when the lease ended)");
  if (gaps)
    lines.push_back(
        "(SEQ numbers the ledger's hash chain: the rows between are lifecycle rows, granted, "
        "started, released; 'tally ledger export' shows them all)");
  return lines;
}

}  // namespace tally::views
