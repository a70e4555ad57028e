#include "rpc/protocol.h"

#include <fmt/format.h>

namespace tally::rpc {

void LineReader::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    std::string_view chunk = bytes.substr(0, nl);
    if (discarding_) {
      if (nl == std::string_view::npos) return;
      discarding_ = false;
    } else if (buf_.size() + chunk.size() > max_) {
      buf_.clear();
      ready_.push_back(Line{{}, true});
      discarding_ = nl == std::string_view::npos;
      if (discarding_) return;
    } else {
      buf_.append(chunk);
      if (nl == std::string_view::npos) return;
      if (!buf_.empty() && buf_.back() == '\r') buf_.pop_back();
      ready_.push_back(Line{std::move(buf_), false});
      buf_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

std::optional<LineReader::Line> LineReader::next() {
  while (readyHead_ < ready_.size()) {
    Line l = std::move(ready_[readyHead_++]);
    if (readyHead_ == ready_.size()) {
      ready_.clear();
      readyHead_ = 0;
    }
    if (!l.overflow && l.text.empty()) continue;  // blank lines are keep-alives
    return l;
  }
  return std::nullopt;
}

bool nestsDeeperThan(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

ParsedRequest parseRequest(std::string_view line) {
  ParsedRequest out;
  if (nestsDeeperThan(line, kMaxDepth)) {
    out.error = {
        code::kTooDeep,
        fmt::format("the request nests arrays/objects deeper than {} levels; it was not parsed",
                    kMaxDepth)};
    return out;
  }
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) {
    out.error = {code::kBadJson, "the request is not valid JSON (one JSON object per line)"};
    return out;
  }
  if (!j.is_object()) {
    out.error = {code::kBadRequest, "the request must be a JSON object"};
    return out;
  }
  if (j.contains("id")) out.id = j["id"];
  if (!j.contains("v") || !j["v"].is_number_integer()) {
    out.error = {code::kBadRequest, fmt::format("the request needs \"v\":{} (the protocol version)",
                                                kProtocolVersion)};
    return out;
  }
  if (j["v"].get<std::int64_t>() != kProtocolVersion) {
    out.error = {code::kVersion,
                 fmt::format("protocol version {} is not spoken here; this daemon speaks {}",
                             j["v"].dump(), kProtocolVersion)};
    return out;
  }
  if (!j.contains("method") || !j["method"].is_string()) {
    out.error = {code::kBadRequest, "the request needs a \"method\" string"};
    return out;
  }
  Request r;
  r.id = out.id;
  r.method = j["method"].get<std::string>();
  if (j.contains("params")) {
    if (!j["params"].is_object()) {
      out.error = {code::kBadRequest, "\"params\" must be an object"};
      return out;
    }
    r.params = j["params"];
  } else {
    r.params = json::object();
  }
  out.request = std::move(r);
  return out;
}

namespace {
std::string line(const json& j) {
  // Invalid UTF-8 from a hostile peer is replaced, never thrown.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}
}  // namespace

std::string encodeReply(const json& id, const json& result) {
  return line(json{{"v", kProtocolVersion}, {"id", id}, {"ok", true}, {"result", result}});
}

std::string encodeError(const json& id, const RpcError& e) {
  return line(json{{"v", kProtocolVersion},
                   {"id", id},
                   {"ok", false},
                   {"error", {{"code", e.code}, {"message", e.message}}}});
}

std::string encodeEvent(const json& id, const std::string& event, json fields) {
  if (!fields.is_object()) fields = json::object();
  fields["v"] = kProtocolVersion;
  fields["id"] = id;
  fields["event"] = event;
  return line(fields);
}

std::string encodeRequest(const json& id, const std::string& method, const json& params) {
  return line(json{{"v", kProtocolVersion}, {"id", id}, {"method", method}, {"params", params}});
}

Result<Message> parseMessage(std::string_view text) {
  if (nestsDeeperThan(text, kMaxDepth))
    return Error{0, "the daemon sent a message nested deeper than the protocol allows"};
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Error{0, "the daemon sent something that is not a JSON object"};
  Message m;
  m.raw = j;
  if (j.contains("id")) m.id = j["id"];
  if (j.contains("event") && j["event"].is_string()) {
    m.event = j["event"].get<std::string>();
    return m;
  }
  m.ok = j.contains("ok") && j["ok"].is_boolean() && j["ok"].get<bool>();
  if (m.ok) {
    m.result = j.contains("result") ? j["result"] : json::object();
  } else {
    const json& e = j.contains("error") ? j["error"] : json::object();
    m.error.code = e.is_object() && e.contains("code") && e["code"].is_string()
                       ? e["code"].get<std::string>()
                       : "unknown";
    m.error.message = e.is_object() && e.contains("message") && e["message"].is_string()
                          ? e["message"].get<std::string>()
                          : "(no message)";
  }
  return m;
}

bool protocolDisagreement(std::string_view c) {
  return c == code::kBadJson || c == code::kTooLarge || c == code::kTooDeep ||
         c == code::kBadRequest || c == code::kVersion || c == code::kUnknownMethod;
}

std::string errorSentence(const RpcError& e) {
  std::string said = e.message.empty() ? "no reason given" : e.message;
  if (protocolDisagreement(e.code))
    said += fmt::format(
        ". The daemon could not read this client's request ({}): run the same tally version on "
        "both sides (tally --version here; systemctl status tally names the daemon's binary)",
        e.code);
  else if (e.code == code::kInternal)
    said += ". That is a bug in the daemon: please report it with its journal";
  return said;
}

}  // namespace tally::rpc
