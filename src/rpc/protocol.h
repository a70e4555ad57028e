// The daemon's wire protocol: newline-delimited JSON over a Unix stream
// socket (docs/daemon.md, "RPC reference"). Pure: framing and validation of
// bytes, no sockets, so hostile input is tested and fuzzed directly.
//
//   request  {"v":1, "id":<any>, "method":"acquire", "params":{...}}
//   reply    {"v":1, "id":<same>, "ok":true,  "result":{...}}
//            {"v":1, "id":<same>, "ok":false, "error":{"code":"...", "message":"..."}}
//   event    {"v":1, "id":<request's>, "event":"queued", ...}   (before the reply)
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tally::rpc {

inline constexpr int kProtocolVersion = 1;
// A request line longer than this is refused and skipped: the largest real
// request (a run lease's outcome record) is a few KiB.
inline constexpr std::size_t kMaxRequestBytes = 256 * 1024;
// Arrays and objects nest at most this deep in any line either side sends:
// the deepest real message (an outcome record) nests 5 levels. The check runs
// before the parser, so a line of 100,000 '[' costs one pass over its bytes
// and never reaches code that recurses per level (copy, dump, destruction).
inline constexpr std::size_t kMaxDepth = 64;

using json = nlohmann::json;

// Error codes every reply may carry.
namespace code {
inline constexpr const char* kBadJson = "bad-json";
inline constexpr const char* kTooLarge = "too-large";
inline constexpr const char* kTooDeep = "too-deep";
inline constexpr const char* kInvalidParams =
    "invalid-params";  // a field's type, size or value; the message names it
inline constexpr const char* kRateLimited = "rate-limited";
inline constexpr const char* kBusy = "busy";  // a daemon limit (connections, queue) is reached
inline constexpr const char* kBadRequest = "bad-request";
inline constexpr const char* kVersion = "unsupported-version";
inline constexpr const char* kUnknownMethod = "unknown-method";
inline constexpr const char* kForbidden = "forbidden";
inline constexpr const char* kNotFound = "not-found";
inline constexpr const char* kRefused = "refused";
inline constexpr const char* kTimeout = "timeout";
inline constexpr const char* kCancelled = "cancelled";
inline constexpr const char* kConflict = "conflict";
// The daemon cannot keep its promise now (its ledger cannot write, or holds
// damage no operator accepted): nothing changed; retry once that is fixed.
inline constexpr const char* kUnavailable = "unavailable";
inline constexpr const char* kInternal = "internal";
}  // namespace code

// Splits a byte stream into lines. A line over the limit is reported once
// (as an overflow) and its bytes are dropped up to the next newline, so one
// bad client message never grows memory or desynchronises the stream.
class LineReader {
 public:
  explicit LineReader(std::size_t maxLine = kMaxRequestBytes) : max_(maxLine) {}
  struct Line {
    std::string text;
    bool overflow = false;  // text is empty; the line was too long
  };
  void feed(std::string_view bytes);
  std::optional<Line> next();
  std::size_t buffered() const { return buf_.size(); }  // the partial line so far
  bool hasLines() const { return readyHead_ < ready_.size(); }

 private:
  std::size_t max_;
  std::string buf_;
  std::vector<Line> ready_;
  std::size_t readyHead_ = 0;
  bool discarding_ = false;
};

// Whether `text`, read as JSON, nests arrays/objects deeper than `limit`
// (brackets inside strings, escaped quotes included, do not count). Pure,
// one pass, no allocation.
bool nestsDeeperThan(std::string_view text, std::size_t limit);

struct RpcError {
  std::string code;
  std::string message;
};

struct Request {
  json id;  // echoed back; null when the client gave none
  std::string method;
  json params;  // always an object
};

// Parses and checks the envelope of one line. On failure the error carries
// the id when one could be read, so the reply can still be matched.
struct ParsedRequest {
  std::optional<Request> request;
  json id;
  RpcError error;
};
ParsedRequest parseRequest(std::string_view line);

std::string encodeReply(const json& id, const json& result);
std::string encodeError(const json& id, const RpcError& e);
std::string encodeEvent(const json& id, const std::string& event, json fields);
std::string encodeRequest(const json& id, const std::string& method, const json& params);

// A reply or event line from the daemon, as a client sees it.
struct Message {
  json id;
  std::optional<std::string> event;  // set for events
  bool ok = false;
  json result;
  RpcError error;
  json raw;
};
Result<Message> parseMessage(std::string_view line);

// The daemon's "no" as a person reads it: its sentence, never the RPC code
// alone; for a request the daemon could not read (another version of tally on
// one side) or its own internal error, what to do about it. Every client that
// prints a daemon's refusal prints this.
std::string errorSentence(const RpcError& e);

// True for the codes that mean the daemon could not read the request at all
// (not a verdict on it): this client and the daemon disagree on the protocol.
bool protocolDisagreement(std::string_view code);

}  // namespace tally::rpc
