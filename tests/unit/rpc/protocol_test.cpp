#include "rpc/protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tally {
namespace {

using rpc::LineReader;

std::vector<LineReader::Line> drain(LineReader& r) {
  std::vector<LineReader::Line> out;
  while (auto l = r.next()) out.push_back(*l);
  return out;
}

TEST(LineReader, ReassemblesLinesSplitAcrossReads) {
  LineReader r(64);
  r.feed("{\"a\":");
  EXPECT_TRUE(drain(r).empty());
  r.feed("1}\n{\"b\":2}\r\n\n{\"c\"");
  auto lines = drain(r);
  ASSERT_EQ(lines.size(), 2u);  // the blank line is a keep-alive
  EXPECT_EQ(lines[0].text, "{\"a\":1}");
  EXPECT_EQ(lines[1].text, "{\"b\":2}");  // CR stripped
  EXPECT_EQ(r.buffered(), 4u);
}

TEST(LineReader, AnOversizedLineIsReportedOnceAndSkipped) {
  LineReader r(16);
  r.feed(std::string(10, 'x'));
  r.feed(std::string(10, 'y'));  // 20 > 16: overflow, discard to the newline
  r.feed(std::string(1000, 'z'));
  r.feed("zz\n{\"ok\":1}\n");
  auto lines = drain(r);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0].overflow);
  EXPECT_FALSE(lines[1].overflow);
  EXPECT_EQ(lines[1].text, "{\"ok\":1}");
  EXPECT_EQ(r.buffered(), 0u);
  // Memory stays bounded however much arrives without a newline.
  LineReader big(1024);
  for (int i = 0; i < 1024; ++i) big.feed(std::string(1024, 'a'));
  EXPECT_LE(big.buffered(), 1024u);
  big.feed(std::string_view("\0\n", 2));
  auto l = drain(big);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_TRUE(l[0].overflow);
}

TEST(RpcRequest, ValidatesTheEnvelope) {
  auto ok = rpc::parseRequest(R"({"v":1,"id":7,"method":"pools"})");
  ASSERT_TRUE(ok.request);
  EXPECT_EQ(ok.request->method, "pools");
  EXPECT_EQ(ok.request->id, 7);
  EXPECT_TRUE(ok.request->params.is_object());

  struct Case {
    const char* line;
    const char* code;
  } cases[] = {
      {"not json", rpc::code::kBadJson},
      {"[1,2]", rpc::code::kBadRequest},
      {R"({"id":1,"method":"pools"})", rpc::code::kBadRequest},
      {R"({"v":2,"id":1,"method":"pools"})", rpc::code::kVersion},
      {R"({"v":"1","id":1,"method":"pools"})", rpc::code::kBadRequest},
      {R"({"v":1,"id":1})", rpc::code::kBadRequest},
      {R"({"v":1,"id":1,"method":5})", rpc::code::kBadRequest},
      {R"({"v":1,"id":1,"method":"pools","params":[]})", rpc::code::kBadRequest},
      {"{\"v\":1,\"method\":\"p\xff\"}", rpc::code::kBadJson},
  };
  for (const auto& c : cases) {
    auto p = rpc::parseRequest(c.line);
    EXPECT_FALSE(p.request) << c.line;
    EXPECT_EQ(p.error.code, c.code) << c.line;
  }
  // The id survives a bad request, so the error reply can be matched.
  EXPECT_EQ(rpc::parseRequest(R"({"v":9,"id":"abc","method":"x"})").id, "abc");
}

TEST(RpcEncoding, RepliesAndEventsRoundTrip) {
  auto reply = rpc::parseMessage(rpc::encodeReply(3, {{"lease", "abc"}}));
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->ok);
  EXPECT_EQ(reply->result["lease"], "abc");
  auto err = rpc::parseMessage(rpc::encodeError(3, {rpc::code::kForbidden, "no"}));
  EXPECT_FALSE(err->ok);
  EXPECT_EQ(err->error.code, "forbidden");
  auto ev = rpc::parseMessage(rpc::encodeEvent(3, "queued", {{"position", 2}}));
  ASSERT_TRUE(ev->event);
  EXPECT_EQ(*ev->event, "queued");
  EXPECT_EQ(ev->raw["position"], 2);
  // Invalid UTF-8 from a client is replaced in the echo, never thrown.
  std::string echoed = rpc::encodeError(std::string("\xff\xfe"), {rpc::code::kBadRequest, "x"});
  EXPECT_EQ(echoed.back(), '\n');
  EXPECT_FALSE(rpc::parseMessage("[]"));
}

}  // namespace
}  // namespace tally
