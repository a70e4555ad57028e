#include "rpc/messages.h"

#include "coverage/coverage_kind.h"
#include "ledger/kinds.h"
#include "rpc/lease_api.h"
#include "util/clean_text.h"
#include "util/json_fields.h"

namespace tally::rpc::api {

using jsonfields::Fields;

namespace {

Status isObject(const json& j, const char* what) {
  if (!j.is_object()) return Error{0, fmt::format("the daemon's {} is not a JSON object", what)};
  return Ok{};
}

// A required string field of a reply or event.
Status need(Fields& f, const char* key, std::string& out, std::size_t maxBytes = 4096) {
  auto v = f.required(key, maxBytes);
  if (!v) return v.error();
  out = std::move(*v);
  return Ok{};
}

Status strings(Fields& f, const char* key, std::vector<std::string>& out) {
  const json* v = f.get(key);
  if (!v) return Ok{};
  if (!v->is_array()) return f.bad(key, "must be an array of strings");
  for (const auto& s : *v) {
    if (!s.is_string()) return f.bad(key, "must be an array of strings");
    out.push_back(s.get<std::string>());
  }
  return Ok{};
}

}  // namespace

json encode(const HelloReply& r) {
  return {{"protocol", r.protocol},
          {"daemon_pid", r.daemonPid},
          {"uid", r.uid},
          {"state_dir", r.stateDir}};
}

Result<HelloReply> decodeHelloReply(const json& result) {
  if (auto s = isObject(result, "hello reply"); !s) return s.error();
  Fields f(result);
  HelloReply r;
  auto protocol = f.i64("protocol", 0, 1 << 20);
  if (!protocol) return protocol.error();
  if (!*protocol) return f.bad("protocol", "is required");
  r.protocol = static_cast<int>(**protocol);
  auto pid = f.i64("daemon_pid", 0, 1 << 30);
  if (!pid) return pid.error();
  r.daemonPid = pid->value_or(0);
  auto uid = f.u64("uid", UINT32_MAX);
  if (!uid) return uid.error();
  r.uid = static_cast<std::uint32_t>(uid->value_or(0));
  auto dir = f.str("state_dir", 4096);
  if (!dir) return dir.error();
  r.stateDir = dir->value_or("");
  return r;
}

enforce::KernelState LeaseReply::kernelState() const {
  return {coverage == tally::coverage::coverageName(tally::coverage::Coverage::HostAndGtt),
          !gpuBoundAdvisory, false};
}

json encode(const LeaseReply& r) {
  json j = r.view;
  j["lease"] = r.lease;
  j["name"] = r.name;
  j["kind"] = r.kind;
  j["state"] = r.state;
  j["pools"] = r.pools;
  if (r.unit) j["unit"] = *r.unit;
  if (r.cgroup) j["cgroup"] = *r.cgroup;
  if (r.memoryMaxEffective) j["memory_max_effective"] = *r.memoryMaxEffective;
  j["coverage"] = r.coverage;
  if (r.view.contains("gpu_bound")) j["gpu_bound"]["advisory"] = r.gpuBoundAdvisory;
  if (r.declaredMemoryMax) j["declared"]["memory_max"] = *r.declaredMemoryMax;
  if (r.declaredGpuMemoryMax) j["declared"]["gpu_memory_max"] = *r.declaredGpuMemoryMax;
  return j;
}

Result<LeaseReply> decodeLeaseReply(const json& result) {
  if (auto s = isObject(result, "lease reply"); !s) return s.error();
  Fields f(result);
  LeaseReply r;
  for (auto [key, out] : {std::pair{"lease", &r.lease}, std::pair{"state", &r.state}})
    if (auto s = need(f, key, *out); !s) return s.error();
  for (auto [key, out] : {std::pair{"name", &r.name}, std::pair{"kind", &r.kind},
                          std::pair{"coverage", &r.coverage}}) {
    auto v = f.str(key, 4096);
    if (!v) return v.error();
    *out = v->value_or("");
  }
  if (auto s = strings(f, "pools", r.pools); !s) return s.error();
  for (auto [key, out] : {std::pair{"unit", &r.unit}, std::pair{"cgroup", &r.cgroup}}) {
    auto v = f.str(key, 4096);
    if (!v) return v.error();
    *out = *v;
  }
  auto effective = f.u64("memory_max_effective");
  if (!effective) return effective.error();
  r.memoryMaxEffective = *effective;
  if (const json* bound = f.get("gpu_bound")) {
    if (!bound->is_object()) return f.bad("gpu_bound", "must be an object");
    Fields b(*bound, "gpu_bound.");
    auto advisory = b.boolean("advisory");
    if (!advisory) return advisory.error();
    r.gpuBoundAdvisory = *advisory;
  }
  if (const json* declared = f.get("declared")) {
    if (!declared->is_object()) return f.bad("declared", "must be an object");
    Fields d(*declared, "declared.");
    for (auto [key, out] : {std::pair{"memory_max", &r.declaredMemoryMax},
                            std::pair{"gpu_memory_max", &r.declaredGpuMemoryMax}}) {
      auto v = d.u64(key);
      if (!v) return v.error();
      *out = *v;
    }
  }
  r.view = result;
  return r;
}

json encode(const ReleaseReply& r) { return {{"lease", r.lease}, {"state", r.state}}; }

Result<ReleaseReply> decodeReleaseReply(const json& result) {
  if (auto s = isObject(result, "release reply"); !s) return s.error();
  Fields f(result);
  ReleaseReply r;
  for (auto [key, out] : {std::pair{"lease", &r.lease}, std::pair{"state", &r.state}})
    if (auto s = need(f, key, *out); !s) return s.error();
  return r;
}

json encode(const ReloadReply& r) { return {{"changes", r.changes}}; }

Result<ReloadReply> decodeReloadReply(const json& result) {
  if (auto s = isObject(result, "reload reply"); !s) return s.error();
  auto it = result.find("changes");
  if (it == result.end() || !it->is_array() || it->size() > kMaxReloadChanges)
    return Error{
        0, fmt::format("\"changes\" must be an array of at most {} lines", kMaxReloadChanges)};
  ReloadReply r;
  for (const auto& line : *it) {
    if (!line.is_string() || line.get_ref<const std::string&>().size() > kMaxReloadLineBytes)
      return Error{
          0, fmt::format("\"changes\" must hold lines of at most {} bytes", kMaxReloadLineBytes)};
    r.changes.push_back(text::printable(line.get_ref<const std::string&>()));
  }
  return r;
}

Result<bpf::LeaseCharge> decodeKernelCharge(const json& charge, const std::string& name) {
  if (!charge.is_object()) return Error{0, fmt::format("\"{}\" must be an object", name)};
  Fields c(charge, name + ".");
  bpf::LeaseCharge k;
  for (auto [key, out] :
       {std::pair{"bytes", &k.bytes}, std::pair{"peak_bytes", &k.peakBytes},
        std::pair{"objects", &k.objects}, std::pair{"allocations_refused", &k.refused},
        std::pair{"refused_bytes", &k.refusedBytes}}) {
    auto v = c.u64(key);
    if (!v) return v.error();
    if (!*v) return c.bad(key, "is required");
    *out = **v;
  }
  return k;
}

json encode(const CompleteReply& r) {
  json j = {{"lease", r.lease}, {"seq", r.seq}, {"hash", r.hash}};
  if (const auto& k = r.kernelCharge) {
    j["kernel_charge"] = {{"bytes", k->bytes},
                          {"peak_bytes", k->peakBytes},
                          {"objects", k->objects},
                          {"allocations_refused", k->refused},
                          {"refused_bytes", k->refusedBytes}};
  }
  return j;
}

Result<CompleteReply> decodeCompleteReply(const json& result) {
  if (auto s = isObject(result, "complete reply"); !s) return s.error();
  Fields f(result);
  CompleteReply r;
  for (auto [key, out] : {std::pair{"lease", &r.lease}, std::pair{"hash", &r.hash}})
    if (auto s = need(f, key, *out); !s) return s.error();
  auto seq = f.i64("seq", 1, INT64_MAX);
  if (!seq) return seq.error();
  if (!*seq) return f.bad("seq", "is required");
  r.seq = **seq;
  if (const json* charge = f.get("kernel_charge")) {
    auto k = decodeKernelCharge(*charge, "kernel_charge");
    if (!k) return k.error();
    r.kernelCharge = *k;
  }
  return r;
}

json encode(const BoundReply& r) { return {{"recorded", r.recorded}}; }

Result<BoundReply> decodeBoundReply(const json& result) {
  if (auto s = isObject(result, "bound reply"); !s) return s.error();
  Fields f(result);
  auto recorded = f.boolean("recorded");
  if (!recorded) return recorded.error();
  return BoundReply{*recorded};
}

json encode(const SubscribeReply& r) {
  return {{"subscribed", r.events}, {"replaying", r.replaying}};
}

Result<SubscribeReply> decodeSubscribeReply(const json& result) {
  if (auto s = isObject(result, "subscribe reply"); !s) return s.error();
  Fields f(result);
  SubscribeReply r;
  if (auto s = strings(f, "subscribed", r.events); !s) return s.error();
  auto replaying = f.boolean("replaying");
  if (!replaying) return replaying.error();
  r.replaying = *replaying;
  return r;
}

json encode(const MetricsReply& r) { return {{"text", r.text}}; }

Result<MetricsReply> decodeMetricsReply(const json& result) {
  if (auto s = isObject(result, "metrics reply"); !s) return s.error();
  Fields f(result);
  auto text = f.str("text", std::size_t{64} << 20);
  if (!text) return text.error();
  if (!*text) return f.bad("text", "is required (is the daemon an older tally?)");
  return MetricsReply{std::move(**text)};
}

Result<json> decodeDocument(const json& result, const char* key) {
  if (auto s = isObject(result, "reply"); !s) return s.error();
  if (!result.contains(key))
    return Error{0, fmt::format("the daemon's reply has no \"{}\" (is it an older tally?)", key)};
  return result;
}

json encode(const Queued& q) {
  json ev = {{"lease", q.lease},
             {"position", q.position},
             {"queued", q.queued},
             {"waiting_for", q.waitingFor}};
  if (!q.pool.empty()) ev["pool"] = q.pool;
  if (q.needed) ev["needed"] = *q.needed;
  if (q.free) ev["free"] = *q.free;
  if (q.needed || q.free) ev["unit"] = q.unit;
  if (!q.detail.empty()) ev["detail"] = q.detail;
  return ev;
}

Queued decodeQueued(const json& event) {
  Queued q;
  if (!event.is_object()) return q;
  auto text = [&](const char* key, std::size_t max) {
    auto it = event.find(key);
    return it != event.end() && it->is_string()
               ? text::truncateUtf8(it->get_ref<const std::string&>(), max)
               : std::string();
  };
  auto count = [&](const char* key) -> std::optional<std::uint64_t> {
    auto it = event.find(key);
    if (it != event.end() && it->is_number_unsigned()) return it->get<std::uint64_t>();
    return std::nullopt;
  };
  q.lease = text("lease", kMaxLeaseId);
  q.position = count("position").value_or(0);
  q.queued = count("queued").value_or(0);
  q.waitingFor = text("waiting_for", 64);
  q.pool = text("pool", 64);
  q.detail = text("detail", 512);
  q.needed = count("needed");
  q.free = count("free");
  q.unit = text("unit", 16);
  return q;
}

std::string waitWords(const Queued& q) {
  if (!q.detail.empty()) return q.detail;
  return fmt::format("waiting for {}", q.waitingFor.empty() ? "?" : q.waitingFor);
}

std::string describe(const Queued& q) {
  std::string where = q.position ? fmt::format("position {} of {}", q.position, q.queued)
                                 : std::string("position unknown");
  if (!q.detail.empty()) return fmt::format("{}: {}", where, q.detail);
  return fmt::format("{} (waiting for {})", where, q.waitingFor.empty() ? "?" : q.waitingFor);
}

bool LeaseEvent::terminal() const { return ledger::isTerminal(kind); }

json encode(const LeaseEvent& e) {
  json j = {{"kind", e.kind},
            {"lease", e.lease},
            {"name", e.name},
            {"pools", e.pools},
            {"message", e.message}};
  if (e.outcome) j["outcome"] = *e.outcome;
  if (e.owner) j["owner_uid"] = *e.owner;
  return j;
}

Result<LeaseEvent> decodeLeaseEvent(const json& event) {
  if (auto s = isObject(event, "lease event"); !s) return s.error();
  Fields f(event);
  LeaseEvent e;
  for (auto [key, out] : {std::pair{"lease", &e.lease}, std::pair{"kind", &e.kind}})
    if (auto s = need(f, key, *out); !s) return s.error();
  for (auto [key, out] : {std::pair{"name", &e.name}, std::pair{"message", &e.message}}) {
    auto v = f.str(key, 64 * 1024);
    if (!v) return v.error();
    *out = v->value_or("");
  }
  if (auto s = strings(f, "pools", e.pools); !s) return s.error();
  auto outcome = f.str("outcome", 64);
  if (!outcome) return outcome.error();
  e.outcome = *outcome;
  auto owner = f.u64("owner_uid", UINT32_MAX);
  if (!owner) return owner.error();
  if (*owner) e.owner = static_cast<std::uint32_t>(**owner);
  return e;
}

json encode(const GpuBoundEvent& e) {
  json j = enforce::boundEventJson(e.event);
  j["source"] = e.source;
  j["lease"] = e.lease;
  j["name"] = e.name;
  if (e.owner) j["owner_uid"] = *e.owner;
  return j;
}

Result<GpuBoundEvent> decodeGpuBoundEvent(const json& event) {
  if (auto s = isObject(event, "gpu-bound event"); !s) return s.error();
  auto bound = enforce::boundEventFromJson(event);
  if (!bound) return bound.error();
  GpuBoundEvent e;
  e.event = std::move(*bound);
  Fields f(event);
  if (auto s = need(f, "lease", e.lease); !s) return s.error();
  for (auto [key, out] : {std::pair{"name", &e.name}, std::pair{"source", &e.source}}) {
    auto v = f.str(key, 4096);
    if (!v) return v.error();
    *out = v->value_or("");
  }
  auto owner = f.u64("owner_uid", UINT32_MAX);
  if (!owner) return owner.error();
  if (*owner) e.owner = static_cast<std::uint32_t>(**owner);
  return e;
}

json encode(const ReplayedEvent& e) {
  json j{{"rows", e.rows}, {"truncated", e.truncated}};
  if (e.error) j["error"] = *e.error;
  return j;
}

Result<ReplayedEvent> decodeReplayedEvent(const json& event) {
  if (auto s = isObject(event, "replayed event"); !s) return s.error();
  Fields f(event);
  ReplayedEvent e;
  auto rows = f.u64("rows", kMaxReplayed);
  if (!rows) return rows.error();
  e.rows = rows->value_or(0);
  auto truncated = f.boolean("truncated");
  if (!truncated) return truncated.error();
  e.truncated = *truncated;
  auto error = f.str("error", 4096);
  if (!error) return error.error();
  e.error = *error;
  return e;
}

}  // namespace tally::rpc::api
