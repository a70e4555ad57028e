// tally events: subscribe (replaying the ledger's rows from --since), then
// print each event as it comes; across a daemon restart, reconnect and replay
// what the ledger recorded meanwhile.
#include "cli/cmd_events.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <thread>

#include "cli/cmd_client.h"
#include "cli/exit_codes.h"
#include "cli/option_values.h"
#include "cli/print_line.h"
#include "cli/socket_path.h"
#include "cli/user_names.h"
#include "rpc/client.h"
#include "rpc/messages.h"
#include "util/clock.h"
#include "util/json_view.h"
#include "views/event_line.h"
#include "views/ledger_view.h"

namespace tally::cli {

using json = nlohmann::json;

namespace {

// How often a follower whose daemon went away tries again.
constexpr auto kReconnectEvery = std::chrono::milliseconds(500);

}  // namespace

CLI::App* addEventsCommand(CLI::App& app, EventsOptions& o) {
  auto* events = app.add_subcommand(
      "events",
      "Follow the daemon's events, with their time: leases (queued, granted, started, ended with "
      "the outcome), GPU bound (high, kill, refused, report) and coverage");
  events->footer(
      "Subscribes to the daemon and prints each event as it happens, one line each (JSON with "
      "--json,\n"
      "which carries at_ns and, for an event the ledger holds, its row's seq):\n"
      "  2026-12-02 15:30:01.123  lease 1f0c2a9b3e7d (llama): granted in gpu\n"
      "  2026-12-02 15:31:12.480  gpu-memory-kill lease 1f0c2a9b3e7d (llama): killed by tally: "
      "GPU memory ...\n"
      "--since replays the ledger's rows from then first, as the events they were (\"replayed\": "
      "true);\n"
      "--until stops at that time (in the past: replay only). When the daemon restarts, events "
      "says so,\n"
      "reconnects, and replays what the ledger recorded meanwhile: nothing the ledger holds is "
      "missed.\n"
      "Filters (each repeatable; every one given must match): --lease, --pool, --kind, --user.\n"
      "queued, queue-timeout and cancelled are live only: a request that never held a lease "
      "leaves no\nledger row to replay (tally_queue_ended_total counts them).\n"
      "Exit status: 0 done (interrupted, --count reached, --until or --timeout passed), 1 "
      "--timeout passed\n"
      "before --count events, 2 a bad option, 3 no daemon at the start.");
  events->add_option("--count", o.count,
                     "exit after this many events (default: follow until interrupted)");
  events->add_option("--timeout", o.eventsTimeout, "stop following after this long (e.g. 30s)");
  events->add_option("--since", o.since,
                     "first replay the ledger's events from then: today, yesterday, now, "
                     "2026-12-02, '2026-12-02 14:05', or ago: 10m, 2h");
  events->add_option("--until", o.until, "stop at this time (same forms as --since)");
  events->add_option("--lease", o.eventLeases,
                     "only this lease: its id, the id's first characters, or its name");
  events->add_option("--pool", o.eventPools, "only leases in this pool");
  events->add_option("--user", o.user,
                     "only this user's leases (a login name or a uid; events that name no "
                     "owner, such as coverage, are left out)");
  // The list from its one definition (views::eventKinds), never retyped here.
  events->add_option("--kind", o.eventKinds,
                     fmt::format("only this kind: {}", fmt::join(views::eventKinds(), ", ")));
  events->add_flag("--utc", o.utc, "times in UTC (default: local time)");
  events->add_flag("--json", o.json, "one JSON object per event");
  addSocketOption(events, o.socket);
  return events;
}

int runEvents(const EventsOptions& o) {
  std::optional<std::uint64_t> timeoutUs;
  if (!durationOption("events", "--timeout", o.eventsTimeout, timeoutUs))
    return kExitUsage;  // before connecting
  std::optional<std::uint64_t> sinceNs, untilNs;
  const std::uint64_t startNs = clock::realtimeNs();
  for (auto [flag, text, out] :
       {std::tuple{"--since", &o.since, &sinceNs}, std::tuple{"--until", &o.until, &untilNs}}) {
    if (text->empty()) continue;
    auto t = views::parseWhen(*text, startNs, o.utc);
    if (!t) {
      fmt::print(stderr, "tally events: {} {}\n", flag, t.error().message);
      return kExitUsage;
    }
    *out = *t;
  }
  views::EventFilter filter{o.eventLeases, o.eventPools, o.eventKinds, std::nullopt};
  if (!userOption("events", o.user, filter.owner)) return kExitUsage;
  if (auto s = views::checkFilter(filter); !s) {
    fmt::print(stderr, "tally events: {}\n", s.error().message);
    return kExitUsage;
  }
  // Following ends at --timeout, or at --until once the replay is through.
  const std::uint64_t startUs = clock::monotonicUs();
  const std::uint64_t timeoutAt = timeoutUs ? startUs + *timeoutUs : 0;
  const std::uint64_t untilAt =
      untilNs ? startUs + (*untilNs > startNs ? (*untilNs - startNs) / 1000 : 0) : 0;
  auto waitMs = [&](bool replaying) -> std::optional<int> {  // nullopt: a deadline passed
    std::uint64_t at = timeoutAt;
    if (untilAt && !replaying) at = at ? std::min(at, untilAt) : untilAt;
    if (!at) return -1;
    std::uint64_t now = clock::monotonicUs();
    if (now >= at) return std::nullopt;
    return static_cast<int>((at - now) / 1000 + 1);
  };

  std::string path = socketPath(o.socket);
  std::optional<std::int64_t> lastSeq;  // the newest ledger row seen: a reconnect asks after it
  std::uint64_t lostAtNs = 0;           // when the daemon went away (0: never)
  bool followed = false, saidLost = false, more = false;
  std::uint64_t seen = 0;
  auto done = [&] { return o.count != 0 && seen >= o.count; };
  bool finished = false;  // --until passed
  while (!done() && !finished) {
    if (!waitMs(true)) break;
    auto client = rpc::Client::connect(path);
    rpc::api::Subscribe sub;
    if (lastSeq)
      sub.afterSeq = *lastSeq;
    else if (lostAtNs || sinceNs)
      sub.sinceNs = lostAtNs ? (sinceNs ? std::min(*sinceNs, lostAtNs) : lostAtNs) : *sinceNs;
    Result<rpc::Message> reply = client ? client->call(sub, {}, 10'000)  // the reply timeout
                                        : Result<rpc::Message>(client.error());
    if (reply && !reply->ok) {
      fmt::print(stderr, "tally events: the daemon refused to subscribe: {}\n",
                 reply->error.message);
      return kExitEnvironment;
    }
    auto answer = reply ? rpc::api::decodeSubscribeReply(reply->result)
                        : Result<rpc::api::SubscribeReply>(reply.error());
    if (!answer) {
      if (!followed) {
        fmt::print(stderr, "tally events: {}\n", answer.error().message);
        return kExitEnvironment;
      }
      std::this_thread::sleep_for(kReconnectEvery);  // the daemon is not back yet
      continue;
    }
    if (!followed) {
      // Said once subscribed: from here on no event is missed (a script can wait for this line).
      fmt::print(stderr, "tally events: following the daemon at {}{}\n", path,
                 answer->replaying ? " (first the ledger's rows since then)" : "");
    } else if (saidLost) {
      fmt::print(stderr,
                 "tally events: reconnected to the daemon at {}; first the ledger's rows from "
                 "while it was away\n",
                 path);
      saidLost = false;
    }
    std::fflush(stderr);
    followed = true;
    more = false;  // the rest of a truncated replay: asked again after the last row
    bool replaying = answer->replaying;
    while (!done()) {
      if (!replaying && more) break;
      auto wait = waitMs(replaying || more);
      if (!wait) {
        finished = untilAt != 0 && clock::monotonicUs() >= untilAt;
        break;
      }
      auto m = client->next(*wait);
      if (!m) {
        if (m.error().code == ETIMEDOUT) break;
        fmt::print(stderr, "tally events: {}; reconnecting\n", m.error().message);
        std::fflush(stderr);
        saidLost = true;
        lostAtNs = clock::realtimeNs();
        break;
      }
      if (!m->event &&
          !m->ok) {  // the daemon dropped this follower (it fell behind): again after the last seq
        fmt::print(stderr, "tally events: {}; subscribing again\n", m->error.message);
        std::fflush(stderr);
        more = true;
        break;
      }
      if (!m->event) continue;
      const json& e = m->raw;
      if (*m->event == "replayed") {  // the replay is over; the live events follow
        auto end = rpc::api::decodeReplayedEvent(e);
        if (!end) {
          fmt::print(stderr, "tally events: {}\n", end.error().message);
          return kExitEnvironment;
        }
        // Said on stderr, as the subscription was: a script can wait for it.
        fmt::print(stderr, "tally events: {} row{} replayed{}\n", end->rows,
                   end->rows == 1 ? "" : "s", end->truncated ? ", more after them" : "");
        if (end->error)
          fmt::print(stderr, "tally events: the daemon could not replay further: {}\n",
                     *end->error);
        std::fflush(stderr);
        replaying = false;
        more = end->truncated;
        continue;
      }
      if (auto seq = jsonview::count(jsonview::get(e, "seq"))) {
        auto s = static_cast<std::int64_t>(*seq);
        if (lastSeq && s <= *lastSeq) continue;  // heard before the daemon went away
        lastSeq = s;
      }
      if (auto at = jsonview::count(jsonview::get(e, "at_ns")); untilNs && at && *at > *untilNs) {
        finished = true;  // past --until: done
        break;
      }
      if (!views::matches(filter, e)) continue;
      ++seen;
      printLine(o.json ? e.dump() : views::eventLine(e, o.utc));
      std::fflush(stdout);
    }
    if (finished || (!saidLost && !more)) break;  // --timeout, --until or --count: done
    if (saidLost) std::this_thread::sleep_for(kReconnectEvery);
  }
  // A timeout before --count events: said, and in the exit status.
  if (o.count && seen < o.count && !untilNs) {
    fmt::print(stderr, "tally events: --timeout {} passed after {} of {} events\n", o.eventsTimeout,
               seen, o.count);
    return kExitDegraded;
  }
  return kExitOk;
}

}  // namespace tally::cli
