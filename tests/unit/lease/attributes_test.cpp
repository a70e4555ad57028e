// Operator-declared attributes (--attr KEY=VALUE): their shape is checked,
// never their meaning.
#include "lease/attributes.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/fake_host.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;

TEST(Attributes, ShapeIsCheckedNotMeaning) {
  auto ok = lease::parseAttribute("context_window=32768");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first, "context_window");
  EXPECT_EQ(ok->second, "32768");
  EXPECT_TRUE(lease::parseAttribute("model="));     // an empty value is a value
  EXPECT_TRUE(lease::parseAttribute("note=a=b"));   // only the first '=' splits
  EXPECT_FALSE(lease::parseAttribute("model"));     // no '='
  EXPECT_FALSE(lease::parseAttribute("=x"));        // no key
  EXPECT_FALSE(lease::parseAttribute("9lives=x"));  // starts with a digit
  EXPECT_FALSE(lease::parseAttribute("Model=x"));   // upper case
  EXPECT_FALSE(lease::parseAttribute("a-b=x"));     // '-' is not a label character
  EXPECT_FALSE(lease::parseAttribute(std::string(33, 'k') + "=x"));
  EXPECT_TRUE(lease::parseAttribute(std::string(32, 'k') + "=x"));
  EXPECT_FALSE(lease::parseAttribute("m=" + std::string(257, 'v')));
  EXPECT_TRUE(lease::parseAttribute("m=" + std::string(256, 'v')));
  EXPECT_FALSE(lease::parseAttribute(std::string("m=a\0b", 5)));  // NUL
  EXPECT_FALSE(lease::parseAttribute("m=a\x1b[2Jb"));          // an escape sequence for a terminal
  EXPECT_TRUE(lease::parseAttribute("m=Qwen3 32B \xc3\xa9"));  // UTF-8 passes
  EXPECT_FALSE(lease::attributesFromJson(json::array()));
  EXPECT_FALSE(lease::attributesFromJson(json{{"model", 7}}));
  EXPECT_TRUE(lease::attributesFromJson(json()));
}

}  // namespace
}  // namespace tally
