// Trusted directories: the state dir is root's or the daemon's alone, and a
// user's symlink on the way is refused.
#include "fs/secure_dir.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "fs/root.h"
#include "support/fake_host.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;

TEST(TrustedDir, StateDirsAreRootsOrTheDaemonsAlone) {
  TempDir dir;
  std::string sticky = dir.path() + "/sticky";
  ASSERT_EQ(::mkdir(sticky.c_str(), 01777), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  EXPECT_TRUE(fs::checkTrustedDir(sticky, "socket dir", fs::DirUse::SharedSticky));
  // The ledger's directory must not be writable by others even when sticky.
  auto state = fs::checkTrustedDir(sticky, "[daemon] state_dir", fs::DirUse::Private);
  ASSERT_FALSE(state);
  EXPECT_NE(state.error().message.find("[daemon] state_dir"), std::string::npos);
  // Below a sticky /tmp-like directory, a private one is fine.
  std::string inside = sticky + "/state";
  ASSERT_EQ(::mkdir(inside.c_str(), 0700), 0);
  EXPECT_TRUE(fs::checkTrustedDir(inside, "[daemon] state_dir", fs::DirUse::Private));
  // An ancestor owned by another user could swap the whole path.
  std::string theirs = dir.path() + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((theirs + "/state").c_str(), 0700), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 4242, 4242), 0);
  auto anc = fs::checkTrustedDir(theirs + "/state", "[daemon] state_dir", fs::DirUse::Private);
  ASSERT_FALSE(anc);
  EXPECT_NE(anc.error().message.find("owned by uid 4242"), std::string::npos)
      << anc.error().message;
}

// A user's symlink in the middle of the path chooses where root writes,
// even when it leads to a directory of root's: refused, naming the link; a
// link of root's own is followed (and one inside its target is checked too).
TEST(TrustedDir, AUsersSymlinkOnTheWayIsRefused) {
  TempDir dir;
  std::string rootsOwn = dir.path() + "/etc-like";
  ASSERT_EQ(::mkdir(rootsOwn.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((rootsOwn + "/state").c_str(), 0700), 0);
  std::string sticky = dir.path() + "/tmp-like";
  ASSERT_EQ(::mkdir(sticky.c_str(), 01777), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  std::string link = sticky + "/srv";
  ASSERT_EQ(::symlink(rootsOwn.c_str(), link.c_str()), 0);
  ASSERT_EQ(::lchown(link.c_str(), 4242, 4242), 0);
  auto viaUser = fs::checkTrustedDir(link + "/state", "[daemon] state_dir", fs::DirUse::Private);
  ASSERT_FALSE(viaUser);
  EXPECT_EQ(viaUser.error().message,
            "[daemon] state_dir " + link + "/state: " + link +
                " is a symlink owned by uid 4242, so that user chooses where the daemon writes; "
                "use a path without it, or chown it to root");
  // Root's own link to the user's link: the user's is still found.
  std::string rootLink = dir.path() + "/via";
  ASSERT_EQ(::symlink(link.c_str(), rootLink.c_str()), 0);
  auto chained =
      fs::checkTrustedDir(rootLink + "/state", "[daemon] state_dir", fs::DirUse::Private);
  ASSERT_FALSE(chained);
  EXPECT_NE(chained.error().message.find(link + " is a symlink owned by uid 4242"),
            std::string::npos)
      << chained.error().message;
  // Root's own link straight to root's directory: fine.
  std::string good = dir.path() + "/good";
  ASSERT_EQ(::symlink(rootsOwn.c_str(), good.c_str()), 0);
  EXPECT_TRUE(fs::checkTrustedDir(good + "/state", "[daemon] state_dir", fs::DirUse::Private));
}

}  // namespace
}  // namespace tally
