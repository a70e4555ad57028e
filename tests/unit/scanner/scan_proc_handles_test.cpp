// The scanner's processes held open across a meter's samples (ProcHandles):
// a reused pid is read as the new process, never as the old one.
#include <gtest/gtest.h>

#include <cstdlib>

#include "scanner/scan.h"
#include "support/fake_host.h"
#include "support/scenario.h"

namespace tally::scanner {
namespace {

// A meter's processes held open across samples (ProcHandles): the same
// process is read through its held directory, its metadata read once; a pid
// that now names another process is read as that new process, never as the
// old one; an exited process is let go.
TEST(ProcHandles, AReusedPidIsNeverMeteredAsTheOldProcess) {
  using namespace tally::testing;
  FakeHost host;
  FakeDevice dev;
  host.addDevice(dev);
  auto gpuProcess = [&](std::uint64_t start, const std::string& comm, std::uint64_t clientId,
                        std::uint64_t gttKiB) {
    FakeProcess p;
    p.pid = 700;
    p.comm = comm;
    p.startTime = start;
    p.cgroup = "/lease.scope";
    FakeFd fd;
    fd.fd = 5;
    fd.drmMinor = 128;
    fd.fdinfo = amdgpuFdinfo(clientId, dev.bdf, gttKiB, 0);
    p.fds = {fd};
    host.addProcess(p);
  };
  gpuProcess(5000, "old", 1, 1024);
  host.addCgroup("/lease.scope", {700});
  auto proc = fs::Root::open(host.procRoot());
  auto sys = fs::Root::open(host.sysRoot());
  auto cgroup = fs::Root::open(host.cgroupRoot());
  ASSERT_TRUE(proc && sys && cgroup);
  ProcHandles handles;
  auto scanOnce = [&] {
    Scanner scanner(*proc, *sys);
    scanner.useHandles(&handles);
    auto s = scanner.scanCgroup(*cgroup, "/lease.scope");
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : Scan{};
  };

  Scan first = scanOnce();
  ASSERT_EQ(first.processes.size(), 1u);
  EXPECT_EQ(first.processes[0].startTimeTicks, 5000u);
  EXPECT_EQ(first.processes[0].comm, "old");
  ASSERT_EQ(first.clients.size(), 1u);
  EXPECT_EQ(first.clients[0].info.clientId, 1u);
  EXPECT_EQ(handles.held.size(), 1u);

  // The same process on the next sample: read through what is held; its
  // status is not read again (metadata is read once per process).
  writeFile(host.procRoot() + "/700/status", "Name:\trenamed\nUid:\t0\t0\t0\t0\nNSpid:\t700\n");
  Scan same = scanOnce();
  ASSERT_EQ(same.processes.size(), 1u);
  EXPECT_EQ(same.processes[0].comm, "old");
  EXPECT_EQ(same.processes[0].startTimeTicks, 5000u);

  // Past maxHeld a meter reads through fresh opens: the same figures, nothing held.
  ProcHandles capped;
  capped.maxHeld = 0;
  {
    Scanner scanner(*proc, *sys);
    scanner.useHandles(&capped);
    auto s = scanner.scanCgroup(*cgroup, "/lease.scope");
    ASSERT_TRUE(s);
    ASSERT_EQ(s->processes.size(), 1u);
    EXPECT_EQ(s->clients.size(), 1u);
    EXPECT_TRUE(capped.held.empty());
  }

  // pid 700 exits and the pid is reused by another process in the lease.
  ASSERT_EQ(std::system(("rm -rf " + host.procRoot() + "/700").c_str()), 0);
  gpuProcess(9000, "new", 2, 2048);
  Scan reused = scanOnce();
  ASSERT_EQ(reused.processes.size(), 1u);
  EXPECT_EQ(reused.processes[0].startTimeTicks, 9000u) << "the old process's identity was kept";
  EXPECT_EQ(reused.processes[0].comm, "new");
  ASSERT_EQ(reused.clients.size(), 1u);
  EXPECT_EQ(reused.clients[0].info.clientId, 2u) << "the old process's fds were read";
  EXPECT_EQ(handles.held.size(), 1u);

  // It exits for good: nothing of it is held any longer.
  ASSERT_EQ(std::system(("rm -rf " + host.procRoot() + "/700").c_str()), 0);
  Scan gone = scanOnce();
  EXPECT_TRUE(gone.processes.empty());
  EXPECT_TRUE(handles.held.empty());
}

}  // namespace
}  // namespace tally::scanner
