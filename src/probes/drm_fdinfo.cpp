#include "probes/drm_fdinfo.h"

#include "util/text.h"

namespace tally::probes {
namespace {

using text::parseU64;
using text::trim;
using Field = std::optional<std::uint64_t>;

using text::startsWith;

// A key or keystr: non-empty, printable ASCII, no blanks.
bool validKeystr(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
  }
  return true;
}

// A value string: non-empty, no control bytes (NUL included) except tab.
bool validValstr(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

// Split "N<blanks>UNIT" into number and unit; "N" alone gives an empty unit.
bool splitNumberUnit(std::string_view v, std::uint64_t& number, std::string_view& unit) {
  std::size_t i = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
  auto n = parseU64(v.substr(0, i));
  if (!n) return false;
  std::size_t j = i;
  while (j < v.size() && (v[j] == ' ' || v[j] == '\t')) ++j;
  if (j == i && j < v.size()) return false;  // "12KiB": a unit needs a separator
  number = *n;
  unit = v.substr(j);
  return true;
}

template <typename T>
T& slot(std::vector<std::pair<std::string, T>>& v, std::string_view name) {
  for (auto& [k, val] : v)
    if (k == name) return val;
  return v.emplace_back(std::string(name), T{}).second;
}

class Parser {
 public:
  explicit Parser(DrmFdinfo& out) : out_(out) {}

  void line(unsigned lineNumber, std::string_view raw) {
    line_ = lineNumber;
    std::string_view l = trim(raw);
    if (l.empty()) return;
    auto colon = l.find(':');
    if (colon == std::string_view::npos) return reject("no ':' between key and value");
    std::string_view key = l.substr(0, colon);
    std::string_view value = trim(l.substr(colon + 1));

    // amdgpu 5.14-5.18 prints "vram mem:\tN kB": the only keys with a blank.
    if (key == "vram mem" || key == "gtt mem" || key == "cpu mem") {
      return size(slot(out_.regions, key.substr(0, key.find(' '))).legacy514, value);
    }
    if (!validKeystr(key)) return reject("key is empty or contains blanks or control bytes");
    if (startsWith(key, "drm-")) return drmKey(key, value);
    if (startsWith(key, "amd-")) return amdKey(key, value);
    if (key == "pasid") return number(out_.pasid, value);
    if (key == "pdev") return string(out_.pdev, value);  // the 5.14 spelling of drm-pdev
    // pos/flags/mnt_id/ino, 5.14 engine percentages, keys of the future: ignored.
  }

 private:
  void reject(const char* why) { out_.rejected.push_back({line_, why}); }

  bool claim(const Field& f) {
    if (f) reject("duplicate key; first value kept");
    return !f;
  }

  void size(Field& field, std::string_view value) {
    out_.hasUsageStats = true;
    if (!claim(field)) return;
    auto bytes = parseDrmSize(value);
    if (!bytes) return reject("not a size: want N, N KiB, N MiB or N kB, within u64");
    field = bytes;
  }

  void number(Field& field, std::string_view value) {
    if (!claim(field)) return;
    auto n = parseU64(value);
    if (!n) return reject("not an unsigned integer within u64");
    field = n;
  }

  void string(std::optional<std::string>& field, std::string_view value) {
    if (field) return reject("duplicate key; first value kept");
    if (!validValstr(value)) return reject("empty value or control bytes in value");
    field = std::string(value);
  }

  // "N unit" where unit is one of `units` (each with its multiplier); `bareOk`
  // accepts a number without unit as multiplier 1.
  void scaled(Field& field, std::string_view value, bool bareOk,
              std::initializer_list<std::pair<std::string_view, std::uint64_t>> units) {
    if (!claim(field)) return;
    std::uint64_t n = 0;
    std::string_view unit;
    if (!splitNumberUnit(value, n, unit)) return reject("not an unsigned integer within u64");
    if (unit.empty()) {
      if (!bareOk) return reject("missing unit");
      field = n;
      return;
    }
    for (auto [name, mult] : units) {
      if (unit != name) continue;
      auto v = text::mulU64(n, mult);
      if (!v) return reject("value overflows u64");
      field = v;
      return;
    }
    reject("unknown unit");
  }

  void amdKey(std::string_view key, std::string_view value) {
    out_.hasUsageStats = true;
    for (auto& [k, v] : out_.amd)
      if (k == key) return reject("duplicate key; first value kept");
    auto bytes = parseDrmSize(value);
    if (!bytes) return reject("amd-* value is not a size");
    out_.amd.emplace_back(std::string(key), *bytes);
  }

  void drmKey(std::string_view key, std::string_view value) {
    out_.hasUsageStats = true;
    if (key == "drm-driver") {
      if (!out_.driver.empty()) return reject("duplicate key; first value kept");
      if (!validValstr(value)) return reject("empty value or control bytes in value");
      out_.driver = std::string(value);
      return;
    }
    if (key == "drm-pdev") return string(out_.pdev, value);
    if (key == "drm-client-id") return number(out_.clientId, value);
    if (key == "drm-client-name") return string(out_.clientName, value);

    struct Prefix {
      std::string_view text;
      int kind;
    };
    // Longer prefixes first: drm-total-cycles-* is an engine key, not a region;
    // drm-engine-capacity-* is not an engine named "capacity-*".
    static constexpr Prefix kPrefixes[] = {
        {"drm-total-cycles-", 0}, {"drm-engine-capacity-", 1}, {"drm-engine-", 2},
        {"drm-cycles-", 3},       {"drm-maxfreq-", 4},         {"drm-total-", 10},
        {"drm-shared-", 11},      {"drm-resident-", 12},       {"drm-purgeable-", 13},
        {"drm-active-", 14},      {"drm-memory-", 15},
    };
    for (const auto& p : kPrefixes) {
      if (!startsWith(key, p.text)) continue;
      std::string_view name = key.substr(p.text.size());
      if (name.empty()) return reject("key names no engine or region");
      if (p.kind >= 10) {
        RegionStats& r = slot(out_.regions, name);
        static constexpr Field RegionStats::*kFields[] = {
            &RegionStats::total,     &RegionStats::shared, &RegionStats::resident,
            &RegionStats::purgeable, &RegionStats::active, &RegionStats::memory};
        return size(r.*kFields[p.kind - 10], value);
      }
      EngineStats& e = slot(out_.engines, name);
      switch (p.kind) {
        case 0:
          return number(e.totalCycles, value);
        case 1:
          return capacity(e.capacity, value);
        case 2:
          return scaled(e.busyNs, value, true, {{"ns", 1}});
        case 3:
          return number(e.cycles, value);
        default:
          return scaled(e.maxfreqHz, value, true,
                        {{"Hz", 1}, {"KHz", 1000}, {"kHz", 1000}, {"MHz", 1000000}});
      }
    }
    // drm-* keys this version does not know: ignored, as the spec asks.
  }

  void capacity(Field& field, std::string_view value) {
    if (!claim(field)) return;
    auto n = parseU64(value);
    if (!n) return reject("not an unsigned integer within u64");
    if (*n == 0) return reject("engine capacity 0 is not allowed");
    field = n;
  }

  DrmFdinfo& out_;
  unsigned line_ = 0;
};

}  // namespace

const char* toString(ResidentSource s) {
  switch (s) {
    case ResidentSource::kDrmResident:
      return "drm-resident";
    case ResidentSource::kDrmMemory:
      return "drm-memory";
    case ResidentSource::kAmdgpu514:
      return "amdgpu-5.14";
  }
  return "?";
}

std::optional<RegionResident> residentOf(const RegionStats& r) {
  if (r.resident) return RegionResident{*r.resident, ResidentSource::kDrmResident};
  if (r.memory) return RegionResident{*r.memory, ResidentSource::kDrmMemory};
  if (r.legacy514) return RegionResident{*r.legacy514, ResidentSource::kAmdgpu514};
  return std::nullopt;
}

const RegionStats* DrmFdinfo::region(std::string_view name) const {
  for (const auto& [k, v] : regions)
    if (k == name) return &v;
  return nullptr;
}

const EngineStats* DrmFdinfo::engine(std::string_view name) const {
  for (const auto& [k, v] : engines)
    if (k == name) return &v;
  return nullptr;
}

std::optional<std::uint64_t> parseDrmSize(std::string_view value) {
  std::uint64_t n = 0;
  std::string_view unit;
  if (!splitNumberUnit(value, n, unit)) return std::nullopt;
  if (unit.empty()) return n;
  if (unit == "KiB" || unit == "kB") return text::mulU64(n, 1024);
  if (unit == "MiB") return text::mulU64(n, std::uint64_t{1024} * 1024);
  return std::nullopt;
}

DrmFdinfo parseDrmFdinfo(std::string_view text) {
  DrmFdinfo out;
  Parser parser(out);
  text::LineReader lines(text);
  while (auto l = lines.next()) parser.line(lines.number(), *l);
  return out;
}

}  // namespace tally::probes
