// /proc/<pid>/{status,cgroup,stat}, /proc/meminfo, mountinfo and sysfs values.
#include <gtest/gtest.h>

#include <string>

#include "probes/meminfo.h"
#include "probes/mountinfo.h"
#include "probes/proc_cgroup.h"
#include "probes/proc_stat.h"
#include "probes/proc_status.h"
#include "probes/sysfs_value.h"

namespace tally::probes {
namespace {

using namespace std::string_literals;

// A real /proc/<pid>/status (Linux 6.12, a process in a nested PID namespace).
constexpr const char* kStatus =
    "Name:\tllama-server\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t41234\nNgid:\t0\n"
    "Pid:\t41234\nPPid:\t41200\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\n"
    "Gid:\t1000\t1000\t1000\t1000\nFDSize:\t256\nGroups:\t1000 \nNStgid:\t41234\t17\t1\n"
    "NSpid:\t41234\t17\t1\nNSpgid:\t41234\t17\t1\nNSsid:\t41200\t1\t0\nVmPeak:\t  123456 kB\n";

TEST(ProcStatus, RealSample) {
  auto s = parseProcStatus(kStatus);
  EXPECT_EQ(s.name, "llama-server");
  EXPECT_EQ(s.uidReal, 1000u);
  EXPECT_EQ(s.uidEffective, 1000u);
  EXPECT_EQ(s.uidSaved, 1000u);
  EXPECT_EQ(s.uidFs, 1000u);
  EXPECT_EQ(s.nspid, (std::vector<std::uint64_t>{41234, 17, 1}));
}

TEST(ProcStatus, CommWithBlanksAndColon) {
  auto s = parseProcStatus("Name:\tkworker/0:1 x y\nNSpid:\t5\n");
  EXPECT_EQ(s.name, "kworker/0:1 x y");
  EXPECT_EQ(s.nspid, (std::vector<std::uint64_t>{5}));
}

TEST(ProcStatus, HostileInput) {
  EXPECT_FALSE(parseProcStatus("").name.has_value());
  auto s = parseProcStatus("Name:\tx\nUid:\t1\t2\t3\nNSpid:\t1\tjunk\n");
  EXPECT_FALSE(s.uidReal.has_value());  // three fields is not a Uid line
  EXPECT_TRUE(s.nspid.empty());
  s = parseProcStatus("Uid:\t4294967296\t0\t0\t0\nNSpid:\t99999999999999999999\n");
  EXPECT_FALSE(s.uidReal.has_value());
  EXPECT_TRUE(s.nspid.empty());
  s = parseProcStatus("Name:\ta\0b\nUid:\t0\t0\t0\t0\r\n"s);
  EXPECT_FALSE(s.name.has_value());
  EXPECT_EQ(s.uidFs, 0u);
  std::string deep = "NSpid:";
  for (int i = 0; i < 40; ++i) deep += "\t" + std::to_string(i + 1);
  EXPECT_TRUE(parseProcStatus(deep).nspid.empty());  // deeper than the kernel allows
  EXPECT_EQ(parseProcStatus("Name:\tfirst\nName:\tsecond\n").name, "first");
}

TEST(ProcStatus, HundredKiBLineAndCrlf) {
  std::string big = "Groups:\t" + std::string(100 * 1024, '1') + "\n";
  auto s = parseProcStatus("Name:\tx\r\n" + big + "NSpid:\t7\t1\r\n");
  EXPECT_EQ(s.name, "x");
  EXPECT_EQ(s.nspid, (std::vector<std::uint64_t>{7, 1}));
}

TEST(ProcCgroup, PureV2) {
  auto c = parseProcCgroup("0::/system.slice/llama.service\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->path, "/system.slice/llama.service");
  EXPECT_FALSE(c->deleted);
  EXPECT_FALSE(c->outsideNamespace);
}

TEST(ProcCgroup, HybridHostPicksV2Line) {
  auto c = parseProcCgroup(
      "12:memory:/user.slice\n11:cpu,cpuacct:/\n1:name=systemd:/user.slice/x.scope\n"
      "0::/user.slice/user-1000.slice/session-2.scope\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->path, "/user.slice/user-1000.slice/session-2.scope");
}

TEST(ProcCgroup, DeletedAndForeignNamespace) {
  auto c = parseProcCgroup("0::/tally.slice/tally-7.slice/tally-7.scope (deleted)\n");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->deleted);
  EXPECT_EQ(c->path, "/tally.slice/tally-7.slice/tally-7.scope");
  c = parseProcCgroup("0::/../../system.slice/docker-abc.scope\n");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->outsideNamespace);
  EXPECT_EQ(c->path, "/../../system.slice/docker-abc.scope");
  c = parseProcCgroup("0::/a:b c\r\n");  // ':' and blanks are legal in cgroup names
  ASSERT_TRUE(c);
  EXPECT_EQ(c->path, "/a:b c");
}

TEST(ProcCgroup, HundredKiBPath) {
  std::string path = "/" + std::string(100 * 1024, 'a');
  auto c = parseProcCgroup("1:name=systemd:/x\n0::" + path + "\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->path, path);
}

TEST(ProcCgroup, HostileInput) {
  EXPECT_FALSE(parseProcCgroup(""));
  EXPECT_FALSE(parseProcCgroup("4:memory:/x\n"));  // pure v1
  EXPECT_FALSE(parseProcCgroup("0::\n"));
  EXPECT_FALSE(parseProcCgroup("0::relative\n"));
  EXPECT_FALSE(parseProcCgroup("0::/a\0b\n"s));
  EXPECT_FALSE(parseProcCgroup("0:"));
}

TEST(ProcStat, StartTimeAfterHostileComm) {
  // comm "a) b (c" holds blanks and both parens: fields count from the last ')'.
  std::string stat =
      "4321 (a) b (c) S 1 4321 4321 0 -1 4194560 5 0 0 0 1 2 0 0 20 0 3 0 987654 1000 10 1";
  auto s = parseProcStat(stat);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->startTimeTicks, 987654u);
}

TEST(ProcStat, HundredKiBCommAndCrlf) {
  std::string comm(100 * 1024, ')');
  auto s = parseProcStat("9 (" + comm + ") R 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0\r\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->startTimeTicks, 4242u);
  EXPECT_EQ(s->state, 'R');
}

TEST(ProcStat, HostileInput) {
  EXPECT_FALSE(parseProcStat(""));
  EXPECT_FALSE(parseProcStat("12 (x) S 1 2 3"));  // truncated
  EXPECT_FALSE(parseProcStat("12 x S 1"));
  EXPECT_FALSE(
      parseProcStat("12 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99999999999999999999999 0"));
  EXPECT_FALSE(parseProcStat(")("));
}

TEST(MemInfo, Values) {
  auto m = parseMemInfo(
      "MemTotal:       131072000 kB\nMemFree:  1 kB\nMemAvailable:   65536000 kB\n"
      "GPUActive:       2048 kB\nHugePages_Total:       0\n");
  EXPECT_EQ(m.memTotal, 131072000ull * 1024);
  EXPECT_EQ(m.memAvailable, 65536000ull * 1024);
  EXPECT_EQ(m.gpuActive, 2048u * 1024);
  EXPECT_FALSE(m.gpuReclaim.has_value());
  EXPECT_FALSE(parseMemInfo("MemAvailable: 18014398509481984 kB\n").memAvailable.has_value());
  EXPECT_FALSE(parseMemInfo("MemAvailable: lots kB\n").memAvailable.has_value());
}

TEST(Mountinfo, HybridHost) {
  auto mounts = parseMountinfo(
      "30 24 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
      "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
      "41 30 0:38 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "42 30 0:39 / /mnt/with\\040space rw - ext4 /dev/vda rw\n"
      "garbage\n");
  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_EQ(mounts[1].fsType, "cgroup2");
  EXPECT_EQ(mounts[1].mountPoint, "/sys/fs/cgroup/unified");
  EXPECT_EQ(mounts[2].superOptions, "rw,memory");
  EXPECT_EQ(mounts[3].mountPoint, "/mnt/with space");
}

TEST(SysfsValue, Numbers) {
  EXPECT_EQ(parseSysfsU64("103079215104\n"), 103079215104u);
  EXPECT_EQ(parseSysfsI64("-1\n"), -1);
  EXPECT_FALSE(parseSysfsU64("-1\n"));
  EXPECT_FALSE(parseSysfsU64(""));
  EXPECT_FALSE(parseSysfsU64("18446744073709551616"));
  auto d = parseDevNumber("226:128\n");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->major, 226u);
  EXPECT_EQ(d->minor, 128u);
  EXPECT_FALSE(parseDevNumber("226"));
  EXPECT_FALSE(parseDevNumber("226:4294967296"));
}

}  // namespace
}  // namespace tally::probes
