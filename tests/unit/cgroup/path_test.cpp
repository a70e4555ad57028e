// A cgroup path has one spelling: every alias of it is made canonical.
#include "cgroup/path.h"

#include <gtest/gtest.h>

namespace tally {
namespace {

TEST(CgroupPath, AliasesBecomeOneSpelling) {
  for (const char* alias : {"/system.slice/x.service", "/system.slice/x.service/",
                            "//system.slice//x.service", "/system.slice/./x.service",
                            "/./system.slice/x.service/.", "/system.slice/x.service/././"}) {
    auto c = cgroup::canonicalPath(alias);
    ASSERT_TRUE(c) << alias;
    EXPECT_EQ(*c, "/system.slice/x.service") << alias;
  }
  EXPECT_EQ(*cgroup::canonicalPath("/"), "/");
  EXPECT_EQ(*cgroup::canonicalPath("//."), "/");
}

TEST(CgroupPath, WhatIsNotAPathIsRefusedWithTheReason) {
  EXPECT_NE(cgroup::canonicalPath("system.slice").error().message.find("absolute"),
            std::string::npos);
  EXPECT_NE(cgroup::canonicalPath("").error().message.find("absolute"), std::string::npos);
  EXPECT_NE(cgroup::canonicalPath("/a/../etc").error().message.find(".."), std::string::npos);
  EXPECT_NE(cgroup::canonicalPath("/a/..").error().message.find(".."), std::string::npos);
  EXPECT_FALSE(cgroup::canonicalPath(std::string_view("/a\0b", 4)));
  EXPECT_FALSE(cgroup::canonicalPath("/a\nb"));
  EXPECT_FALSE(cgroup::canonicalPath("/" + std::string(cgroup::kMaxPathBytes, 'x')));
  // A name that merely contains dots is a name.
  EXPECT_EQ(*cgroup::canonicalPath("/a/...b/..c"), "/a/...b/..c");
}

TEST(CgroupPath, WithinIsByComponentNotByPrefix) {
  EXPECT_TRUE(cgroup::isWithin("/a/b", "/a"));
  EXPECT_TRUE(cgroup::isWithin("/a", "/a"));
  EXPECT_FALSE(cgroup::isWithin("/ab", "/a"));
  EXPECT_FALSE(cgroup::isWithin("/a", "/a/b"));
  EXPECT_TRUE(cgroup::isWithin("/anything", "/"));
}

}  // namespace
}  // namespace tally
