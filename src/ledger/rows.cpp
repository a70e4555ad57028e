#include "ledger/rows.h"

#include <fmt/format.h>

#include <algorithm>

#include "ledger/ledger.h"
#include "util/json_view.h"

namespace tally::ledger {
namespace {

using json = nlohmann::json;

constexpr const char* kUnnamed = "lease";

// Reads one row body's fields: absent is the default, a wrong type an error
// naming the field.
class Fields {
 public:
  Fields(const json& obj, const char* kind) : obj_(obj), kind_(kind) {}
  Error bad(const std::string& field, const char* want) const {
    return Error{0,
                 fmt::format("the ledger's {} row has \"{}\" that is not {}", kind_, field, want)};
  }
  const json* get(const json& o, const char* key) const {
    if (!o.is_object()) return nullptr;
    auto it = o.find(key);
    return it == o.end() || it->is_null() ? nullptr : &*it;
  }
  Status str(const json& o, const char* key, std::string& out) const {
    const json* v = get(o, key);
    if (!v) return Ok{};
    if (!v->is_string()) return bad(key, "a string");
    out = v->get<std::string>();
    return Ok{};
  }
  Status u64(const json& o, const char* key, std::optional<std::uint64_t>& out) const {
    const json* v = get(o, key);
    if (!v) return Ok{};
    if (!v->is_number_unsigned()) return bad(key, "a non-negative integer");
    out = v->get<std::uint64_t>();
    return Ok{};
  }
  template <typename T>
  Status integer(const json& o, const char* key, T& out, std::int64_t lo, std::int64_t hi) const {
    const json* v = get(o, key);
    if (!v) return Ok{};
    if (!v->is_number_integer() || v->get<std::int64_t>() < lo || v->get<std::int64_t>() > hi)
      return bad(key, "an integer in range");
    out = static_cast<T>(v->get<std::int64_t>());
    return Ok{};
  }
  const json& obj() const { return obj_; }

 private:
  const json& obj_;
  const char* kind_;
};

}  // namespace

json encode(const GrantedRow& r) {
  json b;
  b["schema"] = 1;
  b["kind"] = lease::kindName(r.kind);
  b["name"] = r.declaration.name;
  b["owner_uid"] = r.owner;
  b["peer_pid"] = r.peerPid;
  b["pools"] = r.pools;
  b["priority"] = r.priority;
  json declared = {
      {"memory_max", nullptr}, {"gpu_memory_max", nullptr}, {"gpu_memory_high", nullptr}};
  declared.update(lease::declarationJson(r.declaration));
  declared["source"] = "declared";
  b["declared"] = std::move(declared);
  if (r.boundAction) {
    b["gpu_bound"] = {{"action", enforce::actionName(*r.boundAction)},
                      {"consecutive_samples", r.boundConsecutive},
                      {"enforced_by", r.kind == lease::LeaseKind::Attach ? "daemon" : "client"}};
  }
  b["requested_at_ns"] = r.requestedAtNs;
  if (!r.target.empty()) b["target"] = targetJson(r.target);
  if (!r.parent.empty()) b["parent"] = r.parent;
  if (r.reportsExit) b["reports_exit"] = true;
  if (r.keepWhenEmpty) b["keep_when_empty"] = true;
  if (r.placed) b["placed"] = true;
  if (r.shortfall) {
    json s = {{"pool", r.shortfall->pool}};
    for (auto [key, fig] :
         {std::pair{"host", &r.shortfall->host}, std::pair{"gpu", &r.shortfall->gpu}})
      if (*fig)
        s[key] = {{"needed_bytes", (*fig)->needed},
                  {"free_bytes", (*fig)->free},
                  {"short_bytes", (*fig)->bytes()}};
    b["shortfall"] = std::move(s);
  }
  return b;
}

json targetJson(const lease::AttachTarget& t) {
  if (!t.unit.empty()) return {{"unit", t.unit}};
  if (!t.cgroup.empty()) return {{"cgroup", t.cgroup}};
  if (t.pid && t.container) {
    const auto& c = *t.container;
    return {{"pid", *t.pid}, {"container", {{"engine", c.engine}, {"id", c.id}, {"name", c.name}}}};
  }
  if (t.pid) return {{"pid", *t.pid}};
  return nullptr;
}

Result<GrantedRow> decodeGranted(const json& body) {
  if (!body.is_object()) return Error{0, "the ledger's granted row is not a JSON object"};
  Fields f(body, kGranted);
  GrantedRow r;
  std::string kind = "run";
  if (auto s = f.str(body, "kind", kind); !s) return s.error();
  auto k = lease::parseKind(kind);
  if (!k) return f.bad("kind", "run or attach");
  r.kind = *k;
  r.declaration.name = kUnnamed;  // a row without a name (none was ever written so)
  if (auto s = f.str(body, "name", r.declaration.name); !s) return s.error();
  if (auto s = f.integer(body, "owner_uid", r.owner, 0, UINT32_MAX); !s) return s.error();
  if (auto s = f.integer(body, "peer_pid", r.peerPid, 0, INT32_MAX); !s) return s.error();
  if (const json* pools = f.get(body, "pools")) {
    if (!pools->is_array()) return f.bad("pools", "an array of names");
    for (const auto& p : *pools) {
      if (!p.is_string()) return f.bad("pools", "an array of names");
      r.pools.push_back(p.get<std::string>());
    }
  }
  if (auto s = f.integer(body, "priority", r.priority, -1000, 1000); !s) return s.error();
  const json* declared = f.get(body, "declared");
  if (declared && declared->is_object()) {
    // The RPC's decoder, so a row reads as the request it was made from.
    jsonfields::Fields d(*declared, "declared.");
    const std::string name = std::move(r.declaration.name);
    r.declaration.name.clear();
    if (auto s = lease::decodeDeclaration(d, r.declaration); !s)
      return Error{0, fmt::format("the ledger's {} row: {}", kGranted, s.error().message)};
    if (r.declaration.name.empty()) r.declaration.name = name;  // a row before "declared" had it
  }
  if (const json* gb = f.get(body, "gpu_bound")) {
    std::string action = "kill";
    if (auto s = f.str(*gb, "action", action); !s) return s.error();
    r.boundAction = enforce::parseAction(action);
    if (!r.boundAction) return f.bad("gpu_bound.action", enforce::actionChoices().c_str());
    if (auto s =
            f.integer(*gb, "consecutive_samples", r.boundConsecutive, 1, lease::kMaxOverSamples);
        !s)
      return s.error();
    // A row before "declared" had the bound's action and pace: what it enforced.
    auto has = [&](const char* key) { return declared && f.get(*declared, key); };
    if (!has("gpu_memory_action")) r.declaration.gpuAction = *r.boundAction;
    if (!has("gpu_over_samples")) r.declaration.gpuOverSamples = r.boundConsecutive;
  }
  std::optional<std::uint64_t> requested;
  if (auto s = f.u64(body, "requested_at_ns", requested); !s) return s.error();
  r.requestedAtNs = requested.value_or(0);
  if (auto s = f.str(body, "parent", r.parent); !s) return s.error();
  if (const json* reports = f.get(body, "reports_exit")) {
    if (!reports->is_boolean()) return f.bad("reports_exit", "true or false");
    r.reportsExit = reports->get<bool>();
  }
  if (const json* keep = f.get(body, "keep_when_empty")) {
    if (!keep->is_boolean()) return f.bad("keep_when_empty", "true or false");
    r.keepWhenEmpty = keep->get<bool>();
  }
  if (const json* placed = f.get(body, "placed")) {
    if (!placed->is_boolean()) return f.bad("placed", "true or false");
    r.placed = placed->get<bool>();
  }
  if (const json* s = f.get(body, "shortfall")) {
    if (!s->is_object()) return f.bad("shortfall", "an object");
    lease::Shortfall sf;
    if (auto st = f.str(*s, "pool", sf.pool); !st) return st.error();
    for (auto [key, fig] : {std::pair{"host", &sf.host}, std::pair{"gpu", &sf.gpu}}) {
      const json* o = f.get(*s, key);
      if (!o) continue;
      std::optional<std::uint64_t> needed, free;
      if (auto st = f.u64(*o, "needed_bytes", needed); !st) return st.error();
      if (auto st = f.u64(*o, "free_bytes", free); !st) return st.error();
      std::optional<std::uint64_t> shortBy;
      if (auto st = f.u64(*o, "short_bytes", shortBy); !st) return st.error();
      // As encode writes it: a shortfall is more needed than free, said twice alike.
      if (!needed || !free || *needed <= *free || shortBy != *needed - *free)
        return f.bad(
            "shortfall",
            "needed_bytes above free_bytes and short_bytes their difference, per resource");
      *fig = lease::Shortfall::Figure{*needed, *free};
    }
    if (sf.pool.empty() || !sf.any()) return f.bad("shortfall", "a pool and host or gpu");
    r.shortfall = std::move(sf);
  }
  if (const json* t = f.get(body, "target")) {
    if (auto s = f.str(*t, "unit", r.target.unit); !s) return s.error();
    if (auto s = f.str(*t, "cgroup", r.target.cgroup); !s) return s.error();
    std::optional<std::uint64_t> pid;
    if (auto s = f.u64(*t, "pid", pid); !s) return s.error();
    if (pid) r.target.pid = static_cast<pid_t>(*pid);
    if (const json* c = f.get(*t, "container")) {
      lease::Container ctr;
      if (auto s = f.str(*c, "engine", ctr.engine); !s) return s.error();
      if (auto s = f.str(*c, "id", ctr.id); !s) return s.error();
      if (auto s = f.str(*c, "name", ctr.name); !s) return s.error();
      r.target.container = std::move(ctr);
    }
  }
  return r;
}

json encode(const PlacedRow& r) {
  json b = {{"unit", r.unit},
            {"cgroup", r.cgroup},
            {"cgroup_inode", r.inode},
            {"counters_cgroup", r.countersCgroup.empty() ? r.cgroup : r.countersCgroup}};
  if (r.oomKillsAtAdoption || r.appliedMemoryMax)
    b["oom_kill_at_adoption"] = jsonview::orNull(r.oomKillsAtAdoption);
  if (r.appliedMemoryMax) {
    b["applied"] = {{"memory_max",
                     r.appliedMemoryMax->unlimited ? json("max") : json(r.appliedMemoryMax->bytes)},
                    {"source", "cgroup"}};
  }
  return b;
}

Result<PlacedRow> decodePlaced(const json& body) {
  if (!body.is_object()) return Error{0, "the ledger's started/adopted row is not a JSON object"};
  Fields f(body, "started/adopted");
  PlacedRow r;
  if (auto s = f.str(body, "unit", r.unit); !s) return s.error();
  if (auto s = f.str(body, "cgroup", r.cgroup); !s) return s.error();
  if (auto s = f.str(body, "counters_cgroup", r.countersCgroup); !s) return s.error();
  if (r.countersCgroup.empty()) r.countersCgroup = r.cgroup;
  std::optional<std::uint64_t> inode;
  if (auto s = f.u64(body, "cgroup_inode", inode); !s) return s.error();
  r.inode = inode.value_or(0);
  if (auto s = f.u64(body, "oom_kill_at_adoption", r.oomKillsAtAdoption); !s) return s.error();
  if (const json* a = f.get(body, "applied")) {
    if (const json* m = f.get(*a, "memory_max")) {
      if (m->is_string() && m->get<std::string>() == "max")
        r.appliedMemoryMax = probes::MemoryLimit{true, 0};
      else if (m->is_number_unsigned())
        r.appliedMemoryMax = probes::MemoryLimit{false, m->get<std::uint64_t>()};
      else
        return f.bad("applied.memory_max", "bytes or \"max\"");
    }
  }
  return r;
}

json encode(const ReleasedRow& r) { return {{"by_uid", r.byUid}, {"by_pid", r.byPid}}; }

json encode(const WithdrawnRow& r) { return {{"reason", r.reason}}; }

json encode(const BoundRow& r) {
  json b = enforce::boundEventJson(r.event);
  b["source"] = r.source;
  return b;
}

Result<BoundRow> decodeBound(const json& body) {
  if (!body.is_object()) return Error{0, "the ledger's gpu-bound row is not a JSON object"};
  Fields f(body, kGpuBound);
  BoundRow r;
  auto e = enforce::boundEventFromJson(body);
  if (!e) return Error{0, fmt::format("the ledger's {} row: {}", kGpuBound, e.error().message)};
  r.event = std::move(*e);
  if (auto s = f.str(body, "source", r.source); !s) return s.error();
  return r;
}

json encode(const CoverageRow& r) {
  json b = {{"kernel", r.kernel},
            {"coverage", r.coverage},
            {"basis", r.basis},
            {"verdict", r.verdict},
            {"static_signs", r.staticSigns},
            {"active_probe", r.activeProbe},
            {"keep_gpu_memory_max", r.keepGpuMemoryMax}};
  if (r.changedFrom)
    b["changed_from"] = {{"kernel", r.changedFrom->first}, {"coverage", r.changedFrom->second}};
  b["tally_does"] = r.tallyDoes;
  return b;
}

std::optional<CoverageRow> lastCoverage(Ledger& ledger) {
  auto rows = ledger.events(std::string());
  if (!rows) return std::nullopt;
  for (auto it = rows->rbegin(); it != rows->rend(); ++it) {
    if (it->kind != kCoverage) continue;
    auto body = json::parse(it->body, nullptr, false);
    if (!body.is_object()) return std::nullopt;
    CoverageRow r;
    Fields f(body, kCoverage);
    if (!f.str(body, "kernel", r.kernel) || !f.str(body, "coverage", r.coverage))
      return std::nullopt;
    if (const json* k = f.get(body, "keep_gpu_memory_max"); k && k->is_boolean())
      r.keepGpuMemoryMax = k->get<bool>();
    return r;
  }
  return std::nullopt;
}

// A lease's samples for a chart: at most kChartPoints, each the highest
// figures of its span of time (a spike is never averaged away).
json chartSamplesJson(Ledger& ledger, const std::string& id) {
  json out = json::array();
  auto points = ledger.chart(id, kChartPoints);
  if (!points) return out;
  for (const auto& p : *points) {
    out.push_back({{"at_ns", p.atNs},
                   {"memory_bytes", jsonview::orNull(p.memoryBytes)},
                   {"gpu_bytes", jsonview::orNull(p.gpuBytes)}});
  }
  return out;
}

json eventRowsJson(const std::vector<Event>& events) {
  json rows = json::array();
  for (const auto& e : events) {
    rows.push_back({{"seq", e.seq},
                    {"at_ns", e.atNs},
                    {"kind", e.kind},
                    {"body", json::parse(e.body, nullptr, false)},
                    {"hash", e.hash}});
  }
  return rows;
}

}  // namespace tally::ledger
