// tally events: subscribe, then print each event as it comes.
#include <fmt/format.h>

#include "cli/cmd_client.h"
#include "cli/exit_codes.h"
#include "cli/option_values.h"
#include "cli/print_line.h"
#include "cli/socket_path.h"
#include "rpc/client.h"
#include "rpc/messages.h"
#include "util/clock.h"
#include "util/text.h"

namespace tally::cli {

using json = nlohmann::json;

int followEvents(const ClientOptions& o) {
  std::optional<std::uint64_t> timeoutUs;
  if (!durationOption("events", "--timeout", o.eventsTimeout, timeoutUs))
    return kExitUsage;  // before connecting
  std::string path = socketPath(o.socket);
  auto client = rpc::Client::connect(path);
  if (!client) {
    fmt::print(stderr, "tally events: {}\n", client.error().message);
    return kExitEnvironment;
  }
  auto sub = client->call(rpc::api::Subscribe{}, {}, 10'000);  // the default reply timeout
  if (!sub || !sub->ok) {
    fmt::print(stderr, "tally events: {}\n", sub ? sub->error.message : sub.error().message);
    return kExitEnvironment;
  }
  // Said once subscribed: from here on no event is missed (a script can wait for this line).
  fmt::print(stderr, "tally events: following the daemon at {}\n", path);
  std::fflush(stderr);
  std::uint64_t deadline = timeoutUs ? clock::monotonicUs() + *timeoutUs : 0;
  std::uint64_t seen = 0;
  while (o.count == 0 || seen < o.count) {
    int wait = -1;
    if (deadline) {
      std::uint64_t now = clock::monotonicUs();
      if (now >= deadline) break;
      wait = static_cast<int>((deadline - now) / 1000 + 1);
    }
    auto m = client->next(wait);
    if (!m) {
      if (m.error().code == ETIMEDOUT) break;
      fmt::print(stderr, "tally events: {}\n", m.error().message);
      return kExitEnvironment;
    }
    if (!m->event) continue;
    ++seen;
    const json& e = m->raw;
    if (o.json) {
      fmt::print("{}\n", e.dump());
    } else if (auto b = m->event == "gpu-bound" ? rpc::api::decodeGpuBoundEvent(e)
                                                : Result<rpc::api::GpuBoundEvent>(Error{0, ""})) {
      printLine(fmt::format("{} lease {} ({}): {}", enforce::verdictName(b->event.kind), b->lease,
                            b->name, b->event.summary));
    } else if (auto l = m->event == "lease" ? rpc::api::decodeLeaseEvent(e)
                                            : Result<rpc::api::LeaseEvent>(Error{0, ""})) {
      printLine(text::truncateUtf8(l->message, 1024));
    } else {
      printLine(fmt::format("{}: {}", e.value("event", "?"), e.value("verdict", e.dump())));
    }
    std::fflush(stdout);
  }
  // A timeout before --count events: said, and in the exit status.
  if (o.count && seen < o.count) {
    fmt::print(stderr, "tally events: --timeout {} passed after {} of {} events\n", o.eventsTimeout,
               seen, o.count);
    return kExitDegraded;
  }
  return kExitOk;
}

}  // namespace tally::cli
