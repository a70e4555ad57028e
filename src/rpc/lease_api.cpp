#include "rpc/lease_api.h"

#include <fmt/format.h>

#include <set>

#include "attribution/container.h"
#include "attribution/container_inspect.h"
#include "cgroup/path.h"
#include "lease/outcome.h"
#include "lease/pool_name.h"
#include "util/clean_text.h"
#include "util/json_fields.h"
#include "util/text.h"

namespace tally::rpc::api {

using jsonfields::Fields;

namespace {

constexpr std::pair<Method, const char*> kMethods[] = {
    {Method::Hello, "hello"},         {Method::Acquire, "acquire"},
    {Method::Attach, "attach"},       {Method::Started, "started"},
    {Method::Complete, "complete"},   {Method::Resume, "resume"},
    {Method::Release, "release"},     {Method::Cancel, "cancel"},
    {Method::Leases, "leases"},       {Method::Lease, "lease"},
    {Method::Pools, "pools"},         {Method::Bound, "bound"},
    {Method::Subscribe, "subscribe"}, {Method::Seats, "seats"},
    {Method::Overview, "overview"},   {Method::Metrics, "metrics"},
    {Method::Exited, "exited"},       {Method::Reload, "reload"},
};

Status paramsObject(const json& params) {
  if (!params.is_object()) return Error{0, "\"params\" must be an object"};
  return Ok{};
}

Result<std::string> leaseIdField(Fields& f, const char* key) {
  auto id = f.required(key, kMaxLeaseId);
  if (!id) return id.error();
  if (!lease::validLeaseId(*id)) return f.bad(key, "must be a lease id ([A-Za-z0-9_-])");
  return std::move(*id);
}

Result<std::string> leaseId(Fields& f) { return leaseIdField(f, "lease"); }

Result<std::string> cgroupField(Fields& f, const char* key, bool required) {
  auto s = f.str(key, cgroup::kMaxPathBytes);
  if (!s) return s.error();
  if (!*s || (*s)->empty()) {
    if (required) return f.bad(key, "is required");
    return std::string();
  }
  auto c = cgroup::canonicalPath(**s);
  if (!c) return f.bad(key, c.error().message);
  return std::move(*c);
}

// `child`: the lease is a child of another (attach "parent"), which holds no
// pool of its own: its parent's pools count it already.
Status decodeDeclared(Fields& f, Declared& d, bool child = false) {
  const json* pools = f.get("pools");
  if (child) {
    if (pools && !(pools->is_array() && pools->empty()))
      return f.bad("pools",
                   "names pools for a child lease; a child holds none (its parent's pools count "
                   "it): leave \"pools\" out");
  } else if (!pools || !pools->is_array())
    return f.bad("pools", "must be an array of pool names (at least one)");
  if (!child && pools->empty()) return f.bad("pools", "must name at least one pool");
  if (!child && pools->size() > kMaxPools)
    return f.bad("pools", fmt::format("names {} pools; at most {}", pools->size(), kMaxPools));
  for (std::size_t i = 0; !child && i < pools->size(); ++i) {
    const json& p = (*pools)[i];
    if (!p.is_string() || !lease::validPoolName(p.get_ref<const std::string&>())) {
      return Error{0, fmt::format("\"pools\"[{}] must be a pool name, 1-{} of [A-Za-z0-9_-]", i,
                                  lease::kMaxPoolName)};
    }
    d.pools.push_back(p.get<std::string>());
  }
  if (auto s = lease::decodeDeclaration(f, d.declaration); !s) return s.error();
  auto timeout = f.u64("timeout_us", kMaxTimeoutUs);
  if (!timeout) return timeout.error();
  d.timeoutUs = *timeout;
  auto priority = f.i64("priority", kMinPriority, kMaxPriority);
  if (!priority) return priority.error();
  d.priority = static_cast<int>(priority->value_or(0));
  auto noWait = f.boolean("no_wait");
  if (!noWait) return noWait.error();
  d.noWait = *noWait;
  auto placed = f.boolean("placed");
  if (!placed) return placed.error();
  d.placed = *placed;
  if (d.placed && !d.noWait)
    return f.bad("placed",
                 "needs \"no_wait\": true with it: a placed lease is granted now or refused, "
                 "never queued");
  return Ok{};
}

json encodeDeclared(const Declared& d) {
  json p = lease::declarationJson(d.declaration);
  p["priority"] = d.priority;
  if (!d.pools.empty()) p["pools"] = d.pools;
  if (d.timeoutUs) p["timeout_us"] = *d.timeoutUs;
  if (d.noWait) p["no_wait"] = true;
  if (d.placed) p["placed"] = true;
  return p;
}

Status checkRecord(const json& r, const std::string& lease) {
  if (!r.is_object()) return Error{0, "\"record\" must be the lease's outcome record (an object)"};
  std::size_t bytes = r.dump(-1, ' ', false, json::error_handler_t::replace).size();
  if (bytes > kMaxRecordBytes)
    return Error{0, fmt::format("\"record\" is {} bytes; at most {}", bytes, kMaxRecordBytes)};
  auto field = [](const json& o, const char* k) -> const json* {
    auto it = o.find(k);
    return it == o.end() ? nullptr : &*it;
  };
  const json* l = field(r, "lease");
  if (!l || !l->is_object()) return Error{0, "\"record.lease\" must be an object"};
  const json* id = field(*l, "id");
  if (!id || !id->is_string()) return Error{0, "\"record.lease.id\" must be a string"};
  if (id->get_ref<const std::string&>() != lease)
    return Error{0, fmt::format("\"record.lease.id\" is not lease {}", lease)};
  for (const char* k : {"name", "manager", "unit", "slice", "cgroup"}) {
    if (const json* v = field(*l, k); v && !v->is_string())
      return Error{0, fmt::format("\"record.lease.{}\" must be a string", k)};
  }
  const json* o = field(r, "outcome");
  if (!o || !o->is_object()) return Error{0, "\"record.outcome\" must be an object"};
  const json* cls = field(*o, "class");
  if (!cls || !cls->is_string() || !lease::parseOutcomeClass(cls->get_ref<const std::string&>())) {
    return Error{0,
                 "\"record.outcome.class\" must be an outcome class (exited, killed-by-signal, "
                 "oom-killed, ...)"};
  }
  if (const json* s = field(*o, "summary"); s && !s->is_string())
    return Error{0, "\"record.outcome.summary\" must be a string"};
  for (const char* k : {"exit_code", "signal", "tally_exit_status"}) {
    const json* v = field(*o, k);
    if (v &&
        (!v->is_number_integer() || v->get<std::int64_t>() < -1 || v->get<std::int64_t>() > 255)) {
      return Error{0, fmt::format("\"record.outcome.{}\" must be an integer in -1..255", k)};
    }
  }
  if (const json* v = field(*o, "oom_kill"); v && !v->is_number_unsigned())
    return Error{0, "\"record.outcome.oom_kill\" must be a count"};
  for (const char* k : {"started_at_ns", "ended_at_ns", "duration_us"}) {
    if (const json* v = field(r, k); v && !v->is_number_unsigned())
      return Error{0, fmt::format("\"record.{}\" must be a non-negative integer", k)};
  }
  for (const char* k : {"declared", "applied", "memory", "gpu"}) {
    if (const json* v = field(r, k); v && !v->is_object())
      return Error{0, fmt::format("\"record.{}\" must be an object", k)};
  }
  if (const json* w = field(r, "warnings"); w && !w->is_array())
    return Error{0, "\"record.warnings\" must be an array"};
  if (field(r, "daemon"))
    return Error{0, "\"record.daemon\" is the daemon's own part; a client does not send it"};
  return Ok{};
}

}  // namespace

std::optional<Method> parseMethod(std::string_view name) {
  for (const auto& [m, n] : kMethods) {
    if (name == n) return m;
  }
  return std::nullopt;
}

const char* methodName(Method m) {
  for (const auto& [k, n] : kMethods) {
    if (k == m) return n;
  }
  return "?";
}

std::string methodList() {
  std::string out;
  for (const auto& [m, n] : kMethods) out += fmt::format("{}{}", out.empty() ? "" : ", ", n);
  return out;
}

json encode(const Acquire& a) { return encodeDeclared(a.declared); }

json encode(const Attach& a) {
  json p = encodeDeclared(a.declared);
  if (!a.target.unit.empty())
    p["unit"] = a.target.unit;
  else if (!a.target.cgroup.empty())
    p["cgroup"] = a.target.cgroup;
  else if (a.target.pid)
    p["pid"] = *a.target.pid;
  if (a.target.container) {
    const auto& c = *a.target.container;
    p["container"] = {{"engine", c.engine}, {"id", c.id}, {"name", c.name}};
  }
  if (a.force) p["force"] = true;
  if (a.reportsExit) p["reports_exit"] = true;
  if (!a.parent.empty()) p["parent"] = a.parent;
  if (a.join) p["join"] = true;
  if (a.keepWhenEmpty) p["keep_when_empty"] = true;
  return p;
}

json encode(const Started& s) {
  json p = {{"lease", s.lease}, {"cgroup", s.cgroup}};
  if (!s.unit.empty()) p["unit"] = s.unit;
  if (!s.countersCgroup.empty()) p["counters_cgroup"] = s.countersCgroup;
  return p;
}

json encode(const Complete& c) { return {{"lease", c.lease}, {"record", c.record}}; }

json encode(const Bound& b) {
  json e = {{"kind", enforce::verdictName(b.event.kind)},
            {"bytes", b.event.bytes},
            {"limit", b.event.limit},
            {"summary", text::truncateUtf8(text::printable(b.event.summary), kMaxSummary)}};
  if (b.event.samples) e["samples"] = b.event.samples;
  if (b.event.firstOverNs) e["first_over_ns"] = b.event.firstOverNs;
  if (b.event.atNs) e["at_ns"] = b.event.atNs;
  return {{"lease", b.lease}, {"event", e}};
}

json encode(const LeaseRef& r) {
  json j = {{"lease", r.lease}};
  if (r.containmentRefused) j["containment_refused"] = *r.containmentRefused;
  return j;
}
json encode(const LeaseQuery& q) {
  json p = {{"lease", q.lease}};
  if (q.live) p["live"] = true;  // absent: what a daemon before the field reads
  return p;
}

json encode(const Exited& e) {
  json j = {{"lease", e.lease}};
  if (e.exitCode) j["exit_code"] = *e.exitCode;
  if (e.signal) j["signal"] = *e.signal;
  return j;
}

json encode(const ListPage& p) {
  json j = json::object();
  if (p.after) j["after"] = *p.after;
  if (p.limit) j["limit"] = *p.limit;
  return j;
}

json encode(const Subscribe& s) {
  json j = json::object();
  if (s.sinceNs) j["since_ns"] = *s.sinceNs;
  if (s.afterSeq) j["after_seq"] = *s.afterSeq;
  return j;
}

Result<Acquire> decodeAcquire(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  Acquire a;
  if (auto s = decodeDeclared(f, a.declared); !s) return s.error();
  if (auto s = f.unknown(); !s) return s.error();
  return a;
}

Result<Attach> decodeAttach(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  Attach a;
  if (f.get("parent")) {
    auto parent = leaseIdField(f, "parent");
    if (!parent) return parent.error();
    a.parent = std::move(*parent);
  }
  if (auto s = decodeDeclared(f, a.declared, !a.parent.empty()); !s) return s.error();
  auto unit = f.str("unit", kMaxUnitName);
  if (!unit) return unit.error();
  auto cg = cgroupField(f, "cgroup", false);
  if (!cg) return cg.error();
  auto pid = f.u64("pid", kMaxPid);
  if (!pid) return pid.error();
  int targets = (*unit && !(*unit)->empty() ? 1 : 0) + (cg->empty() ? 0 : 1) + (*pid ? 1 : 0);
  if (targets != 1) return Error{0, "attach needs exactly one of \"unit\", \"cgroup\", \"pid\""};
  if (*unit) {
    const std::string& u = **unit;
    if (u.find('/') != std::string::npos || text::cleanTextProblem(u))
      return f.bad("unit",
                   "must be a unit name (no '/', clean text: UTF-8 without control or "
                   "bidi characters)");
    a.target.unit = u;
  }
  a.target.cgroup = std::move(*cg);
  if (*pid) {
    if (**pid == 0) return f.bad("pid", "must be a process id (1..4194304)");
    a.target.pid = static_cast<pid_t>(**pid);
  }
  if (const json* c = f.get("container")) {
    if (!a.target.pid) return f.bad("container", "names a container by its \"pid\": give both");
    if (!c->is_object()) return f.bad("container", "must be {\"engine\", \"id\", \"name\"}");
    Fields cf(*c, "container.");
    lease::Container ctr;
    auto engine = cf.required("engine", 16);
    if (!engine) return engine.error();
    if (*engine != "podman" && *engine != "docker")
      return cf.bad("engine", "must be podman or docker");
    ctr.engine = *engine;
    auto id = cf.required("id", 64);
    if (!id) return id.error();
    if (!attribution::isContainerId(*id)) return cf.bad("id", "must be the container's 64-hex id");
    ctr.id = *id;
    auto name = cf.required("name", 253);
    if (!name) return name.error();
    if (!attribution::validContainerName(*name))
      return cf.bad("name", "must be a container name ([A-Za-z0-9][A-Za-z0-9_.-]*)");
    ctr.name = *name;
    if (auto s = cf.unknown(); !s) return s.error();
    a.target.container = std::move(ctr);
  }
  auto force = f.boolean("force");
  if (!force) return force.error();
  a.force = *force;
  auto reports = f.boolean("reports_exit");
  if (!reports) return reports.error();
  a.reportsExit = *reports;
  auto join = f.boolean("join");
  if (!join) return join.error();
  a.join = *join;
  if (a.join && a.target.cgroup.empty())
    return f.bad("join", "joins the lease of a \"cgroup\": name the cgroup");
  auto keep = f.boolean("keep_when_empty");
  if (!keep) return keep.error();
  a.keepWhenEmpty = *keep;
  if (a.keepWhenEmpty && (a.parent.empty() || a.target.cgroup.empty() || a.target.pid))
    return f.bad("keep_when_empty",
                 "keeps an empty child lease: give \"parent\" and its \"cgroup\"");
  if (auto s = f.unknown(); !s) return s.error();
  return a;
}

Result<Started> decodeStarted(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  Started st;
  auto id = leaseId(f);
  if (!id) return id.error();
  st.lease = std::move(*id);
  auto unit = f.str("unit", kMaxUnitName);
  if (!unit) return unit.error();
  st.unit = unit->value_or("");
  auto cg = cgroupField(f, "cgroup", true);
  if (!cg) return cg.error();
  st.cgroup = std::move(*cg);
  auto counters = cgroupField(f, "counters_cgroup", false);
  if (!counters) return counters.error();
  st.countersCgroup = std::move(*counters);
  if (auto s = f.unknown(); !s) return s.error();
  return st;
}

Result<Complete> decodeComplete(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  Complete c;
  auto id = leaseId(f);
  if (!id) return id.error();
  c.lease = std::move(*id);
  const json* record = f.get("record");
  if (!record) return f.bad("record", "is required (the lease's outcome record)");
  if (auto s = checkRecord(*record, c.lease); !s) return s.error();
  c.record = *record;
  // The summary is shown in listings, terminals and the journal: clean text
  // or refused (the client makes its own printable), then cut to 1 KiB.
  auto& o = c.record["outcome"];
  if (o.contains("summary")) {
    const auto& text = o["summary"].get_ref<const std::string&>();
    if (auto why = text::cleanTextProblem(text))
      return Error{0, fmt::format("\"record.outcome.summary\" {}", *why)};
    o["summary"] = text::truncateUtf8(text, 1024);
  }
  if (auto s = f.unknown(); !s) return s.error();
  return c;
}

Result<Bound> decodeBound(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  Bound b;
  auto id = leaseId(f);
  if (!id) return id.error();
  b.lease = std::move(*id);
  const json* ev = f.get("event");
  if (!ev || !ev->is_object())
    return f.bad("event", "must be an object (kind, bytes, limit, summary)");
  Fields e(*ev, "event.");
  auto kind = e.required("kind", 64);
  if (!kind) return kind.error();
  std::vector<std::string> names;
  for (auto v : enforce::kBoundEventKinds) {
    // A client's failed kill is not taken: the daemon says its own, and a
    // user's report must not raise the operators' alert (TallyGpuKillFailed).
    if (v == enforce::Verdict::KillFailed) continue;
    names.emplace_back(enforce::verdictName(v));
    if (*kind == enforce::verdictName(v)) b.event.kind = v;
  }
  if (b.event.kind == enforce::Verdict::None)
    return e.bad("kind", fmt::format("must be one of {}", fmt::join(names, ", ")));
  auto bytes = e.u64("bytes");
  if (!bytes) return bytes.error();
  if (!*bytes) return e.bad("bytes", "is required");
  auto limit = e.u64("limit");
  if (!limit) return limit.error();
  if (!*limit) return e.bad("limit", "is required");
  b.event.bytes = **bytes;
  b.event.limit = **limit;
  auto summary = e.str("summary", kMaxRecordBytes);
  if (!summary) return summary.error();
  if (!*summary) return e.bad("summary", "is required");
  if (auto why = text::cleanTextProblem(**summary)) return e.bad("summary", *why);
  b.event.summary = text::truncateUtf8(**summary, kMaxSummary);
  auto samples = e.u64("samples", 1'000'000);
  if (!samples) return samples.error();
  b.event.samples = static_cast<unsigned>(samples->value_or(0));
  auto firstOver = e.u64("first_over_ns");
  if (!firstOver) return firstOver.error();
  b.event.firstOverNs = firstOver->value_or(0);
  auto at = e.u64("at_ns");  // the client's clock: read, not used
  if (!at) return at.error();
  if (auto s = e.unknown(); !s) return s.error();
  if (auto s = f.unknown(); !s) return s.error();
  return b;
}

Result<Exited> decodeExited(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  Exited e;
  auto id = leaseId(f);
  if (!id) return id.error();
  e.lease = std::move(*id);
  auto code = f.u64("exit_code", 255);
  if (!code) return code.error();
  auto sig = f.u64("signal", 64);
  if (!sig) return sig.error();
  if (code->has_value() == sig->has_value())
    return f.bad("exit_code", "exactly one of exit_code (0..255) and signal (1..64) is required");
  if (*sig && **sig == 0) return f.bad("signal", "must be 1..64");
  if (*code) e.exitCode = static_cast<int>(**code);
  if (*sig) e.signal = static_cast<int>(**sig);
  if (auto s = f.unknown(); !s) return s.error();
  return e;
}

Result<LeaseRef> decodeLeaseRef(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  auto id = leaseId(f);
  if (!id) return id.error();
  auto refused = f.str("containment_refused", 4096);
  if (!refused) return refused.error();
  if (auto s = f.unknown(); !s) return s.error();
  return LeaseRef{std::move(*id), std::move(*refused)};
}

Result<LeaseQuery> decodeLeaseQuery(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  auto id = leaseId(f);
  if (!id) return id.error();
  auto live = f.boolean("live");
  if (!live) return live.error();
  if (auto s = f.unknown(); !s) return s.error();
  return LeaseQuery{std::move(*id), *live};
}

Result<Subscribe> decodeSubscribe(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  Subscribe sub;
  auto since = f.u64("since_ns");
  if (!since) return since.error();
  sub.sinceNs = *since;
  auto after = f.u64("after_seq", INT64_MAX);
  if (!after) return after.error();
  if (*after) sub.afterSeq = static_cast<std::int64_t>(**after);
  if (auto s = f.unknown(); !s) return s.error();
  return sub;
}

Result<ListPage> decodeListPage(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  Fields f(params);
  ListPage p;
  if (f.get("after")) {
    auto after = leaseIdField(f, "after");
    if (!after) return after.error();
    p.after = std::move(*after);
  }
  auto limit = f.u64("limit", kMaxPageLeases);
  if (!limit) return limit.error();
  if (*limit && **limit == 0) return f.bad("limit", "must be at least 1");
  p.limit = *limit;
  if (auto s = f.unknown(); !s) return s.error();
  return p;
}

Status decodeEmpty(const json& params) {
  if (auto s = paramsObject(params); !s) return s.error();
  return Fields(params).unknown();
}

}  // namespace tally::rpc::api
