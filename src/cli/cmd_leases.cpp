// `tally leases`: every page of the daemon's listing, as a table or JSON.
#include "cli/cmd_leases.h"

#include <fmt/format.h>

#include <string>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "cli/print_line.h"
#include "cli/user_names.h"
#include "rpc/lease_api.h"
#include "util/json_view.h"

namespace tally::cli {
namespace {

using json = nlohmann::json;

using jsonview::bytesOrDash;

void printLeases(const json& leases) {
  // The column names tally top uses (NOW/MAX: measured now, declared max).
  fmt::print("{:<12}  {:<16}  {:<8}  {:<7}  {:<8}  {:<14}  {:>21}  {:>21}  {}\n", "LEASE", "NAME",
             "USER", "KIND", "STATE", "POOLS", "MEM NOW/MAX", "GPU NOW/MAX", "AGE/QUEUE");
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
    auto nowMax = [](const json& now, const json& max) {
      return fmt::format("{}/{}", bytesOrDash(now), bytesOrDash(max));
    };
    printLine(fmt::format("{:<12}  {:<16}  {:<8}  {:<7}  {:<8}  {:<14}  {:>21}  {:>21}  {}",
                          l.value("lease", ""), l.value("name", ""), l.value("user", "-"),
                          l.value("kind", ""), state, pools,
                          nowMax(mem, l["declared"]["memory_max"]),
                          nowMax(gpu, l["declared"]["gpu_memory_max"]), where));
  }
}

}  // namespace

CLI::App* addLeasesCommand(CLI::App& app, LeasesOptions& o) {
  auto* leases = app.add_subcommand("leases", "Live and queued leases of the daemon");
  leases->footer(kReadingExitStatus);
  addSocketOption(leases, o.socket);
  addReplyTimeoutOption(leases, o.replyTimeout);
  leases->add_flag("--json", o.json, "print the leases as JSON");
  leases->add_option("--user", o.user, "only this user's leases (a login name or a uid)");
  return leases;
}

int runLeases(const LeasesOptions& o) {
  std::optional<std::uint32_t> only;
  if (!userOption("leases", o.user, only)) return kExitUsage;
  int rc = kExitOk;
  auto all = allPages<rpc::api::ListLeases>("leases", o, rc);
  if (!all) return rc;
  json& leases = (*all)["leases"];
  if (only && leases.is_array()) {
    json mine = json::array();
    for (auto& l : leases)
      if (ownerOf(l) == only) mine.push_back(std::move(l));
    leases = std::move(mine);
  }
  UserNames names;
  names.annotate(leases);
  if (o.json)
    fmt::print("{}\n", (*all)["leases"].dump(2));
  else
    printLeases((*all)["leases"]);
  notListed(*all);
  return kExitOk;
}

}  // namespace tally::cli
