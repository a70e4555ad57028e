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

// tally logs runs journalctl on a lease's job_unit: the key is the job's own
// word, taken only from a client inside that service, under its manager.
TEST(Attributes, ADetachedJobsKeysComeOnlyFromInsideTheJob) {
  using lease::jobKeysProblem;
  const std::string unit = "tally-job-0123456789ab.service";
  const std::string systemJob = "/system.slice/" + unit;
  const std::string userJob = "/user.slice/user-1000.slice/user@1000.service/app.slice/" + unit;
  EXPECT_EQ(jobKeysProblem({{"model", "qwen"}}, "/user.slice/x.scope"), std::nullopt);
  EXPECT_EQ(jobKeysProblem({{"job_unit", unit}, {"job_manager", "system"}}, systemJob),
            std::nullopt);
  EXPECT_EQ(jobKeysProblem({{"job_unit", unit}, {"job_manager", "user"}}, userJob), std::nullopt);
  EXPECT_EQ(jobKeysProblem({{"job_unit", unit}}, systemJob), std::nullopt);

  // Another user's job named from outside it.
  auto why = jobKeysProblem({{"job_unit", unit}, {"job_manager", "system"}},
                            "/user.slice/user-1001.slice/session-4.scope");
  ASSERT_TRUE(why);
  EXPECT_EQ(*why,
            "attribute 'job_unit' = 'tally-job-0123456789ab.service' is the detached job's own "
            "word, and the asking process is not in that service (its cgroup: "
            "'/user.slice/user-1001.slice/session-4.scope'): no lease names another job's "
            "output. tally run --pool P --detach sets it from inside the job");
  // A cgroup below the job's, or one whose name only ends like it, is not it.
  EXPECT_TRUE(jobKeysProblem({{"job_unit", unit}}, systemJob + "/sub"));
  EXPECT_TRUE(jobKeysProblem({{"job_unit", unit}}, "/system.slice/x" + unit));
  EXPECT_TRUE(jobKeysProblem({{"job_unit", unit}}, ""));  // unreadable: refused
  EXPECT_NE(jobKeysProblem({{"job_unit", unit}}, "")->find("(its cgroup: 'unreadable')"),
            std::string::npos);
  // Not a detached job's unit at all: another service's journal.
  why = jobKeysProblem({{"job_unit", "sshd.service"}}, "/system.slice/sshd.service");
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("names a detached job's service (tally-job-*.service)"), std::string::npos)
      << *why;
  EXPECT_TRUE(
      jobKeysProblem({{"job_unit", "tally-job-.service"}}, "/system.slice/tally-job-.service"));
  // The manager is the tree's, not the client's say.
  why = jobKeysProblem({{"job_unit", unit}, {"job_manager", "user"}}, systemJob);
  ASSERT_TRUE(why);
  EXPECT_EQ(*why,
            "attribute 'job_manager' = 'user', but tally-job-0123456789ab.service runs under the "
            "system manager (its cgroup: '/system.slice/tally-job-0123456789ab.service')");
  EXPECT_TRUE(jobKeysProblem({{"job_unit", unit}, {"job_manager", "system"}}, userJob));
  EXPECT_TRUE(jobKeysProblem({{"job_manager", "system"}}, systemJob));  // a manager of nothing
}

}  // namespace
}  // namespace tally
