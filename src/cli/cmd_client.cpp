#include "cli/cmd_client.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "cli/container_engine.h"
#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "cli/option_values.h"
#include "cli/print_line.h"
#include "cli/socket_path.h"
#include "lease/attributes.h"
#include "lease/spec.h"
#include "ledger/ledger.h"
#include "ledger/rows.h"
#include "report/gpu_report.h"
#include "rpc/client.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"
#include "util/clock.h"
#include "util/json_view.h"
#include "util/text.h"
#include "util/units.h"
#include "views/daemon_status.h"
#include "views/timeline.h"
#include "views/top.h"

namespace tally::cli {
namespace {

using json = nlohmann::json;

using jsonview::bytesOrDash;

// How long a queued attach waits for a restarted daemon to come back.
constexpr std::uint64_t kAttachReconnectUs = 60'000'000;

void printLeases(const json& leases) {
  fmt::print("{:<12}  {:<16}  {:<7}  {:<8}  {:<14}  {:>10}  {:>10}  {:>10}  {:>10}  {}\n", "LEASE",
             "NAME", "KIND", "STATE", "POOLS", "MEM-MAX", "MEM-NOW", "GPU-MAX", "GPU-NOW",
             "AGE/QUEUE");
  for (const auto& l : leases) {
    std::string pools;
    for (const auto& p : l["pools"])
      pools += fmt::format("{}{}", pools.empty() ? "" : ",", p.get<std::string>());
    std::string state = l.value("state", "?");
    std::string where =
        state == "queued"
            ? fmt::format("#{} ({})", l["position"].is_number() ? l["position"].dump() : "?",
                          l["waiting_for"].is_string() ? l["waiting_for"].get<std::string>() : "-")
            : ageText(l.contains("started_at_ns") ? l["started_at_ns"] : l["granted_at_ns"]);
    json mem = l.contains("memory") ? l["memory"]["current_bytes"] : json();
    json gpu = l.contains("gpu") ? l["gpu"]["current_bytes"] : json();
    printLine(
        fmt::format("{:<12}  {:<16}  {:<7}  {:<8}  {:<14}  {:>10}  {:>10}  {:>10}  {:>10}  {}",
                    l.value("lease", ""), l.value("name", ""), l.value("kind", ""), state, pools,
                    bytesOrDash(l["declared"]["memory_max"]), bytesOrDash(mem),
                    bytesOrDash(l["declared"]["gpu_memory_max"]), bytesOrDash(gpu), where));
  }
}

void printPools(const json& pools) {
  fmt::print("{:<12}  {:>9}  {:>6}  {:>21}  {:>21}  {:>10}  {:>10}\n", "POOL", "HOLDERS", "QUEUE",
             "MEMORY DECL/BUDGET", "GPU DECL/BUDGET", "HOST-FREE", "GPU-FREE");
  for (const auto& p : pools) {
    auto pair = [](const json& declared, const json& budget) {
      if (!budget.is_number_unsigned()) return std::string("- (no budget)");
      return fmt::format("{}/{}", bytesOrDash(declared), bytesOrDash(budget));
    };
    fmt::print("{:<12}  {:>9}  {:>6}  {:>21}  {:>21}  {:>10}  {:>10}\n", p.value("pool", ""),
               fmt::format("{}/{}", p["holders"].size(), p.value("capacity", 0)), p["queue"].size(),
               pair(p["memory_declared"], p["memory_budget"]),
               pair(p["gpu_memory_declared"], p["gpu_memory_budget"]),
               bytesOrDash(p["headroom"]["host_bytes"]), bytesOrDash(p["headroom"]["gpu_bytes"]));
  }
}

}  // namespace

static void notListed(const nlohmann::json& result) {
  const auto& q = jsonview::get(result, "queued");
  auto total = jsonview::count(jsonview::get(q, "total"));
  auto listed = jsonview::count(jsonview::get(q, "listed"));
  if (total && listed && *total > *listed)
    fmt::print(stderr,
               "{} more queued requests are not listed (the first {}, in grant order, are)\n",
               *total - *listed, *listed);
}

// Every page of a listing (leases, seats), one request each, the rows of all
// of them in one document: the first page's reply with every page's rows.
// A daemon that pages no more (no "page") answered in one.
template <class Page>
static std::optional<nlohmann::json> allPages(const char* cmd, const ClientOptions& o, int& rc) {
  Page page;
  std::optional<nlohmann::json> all;
  std::size_t live = 0;        // live rows so far: the queue the first page named stays after them
  std::set<std::string> seen;  // a request queued on the first page and granted since: once
  for (std::size_t pages = 0; pages < 100'000; ++pages) {
    // Past a burst, at a pace under the daemon's queries_per_second_per_uid
    // (20 a second by default): 20,000 leases are 40 pages.
    if (pages >= 30) std::this_thread::sleep_for(std::chrono::milliseconds(60));
    auto m = callDaemon(cmd, o, page, rc);
    if (!m) return std::nullopt;
    auto doc = rpc::api::decodeDocument(m->result, cmd);
    if (!doc) {
      rc = badReply(cmd, doc.error());
      return std::nullopt;
    }
    const auto& facts = jsonview::get(m->result, "page");
    auto listed = jsonview::count(jsonview::get(facts, "listed")).value_or(0);
    if (!all) {
      all = std::move(*doc);
      for (const auto& row : (*all)[cmd]) seen.insert(row.value("lease", std::string()));
    } else {
      auto& rows = (*all)[cmd];
      for (auto& row : (*doc)[cmd]) {
        if (!seen.insert(row.value("lease", std::string())).second) continue;
        rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(live), std::move(row));
        ++live;
      }
      listed = 0;  // counted row by row above
    }
    live += listed;
    const auto& next = jsonview::get(facts, "next");
    if (!next.is_string()) break;
    page.after = next.template get<std::string>();
  }
  if (all) all->erase("page");
  return all;
}

int runClientCommand(const ClientCommands& c, const ClientOptions& o) {
  int rc = kExitOk;
  if (c.events->parsed()) return followEvents(o);
  if (c.leases->parsed()) {
    auto all = allPages<rpc::api::ListLeases>("leases", o, rc);
    if (!all) return rc;
    if (o.json)
      fmt::print("{}\n", (*all)["leases"].dump(2));
    else
      printLeases((*all)["leases"]);
    notListed(*all);
    return kExitOk;
  }
  if (c.logs->parsed()) {
    auto m = callDaemon("logs", o, rpc::api::LeaseQuery{o.leaseId, false}, rc);
    if (!m) return rc;
    // Live: the lease's attributes; ended: those its granted row recorded.
    json attrs = m->result.value("attributes", json::object());
    if (attrs.empty() && m->result.contains("ledger")) {
      for (const auto& row : m->result["ledger"]) {
        if (row.value("kind", "") == "granted" && row["body"].is_object())
          attrs = row["body"].value("declared", json::object()).value("attributes", json::object());
      }
    }
    std::string unit = attrs.is_object() ? attrs.value(lease::kJobUnitKey, "") : "";
    std::string manager =
        attrs.is_object() ? attrs.value(lease::kJobManagerKey, "system") : "system";
    if (!lease::isDetachedJobUnit(unit)) {
      fmt::print(stderr,
                 "tally logs: lease {} is not a detached job: its output went where the tally run "
                 "that held it wrote (a terminal, or its unit's journal). Jobs started with "
                 "tally run --pool P --detach have their output here\n",
                 o.leaseId);
      return kExitRefused;
    }
    // journald files each line under the unit of the process that wrote it:
    // tally run's own under the job's service, the workload's under the
    // lease's scope (where the workload runs). Both, in time order.
    std::string scope = m->result.value("unit", "");
    if (scope.empty()) scope = fmt::format("tally-{}.scope", o.leaseId);
    std::vector<std::string> args = {"journalctl", "--no-pager"};
    if (manager == "user") args.push_back("--user");
    args.insert(args.end(), {"-u", unit, "-u", scope});
    if (o.follow) args.push_back("--follow");
    if (o.lines) args.insert(args.end(), {"--lines", std::to_string(o.lines)});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    ::execvp(argv[0], argv.data());
    fmt::print(stderr, "tally logs: cannot run journalctl: {}\n", std::strerror(errno));
    return kExitEnvironment;
  }
  if (c.leaseShow->parsed()) {
    // The daemon knows live leases and its ledger's; without a daemon the
    // local ledger still has every ended lease (a standalone tally run's too).
    json r;
    if (auto m = callDaemon("lease show", o, rpc::api::LeaseQuery{o.leaseId, false}, rc)) {
      r = m->result;
    } else if (rc == kExitEnvironment || rc == kExitRefused) {
      auto fromLedger = leaseFromLedger(o);
      if (!fromLedger) return rc;
      fmt::print(stderr, "tally lease show: read from the ledger at {}\n", fromLedger->second);
      r = std::move(fromLedger->first);
    } else {
      return rc;
    }
    if (o.json) {
      fmt::print("{}\n", r.dump(2));
      return kExitOk;
    }
    for (const auto& line : leaseShowLines(r)) printLine(line);
    // The memory timeline from the ledger's samples (the daemon's; a standalone
    // run keeps only its peaks), against the limits, with its events marked.
    auto t = leaseTimeline(r);
    if (!t.host.points.empty()) {
      for (const auto* s : {&t.host, &t.gpu}) {
        fmt::print("\n");
        for (const auto& line : views::timelineText(*s, t.marks, 80, 6)) printLine(line);
      }
    } else {
      fmt::print("  (no samples in the ledger: a standalone 'tally run' records its peaks only)\n");
    }
    if (!o.svg.empty()) {
      std::FILE* f = std::fopen(o.svg.c_str(), "w");
      std::string svg = views::timelineSvg({t.host, t.gpu}, t.marks);
      bool ok = f && std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
      if (f) ok = std::fclose(f) == 0 && ok;
      if (!ok) {
        fmt::print(stderr, "tally lease show: cannot write {}\n", o.svg);
        return kExitEnvironment;
      }
      fmt::print(stderr, "tally lease show: the timeline is in {}\n", o.svg);
    }
    return kExitOk;
  }
  if (c.leaseRelease->parsed()) {
    auto m = callDaemon("lease release", o, rpc::api::Release{{o.leaseId}}, rc);
    if (!m) return rc;
    auto r = rpc::api::decodeReleaseReply(m->result);
    if (!r) return badReply("lease release", r.error());
    if (o.json)
      fmt::print("{}\n", m->result.dump(2));
    else
      fmt::print("lease {}: {}\n", r->lease, r->state);
    return kExitOk;
  }
  if (c.pools->parsed()) {
    auto m = callDaemon("pools", o, rpc::api::ListPools{}, rc);
    if (!m) return rc;
    auto doc = rpc::api::decodeDocument(m->result, "pools");
    if (!doc) return badReply("pools", doc.error());
    if (o.json)
      fmt::print("{}\n", (*doc)["pools"].dump(2));
    else
      printPools((*doc)["pools"]);
    return kExitOk;
  }
  if (c.seats->parsed()) {
    auto all = allPages<rpc::api::Seats>("seats", o, rc);
    if (!all) return rc;
    if (o.json) {
      fmt::print("{}\n", all->dump(2));
      return kExitOk;
    }
    for (const auto& line : views::seatTable((*all)["seats"], 1000))
      printLine(text::trimRight(line));
    notListed(*all);
    return kExitOk;
  }
  if (c.daemonStatus && c.daemonStatus->parsed()) {
    auto m = callDaemon("daemon status", o, rpc::api::Overview{}, rc);
    if (!m) return rc;
    auto st = views::daemonStatus(m->result, clock::realtimeNs(), o.utc);
    if (o.json) {
      nlohmann::json out = nlohmann::json::object();
      for (const char* k : {"daemon", "sample_interval_us", "kernel_charge", "coverage", "ledger"})
        if (m->result.contains(k)) out[k] = m->result[k];
      fmt::print("{}\n", out.dump(2));
    } else {
      for (const auto& line : st.lines) printLine(line);
    }
    return st.ledgerWrites ? kExitOk : kExitDegraded;
  }
  if (c.metrics->parsed()) {
    auto m = callDaemon("metrics", o, rpc::api::Metrics{}, rc);
    if (!m) return rc;
    auto r = rpc::api::decodeMetricsReply(m->result);
    if (!r) return badReply("metrics", r.error());
    fmt::print("{}", r->text);
    return kExitOk;
  }
  if (c.attach->parsed()) {
    rpc::api::Attach request;
    rpc::api::Declared& d = request.declared;
    d.pools = o.pools;
    request.parent = o.parent;
    if (d.pools.empty() && o.parent.empty()) {
      fmt::print(stderr,
                 "tally attach: name the pool the lease holds with --pool (or, for a child "
                 "lease inside a running lease, that lease with --parent)\n");
      return kExitUsage;
    }
    if (!o.unit.empty())
      request.target.unit = o.unit;
    else if (!o.cgroup.empty())
      request.target.cgroup = o.cgroup;
    else if (o.pid)
      request.target.pid = static_cast<pid_t>(o.pid);
    else if (!o.container.empty()) {
      auto found = inspectContainer(o.container, o.engine);
      if (!found) {
        fmt::print(stderr, "tally attach: {}\n", found.error().message);
        return kExitRefused;
      }
      request.target.pid = found->pid;
      request.target.container = lease::Container{found->engine, found->id, found->name};
      // Named as the engine names it, unless --name says otherwise.
      if (o.name.empty() && lease::validLeaseName(found->name))
        request.declared.declaration.name = found->name;
    } else {
      fmt::print(stderr,
                 "tally attach: name the workload with --unit, --container, --cgroup or --pid\n");
      return kExitUsage;
    }
    if (!memoryLimitOption("attach", "--memory-max", o.memoryMax, d.declaration.memoryMax))
      return kExitUsage;
    for (auto [flag, text, out] :
         {std::tuple{"--gpu-memory-max", &o.gpuMemoryMax, &d.declaration.gpuMemoryMax},
          std::tuple{"--gpu-memory-high", &o.gpuMemoryHigh, &d.declaration.gpuMemoryHigh}}) {
      if (!sizeOption("attach", flag, *text, *out)) return kExitUsage;
    }
    if (!gpuLimitsOption("attach", d.declaration.gpuMemoryMax, d.declaration.gpuMemoryHigh))
      return kExitUsage;
    if (d.declaration.gpuMemoryMax || d.declaration.gpuMemoryHigh) {
      if (auto a = enforce::parseAction(o.gpuAction)) d.declaration.gpuAction = *a;
      d.declaration.gpuOverSamples = o.gpuOverSamples;
    }
    if (!durationOption("attach", "--queue-timeout", o.queueTimeout, d.timeoutUs))
      return kExitUsage;
    // A running workload goes unmetered while its attach waits: never by surprise.
    d.noWait = !o.wait && !d.timeoutUs;
    if (!o.name.empty()) d.declaration.name = o.name;
    d.priority = o.priority;
    if (!attributesOption("attach", o.attrs, d.declaration.attributes)) return kExitUsage;
    request.force = o.force;
    auto timeoutMs = replyTimeoutMs("attach", o);
    if (!timeoutMs) return kExitUsage;
    // A queued attach outlives a daemon restart: it is sent again once the
    // daemon is back (its queue did not survive; the request joins its end).
    auto waited = rpc::callWaiting(
        socketPath(o.socket), request,
        [](const rpc::Message& ev) {
          auto q = rpc::api::decodeQueued(ev.raw);
          fmt::print(stderr, "tally attach: queued as lease {}: {}\n",
                     q.lease.empty() ? "?" : q.lease, rpc::api::describe(q));
        },
        *timeoutMs, kAttachReconnectUs, -1,
        [](const std::string& what) { fmt::print(stderr, "tally attach: {}\n", what); });
    if (!waited) {
      fmt::print(stderr, "tally attach: {}\n", waited.error().message);
      return kExitEnvironment;
    }
    std::optional<rpc::Message> m = std::move(waited->reply);
    if (!m->ok) {
      std::string hint;
      if (d.noWait && m->error.message.rfind(rpc::api::kCannotBeGrantedNow, 0) == 0)
        hint = ". Retry when that frees, or pass --wait (or --queue-timeout) to queue for it";
      fmt::print(stderr, "tally attach: {}{}\n", rpc::errorSentence(m->error), hint);
      return exitForDaemonError(m->error.code);
    }
    auto r = rpc::api::decodeLeaseReply(m->result);
    if (!r) return badReply("attach", r.error());
    if (o.json)
      fmt::print("{}\n", m->result.dump(2));
    else
      fmt::print("{}\n", r->lease);
    fmt::print(stderr, "tally attach: lease {} on {} ({})\n", r->lease, r->cgroup.value_or("?"),
               r->state);
    return kExitOk;
  }
  return kExitUsage;
}

}  // namespace tally::cli
