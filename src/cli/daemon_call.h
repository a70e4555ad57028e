// One call to the daemon for a client command: the --timeout, the
// connection, the typed request, and the errors printed with the command's
// name and mapped to tally's exit codes (cli/exit_codes.h); and a listing's
// every page (leases, seats), one call each.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "cli/cmd_client.h"
#include "cli/exit_codes.h"
#include "cli/socket_path.h"
#include "rpc/client.h"
#include "rpc/messages.h"
#include "util/json_view.h"
#include "util/result.h"

namespace tally::cli {

// --timeout as milliseconds for rpc::Client::call; nullopt after a usage error.
std::optional<int> replyTimeoutMs(const char* cmd, const DaemonCallOptions& o);

// A reply that does not decode: the daemon and this client disagree.
int badReply(const char* cmd, const Error& e);

// One call; errors printed with the command's name. Exit code in `rc`.
template <class Params>
std::optional<rpc::Message> callDaemon(const char* cmd, const DaemonCallOptions& o,
                                       const Params& params, int& rc,
                                       const rpc::Client::EventFn& onEvent = {}) {
  auto timeoutMs = replyTimeoutMs(cmd, o);
  if (!timeoutMs) {
    rc = kExitUsage;
    return std::nullopt;
  }
  std::string path = socketPath(o.socket);
  auto client = rpc::Client::connect(path);
  if (!client) {
    fmt::print(stderr, "tally {}: {}\n", cmd, client.error().message);
    rc = kExitEnvironment;
    return std::nullopt;
  }
  auto m = client->call(params, onEvent, *timeoutMs);
  if (!m) {
    fmt::print(stderr, "tally {}: {}\n", cmd, m.error().message);
    rc = kExitEnvironment;
    return std::nullopt;
  }
  if (!m->ok) {
    fmt::print(stderr, "tally {}: {}\n", cmd, rpc::errorSentence(m->error));
    rc = exitForDaemonError(m->error.code);
    return std::nullopt;
  }
  rc = kExitOk;
  return std::move(*m);
}

// A listing names the first queued requests only (daemon/views.h): the rest
// are counted, on stderr so --json stays one document.
void notListed(const nlohmann::json& result);

// Every page of a listing (leases, seats), one request each, the rows of all
// of them in one document: the first page's reply with every page's rows.
// A daemon that pages no more (no "page") answered in one.
template <class Page>
std::optional<nlohmann::json> allPages(const char* cmd, const DaemonCallOptions& o, int& rc) {
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

}  // namespace tally::cli
