// Where the metrics go: the listen address (loopback unless the config says
// otherwise) and the textfile, replaced whole.
#include "daemon/metrics_publisher.h"

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

TEST(MetricsListen, LoopbackOnly) {
  auto v4 = config::parseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  auto v6 = config::parseListenAddress("[::1]:9464");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(config::parseListenAddress("localhost:0")->host, "127.0.0.1");
  EXPECT_TRUE(config::parseListenAddress("127.1.2.3:1"));
  auto open = config::parseListenAddress("0.0.0.0:9464");
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("tally serves metrics on loopback unless"), std::string::npos)
      << open.error().message;
  EXPECT_FALSE(config::parseListenAddress("192.168.1.5:9464"));
  EXPECT_FALSE(config::parseListenAddress("[::]:9464"));
  EXPECT_FALSE(config::parseListenAddress("127.0.0.1"));
  EXPECT_FALSE(config::parseListenAddress("127.0.0.1:65536"));
  EXPECT_FALSE(config::parseListenAddress("127.0.0.1:99999999999999999999"));
  EXPECT_FALSE(config::parseListenAddress("127.0.0.1:-1"));
  EXPECT_FALSE(config::parseListenAddress("example.com:80"));
  EXPECT_FALSE(config::parseListenAddress("[::1:80"));
}

// A fleet's Prometheus scraping every node: only when the config says so in
// so many words, and the refusal says how.
TEST(MetricsListen, BeyondLoopbackOnlyWhenTheConfigSaysSo) {
  auto refused = config::parseListenAddress("192.0.2.7:9464");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("daemon.metrics_beyond_loopback = true"),
            std::string::npos)
      << refused.error().message;
  for (const char* at : {"0.0.0.0:9464", "192.0.2.7:9464", "[::]:9464", "[2001:db8::7]:9464",
                         "127.0.0.1:9464", "localhost:9464"}) {
    auto ok = config::parseListenAddress(at, true);
    ASSERT_TRUE(ok) << at << ": " << ok.error().message;
  }
  EXPECT_EQ(config::parseListenAddress("0.0.0.0:9464", true)->host, "0.0.0.0");
  EXPECT_FALSE(config::isLoopback(*config::parseListenAddress("0.0.0.0:9464", true)));
  EXPECT_TRUE(config::isLoopback(*config::parseListenAddress("[::1]:1", true)));
  auto name = config::parseListenAddress("node7.example.com:9464", true);
  ASSERT_FALSE(name);
  EXPECT_NE(name.error().message.find("no names: no DNS at start"), std::string::npos)
      << name.error().message;
  EXPECT_FALSE(config::parseListenAddress("0.0.0.0", true));
  EXPECT_FALSE(config::parseListenAddress("0.0.0.0:65536", true));
}

TEST(MetricsTextfile, ReplacedWholeAndErrorsNameTheFile) {
  TempDir dir;
  std::string path = dir.path() + "/tally.prom";
  auto t = daemon::Textfile::open(path);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(t->write("a 1\n"));
  ASSERT_TRUE(t->write("b 2\n"));
  EXPECT_EQ(readFile(path), "b 2\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  auto names = fs::Root::open(dir.path())->list("");
  EXPECT_EQ(*names, std::vector<std::string>{"tally.prom"});  // no temporary left behind
  // Over its size bound: refused, the last one stays.
  auto big = t->write(std::string(daemon::Textfile::kMaxBytes + 1, '#'));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the textfile's 4 MiB"), std::string::npos)
      << big.error().message;
  EXPECT_EQ(readFile(path), "b 2\n");
  EXPECT_EQ(*fs::Root::open(dir.path())->list(""), std::vector<std::string>{"tally.prom"});
  auto bad = daemon::Textfile::open(dir.path() + "/missing/tally.prom");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("missing"), std::string::npos) << bad.error().message;
}

// Why 5: a user who can write the textfile's directory plants the names the
// daemon writes as symlinks to a victim file. The victim is never written.
TEST(MetricsTextfile, NeverWritesThroughAPlantedSymlink) {
  TempDir dir;
  std::string victim = dir.path() + "/victim";
  writeFile(victim, "precious\n");
  std::string textDir = dir.path() + "/textfile";
  ASSERT_EQ(::mkdir(textDir.c_str(), 01777),
            0);  // sticky and world-writable, like a shared collector dir
  ASSERT_EQ(::chmod(textDir.c_str(), 01777), 0);
  std::string path = textDir + "/tally.prom";
  for (const char* planted : {"/tally.prom.tmp", "/.tally.prom.tmp"})
    ASSERT_EQ(::symlink(victim.c_str(), (textDir + planted).c_str()), 0);
  auto t = daemon::Textfile::open(path);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(t->write("tally_up 1\n"));
  EXPECT_EQ(readFile(victim), "precious\n");
  EXPECT_EQ(readFile(path), "tally_up 1\n");
  // The final name planted as a symlink is replaced (rename swaps the name), not followed.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);
  ASSERT_TRUE(t->write("tally_up 2\n"));
  EXPECT_EQ(readFile(victim), "precious\n");
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(MetricsTextfile, ADirectoryOthersCanRewriteIsRefused) {
  TempDir dir;
  std::string open = dir.path() + "/open";
  ASSERT_EQ(::mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);  // writable by all, no sticky bit
  auto t = daemon::Textfile::open(open + "/tally.prom");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("writable by everyone"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("sticky"), std::string::npos) << t.error().message;
  std::string theirs = dir.path() + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 4242, 4242), 0);
  auto u = daemon::Textfile::open(theirs + "/tally.prom");
  ASSERT_FALSE(u);
  EXPECT_NE(u.error().message.find("owned by uid 4242"), std::string::npos) << u.error().message;
}

}  // namespace
}  // namespace tally
