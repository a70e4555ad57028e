// The real daemon against hostile files: a config that is a device, FIFO or
// huge, a damaged ledger, directories others can write, a planted symlink.
// The fixture: hostile_daemon_fixture.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "fs/root.h"
#include "hostile_daemon_fixture.h"
#include "support/process.h"

namespace tally {
namespace {

using namespace tally::livehostile;

// Why 7: a config that is a device (or huge) fails at once.
// "At once" is a fact about bytes, not seconds: a config that is not a
// regular file is refused before a single byte of it is read. A FIFO holding
// 4 KiB that tally would have to drain stands in for /dev/zero: after tally
// exits every byte is still there (and a tally that read until EOF would
// wait on it forever, the test's own timeout catching that).
TEST(HostileConfig, DevZeroIsRefusedAtOnce) {
  for (auto args : {std::vector<std::string>{TALLY_BINARY, "config", "check", "/dev/zero"},
                    std::vector<std::string>{TALLY_BINARY, "daemon", "--config", "/dev/zero"}}) {
    auto r = runProgram(args);
    EXPECT_EQ(r.exitCode(), 1) << r.err;
    EXPECT_NE(r.err.find("is not a regular file"), std::string::npos) << r.err;
  }
  TempDir fifoDir;
  std::string fifo = fifoDir.path() + "/config.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Held open read-write here: tally's open never blocks, and the FIFO keeps
  // what is written to it until somebody reads.
  UniqueFd held(::open(fifo.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(held.valid());
  const std::string bytes(4096, '#');
  ASSERT_EQ(::write(held.get(), bytes.data(), bytes.size()), 4096);
  for (auto args : {std::vector<std::string>{TALLY_BINARY, "config", "check", fifo},
                    std::vector<std::string>{TALLY_BINARY, "daemon", "--config", fifo}}) {
    auto r = runProgram(args);
    EXPECT_EQ(r.exitCode(), 1) << r.err;
    EXPECT_NE(r.err.find("is not a regular file"), std::string::npos) << r.err;
  }
  char back[8192];
  EXPECT_EQ(::read(held.get(), back, sizeof back), 4096) << "tally read from a FIFO it refused";
  TempDir dir;
  std::string huge = dir.path() + "/huge.toml";
  writeFile(huge, std::string(2 << 20, '#'));
  auto r = runProgram({TALLY_BINARY, "config", "check", huge});
  EXPECT_EQ(r.exitCode(), 1);
  EXPECT_NE(r.err.find("larger than 1024 KiB"), std::string::npos) << r.err;
}

// Why 11: a 4 KiB page overwritten in the ledger. verify says so (not
// "intact"), and the daemon does not start granting on it. A state dir
// another user owns is refused.
TEST_F(HostileDaemon, ADamagedLedgerIsSeenAndTheDaemonFailsClosed) {
  start();
  for (int i = 0; i < 200; ++i) {
    auto c = daemon->client();
    rpc::api::Acquire a;
    a.declared.pools = {"gpu"};
    a.declared.declaration.gpuMemoryMax = GiB;
    a.declared.declaration.attributes = {{"pad", std::string(200, 'p')}};
    auto m = c.call(a, {}, 2000);
    ASSERT_TRUE(m && m->ok);
    ASSERT_TRUE(c.call(rpc::api::Release{{m->result["lease"].get<std::string>()}}, {}, 2000));
  }
  ASSERT_EQ(daemon->stop().exitCode(), 0);
  auto ok = runProgram({TALLY_BINARY, "ledger", "verify", "--config", daemon->config()});
  ASSERT_EQ(ok.exitCode(), 0) << ok.out << ok.err;
  // Checkpointed into the main file by the clean stop; overwrite page 3.
  std::string db = daemon->stateDir() + "/ledger.sqlite";
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 * 4096);
    std::string garbage(4096, '\xa5');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto bad = runProgram({TALLY_BINARY, "ledger", "verify", "--config", daemon->config()});
  EXPECT_NE(bad.exitCode(), 0) << bad.out;
  EXPECT_EQ(bad.out.find("intact:"), std::string::npos) << bad.out;
  EXPECT_TRUE(bad.out.find("damaged") != std::string::npos ||
              bad.err.find("malformed") != std::string::npos)
      << bad.out << bad.err;
  auto refused = runProgram(
      {TALLY_BINARY, "--cgroup-root", host.cgroupRoot(), "daemon", "--config", daemon->config()});
  EXPECT_EQ(refused.exitCode(), 3) << refused.err;
  EXPECT_TRUE(refused.err.find("damaged") != std::string::npos ||
              refused.err.find("malformed") != std::string::npos)
      << refused.err;

  TempDir other;
  std::string state = other.path() + "/state";
  makeDirs(state);
  ASSERT_EQ(::chown(state.c_str(), 1000, 1000), 0);
  writeFile(other.path() + "/tally.toml", "[daemon]\nsocket = \"" + other.path() +
                                              "/s.sock\"\nstate_dir = \"" + state +
                                              "\"\n[pools.one]\ncapacity = 1\n");
  auto theirs = runProgram({TALLY_BINARY, "daemon", "--config", other.path() + "/tally.toml"});
  EXPECT_EQ(theirs.exitCode(), 3);
  EXPECT_NE(theirs.err.find("owned by uid 1000"), std::string::npos) << theirs.err;
  EXPECT_FALSE(fs::Root::open(state)->exists("ledger.sqlite"));  // nothing was created there
}

// Why 5, every directory root writes in: the state dir, the socket's
// directory and the textfile's directory, each refused at start when another
// user could swap what is in it.
TEST(HostileDirectories, EachDirectoryRootWritesInMustBeTrusted) {
  TempDir dir;
  std::string open = dir.path() + "/open";  // writable by everyone, no sticky bit
  makeDirs(open);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  std::string mine = dir.path() + "/mine";
  makeDirs(mine);
  struct Case {
    std::string socket, state, textfile, expect;
  } cases[] = {
      {open + "/tally.sock", mine + "/state", "", "[daemon] socket's directory"},
      {mine + "/tally.sock", open + "/state", "",
       "[daemon] state_dir"},  // below an open directory: the ancestor is refused
      {mine + "/tally.sock", open, "", "[daemon] state_dir"},
      {mine + "/tally.sock", mine + "/state", open + "/tally.prom", "metrics textfile directory"},
  };
  for (const auto& c : cases) {
    std::string toml = "[daemon]\nsocket = \"" + c.socket + "\"\nstate_dir = \"" + c.state +
                       "\"\n" +
                       (c.textfile.empty() ? "" : "metrics_textfile = \"" + c.textfile + "\"\n") +
                       "[pools.one]\ncapacity = 1\n";
    writeFile(dir.path() + "/tally.toml", toml);
    auto r = runProgram({TALLY_BINARY, "daemon", "--config", dir.path() + "/tally.toml"});
    EXPECT_EQ(r.exitCode(), 3) << toml << r.err;
    EXPECT_NE(r.err.find("writable by everyone"), std::string::npos) << toml << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << toml << r.err;
  }
  EXPECT_FALSE(fs::Root::open(open)->exists("ledger.sqlite"));
}

// Why 5, live: the daemon's textfile with the old temporary name planted as a symlink.
TEST_F(HostileDaemon, TheTextfileIsNeverWrittenThroughASymlink) {
  std::string textDir = dir.path() + "/collector";
  makeDirs(textDir);
  ASSERT_EQ(::chmod(textDir.c_str(), 01777), 0);
  std::string victim = dir.path() + "/victim";
  writeFile(victim, "precious\n");
  ASSERT_EQ(::symlink(victim.c_str(), (textDir + "/tally.prom.tmp").c_str()), 0);
  start("metrics_textfile = \"" + textDir + "/tally.prom\"\n");
  ASSERT_TRUE(eventually(
      [&] { return readFile(textDir + "/tally.prom").find("tally_") != std::string::npos; }));
  EXPECT_EQ(readFile(victim), "precious\n");
  stillServing();
}

}  // namespace
}  // namespace tally
