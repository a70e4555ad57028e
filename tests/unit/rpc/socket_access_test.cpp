// The sentence a refused client reads: what to do, for each reason the
// kernel said EACCES.
#include "rpc/socket_access.h"

#include <gtest/gtest.h>

namespace tally::rpc {
namespace {

SocketAccess facts(gid_t gid, std::string group, bool listed, bool session) {
  SocketAccess f;
  f.path = "/run/tally/tally.sock";
  f.socketGid = gid;
  f.groupName = std::move(group);
  f.userName = "bob";
  f.listedInGroup = listed;
  f.sessionHasGroup = session;
  return f;
}

TEST(SocketAccess, OutsideTheGroupSaysHowToJoinIt) {
  EXPECT_EQ(socketAccessHint(facts(998, "tally", false, false)),
            "; the socket is group tally's (mode 0660): ask an administrator to add you "
            "(sudo usermod -aG tally bob), then log in again; or use sudo");
}

TEST(SocketAccess, JoinedAfterLoginSaysLogInAgain) {
  EXPECT_EQ(socketAccessHint(facts(998, "tally", true, false)),
            "; you are in group tally but this session started before you joined it: log out "
            "and in again (or run `newgrp tally`)");
}

TEST(SocketAccess, ARootOwnedSocketSaysWhichKeyOpensIt) {
  EXPECT_EQ(socketAccessHint(facts(0, "root", false, false)),
            "; only root may use this daemon (its socket's group is root): use sudo, or ask an "
            "administrator to set [daemon] socket_group = \"tally\" in its config (the Debian "
            "package does)");
}

TEST(SocketAccess, AGroupWithoutANameIsItsNumber) {
  SocketAccess f = facts(4242, "", false, false);
  f.userName.clear();
  EXPECT_EQ(socketAccessHint(f),
            "; the socket is group gid 4242's (mode 0660): ask an administrator to add you "
            "(sudo usermod -aG 4242 $USER), then log in again; or use sudo");
}

}  // namespace
}  // namespace tally::rpc
