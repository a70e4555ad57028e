// libFuzzer targets for what the daemon and its clients read from others:
// RPC bytes both ways (framing, the request envelope and every method's typed
// decoder; the daemon's replies and events through every client decoder; the
// whole request path is request_fuzz.cpp), the TOML config, and GET /metrics
// request heads. TALLY_FUZZ_TARGET picks one per binary.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cgroup/path.h"
#include "config/config.h"
#include "metrics/http_request.h"
#include "metrics/sock_diag.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"
#include "rpc/protocol.h"

using namespace tally;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
#if TALLY_FUZZ_TARGET == 1
  // Fed in two chunks split at a data-dependent point, as reads arrive.
  rpc::LineReader reader(4096);
  std::size_t cut = size ? data[0] % (size + 1) : 0;
  reader.feed(bytes.substr(0, cut));
  reader.feed(bytes.substr(cut));
  if (reader.buffered() > 4096) std::abort();
  while (auto line = reader.next()) {
    if (line->text.size() > 4096) std::abort();
    auto parsed = rpc::parseRequest(line->text);
    if (parsed.request) {
      const auto& params = parsed.request->params;
      if (!params.is_object()) std::abort();
      // Every method's decoder: a refusal names what it refused.
      auto named = [](const auto& r) {
        if (!r && r.error().message.empty()) std::abort();
      };
      named(rpc::api::decodeAcquire(params));
      named(rpc::api::decodeAttach(params));
      named(rpc::api::decodeStarted(params));
      named(rpc::api::decodeComplete(params));
      named(rpc::api::decodeBound(params));
      named(rpc::api::decodeLeaseRef(params));
      named(rpc::api::decodeLeaseQuery(params));
      named(rpc::api::decodeExited(params));
      // An accepted request encodes back to one its decoder accepts again.
      if (auto a = rpc::api::decodeAttach(params)) {
        if (!rpc::api::decodeAttach(rpc::api::encode(*a))) std::abort();
      }
      if (auto e = rpc::api::decodeExited(params)) {
        if (!rpc::api::decodeExited(rpc::api::encode(*e))) std::abort();
      }
      std::string reply = rpc::encodeReply(parsed.request->id, parsed.request->params);
      if (reply.empty() || reply.back() != '\n') std::abort();
    } else {
      if (parsed.error.code.empty()) std::abort();
      (void)rpc::encodeError(parsed.id, parsed.error);
    }
    // The same line as the daemon's word to a client: every reply and event decoder.
    if (auto m = rpc::parseMessage(line->text)) {
      const auto& r = m->result;
      auto named = [](const auto& d) {
        if (!d && d.error().message.empty()) std::abort();
      };
      named(rpc::api::decodeHelloReply(r));
      named(rpc::api::decodeLeaseReply(r));
      named(rpc::api::decodeReleaseReply(r));
      named(rpc::api::decodeReloadReply(r));
      named(rpc::api::decodeCompleteReply(r));
      named(rpc::api::decodeBoundReply(r));
      named(rpc::api::decodeSubscribeReply(r));
      named(rpc::api::decodeMetricsReply(r));
      named(rpc::api::decodeDocument(r, "leases"));
      named(rpc::api::decodeLeaseEvent(m->raw));
      named(rpc::api::decodeGpuBoundEvent(m->raw));
      named(rpc::api::decodeReplayedEvent(m->raw));
      (void)rpc::api::describe(rpc::api::decodeQueued(m->raw));
    }
  }
  // The cgroup path canonicaliser on the same bytes: canonical is a fixed point.
  if (auto c = cgroup::canonicalPath(bytes)) {
    if (c->empty() || (*c)[0] != '/' || c->find("//") != std::string::npos ||
        c->find("/./") != std::string::npos)
      std::abort();
    auto again = cgroup::canonicalPath(*c);
    if (!again || *again != *c) std::abort();
  }
  if (rpc::nestsDeeperThan(bytes, rpc::kMaxDepth) != rpc::nestsDeeperThan(bytes, rpc::kMaxDepth))
    std::abort();
  // The kernel's inet_diag answer (the metrics listener's peer check): an
  // error with a message, or a uid, for any bytes.
  if (auto uid = metrics::decodeSockDiagUid(bytes); !uid && uid.error().message.empty())
    std::abort();
#elif TALLY_FUZZ_TARGET == 2
  auto parsed = config::parse(bytes, "fuzz.toml");
  if (parsed.config.has_value() == !parsed.problems.empty()) std::abort();
  if (parsed.config) {
    for (const auto& p : parsed.config->pools) {
      if (p.capacity == 0 || p.name.empty()) std::abort();
    }
  }
#elif TALLY_FUZZ_TARGET == 3
  auto h = metrics::parseHttpHead(bytes);
  if (h.state == metrics::HttpHead::State::Complete &&
      (h.target.empty() || h.target[0] != '/' || h.method.empty()))
    std::abort();
  if (h.state == metrics::HttpHead::State::Bad && (h.status < 400 || h.status > 599)) std::abort();
  if (h.state == metrics::HttpHead::State::NeedMore && bytes.size() > metrics::kMaxHttpHeadBytes)
    std::abort();
#endif
  return 0;
}
