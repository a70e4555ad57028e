// `tally pools`: the daemon's pools as a table or JSON.
#include "cli/cmd_pools.h"

#include <fmt/format.h>

#include <string>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"
#include "util/json_view.h"

namespace tally::cli {
namespace {

using json = nlohmann::json;

using jsonview::bytesOrDash;

void printPools(const json& pools) {
  // The column names tally top uses (ROOM: measured headroom).
  fmt::print("{:<12}  {:>9}  {:>6}  {:>23}  {:>23}  {:>10}  {:>10}\n", "POOL", "HOLDERS", "QUEUE",
             "MEMORY DECLARED/BUDGET", "GPU DECLARED/BUDGET", "HOST ROOM", "GPU ROOM");
  for (const auto& p : pools) {
    auto pair = [](const json& declared, const json& budget) {
      if (!budget.is_number_unsigned()) return std::string("- (no budget)");
      return fmt::format("{}/{}", bytesOrDash(declared), bytesOrDash(budget));
    };
    fmt::print("{:<12}  {:>9}  {:>6}  {:>23}  {:>23}  {:>10}  {:>10}\n", p.value("pool", ""),
               fmt::format("{}/{}", p["holders"].size(), p.value("capacity", 0)), p["queue"].size(),
               pair(p["memory_declared"], p["memory_budget"]),
               pair(p["gpu_memory_declared"], p["gpu_memory_budget"]),
               bytesOrDash(p["headroom"]["host_bytes"]), bytesOrDash(p["headroom"]["gpu_bytes"]));
  }
}

}  // namespace

CLI::App* addPoolsCommand(CLI::App& app, PoolsOptions& o) {
  auto* pools = app.add_subcommand(
      "pools", "Pools: holders, queue, budgets declared/used, measured headroom");
  pools->footer(
      "Headroom is measured (MemAvailable; device mem_info_* free) minus what holders declared but "
      "do not use yet;\n"
      "it can delay a grant, never allow one past a budget. '-' = not measurable here.");
  addSocketOption(pools, o.socket);
  addReplyTimeoutOption(pools, o.replyTimeout);
  pools->add_flag("--json", o.json, "print the pools as JSON");
  return pools;
}

int runPools(const PoolsOptions& o) {
  int rc = kExitOk;
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

}  // namespace tally::cli
