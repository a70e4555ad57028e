#include "views/event_line.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "enforce/gpu_bound.h"
#include "ledger/kinds.h"
#include "rpc/messages.h"
#include "util/json_view.h"
#include "util/text.h"
#include "views/ledger_view.h"

namespace tally::views {

using json = nlohmann::json;

namespace {

std::string field(const json& e, const char* key) { return jsonview::text(e, key); }

std::string timeOf(const json& e, bool utc) {
  auto ns = jsonview::count(jsonview::get(e, "at_ns"));
  if (!ns || *ns == 0) return "-";
  return fmt::format("{}.{:03}", wallTime(*ns, utc), *ns / 1000000u % 1000u);
}

}  // namespace

std::string eventKind(const json& event) {
  std::string ev = field(event, "event");
  if (ev == ledger::kCoverage) return ledger::kCoverage;
  return field(event, "kind");
}

const std::vector<std::string>& eventKinds() {
  // Each from its one definition: the queue's word, the ledger row kinds a
  // subscriber hears, the bound's recorded verdicts, the kernel's coverage.
  static const std::vector<std::string> kKinds = [] {
    std::vector<std::string> k{rpc::api::kQueuedKind, rpc::api::kQueueTimeoutKind,
                               rpc::api::kCancelledKind, rpc::api::kReloadRefusedKind};
    for (const char* row :
         {ledger::kGranted, ledger::kStarted, ledger::kAdopted, ledger::kReadopted,
          ledger::kReleased, ledger::kOutcome, ledger::kLost, ledger::kWithdrawn})
      k.emplace_back(row);
    for (auto v : enforce::kBoundEventKinds) k.emplace_back(enforce::verdictName(v));
    k.emplace_back(enforce::verdictName(enforce::Verdict::Refused));
    k.emplace_back(ledger::kCoverage);
    return k;
  }();
  return kKinds;
}

Status checkFilter(const EventFilter& f) {
  for (const auto& k : f.kinds) {
    if (std::find(eventKinds().begin(), eventKinds().end(), k) == eventKinds().end())
      return Error{EINVAL, fmt::format("--kind {}: not a kind of event; the kinds are {}",
                                       text::truncateUtf8(k, 64), fmt::join(eventKinds(), ", "))};
  }
  return Ok{};
}

bool matches(const EventFilter& f, const json& event) {
  if (!f.kinds.empty() &&
      std::find(f.kinds.begin(), f.kinds.end(), eventKind(event)) == f.kinds.end())
    return false;
  if (!f.leases.empty()) {
    std::string id = field(event, "lease"), name = field(event, "name");
    bool any = std::any_of(f.leases.begin(), f.leases.end(), [&](const std::string& l) {
      return !l.empty() && ((!id.empty() && id.rfind(l, 0) == 0) || l == name);
    });
    if (!any) return false;
  }
  if (!f.pools.empty()) {
    const json& pools = jsonview::get(event, "pools");
    bool any = false;
    for (std::size_t i = 0; pools.is_array() && i < pools.size() && !any; ++i) {
      any = pools[i].is_string() &&
            std::find(f.pools.begin(), f.pools.end(), pools[i].get<std::string>()) != f.pools.end();
    }
    if (!any) return false;
  }
  if (f.owner) {
    auto uid = jsonview::count(jsonview::get(event, "owner_uid"));
    if (!uid || *uid != *f.owner) return false;
  }
  return true;
}

std::string eventLine(const json& e, bool utc) {
  std::string what;
  std::string ev = field(e, "event");
  if (auto b = ev == "gpu-bound" ? rpc::api::decodeGpuBoundEvent(e)
                                 : Result<rpc::api::GpuBoundEvent>(Error{0, ""})) {
    what = fmt::format("{} lease {} ({}): {}", enforce::verdictName(b->event.kind), b->lease,
                       b->name, b->event.summary);
  } else if (auto l = ev == "lease" ? rpc::api::decodeLeaseEvent(e)
                                    : Result<rpc::api::LeaseEvent>(Error{0, ""})) {
    what = text::truncateUtf8(l->message, 1024);
  } else if (ev == "coverage") {
    what = fmt::format("coverage: {} on kernel {}: {}", field(e, "coverage"), field(e, "kernel"),
                       field(e, "tally_does"));
  } else {
    what = fmt::format("{}: {}", ev.empty() ? "?" : ev, text::truncateUtf8(e.dump(), 1024));
  }
  return fmt::format("{}  {}", timeOf(e, utc), what);
}

}  // namespace tally::views
