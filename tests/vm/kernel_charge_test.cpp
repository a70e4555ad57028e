// The kernel charge on a real kernel (6.1, 6.12, 7.x in the harness): what
// it charges and refuses, through every decoded allocation path, and what it
// costs (the bench). The fixture: kernel_charge_fixture.h. VM harness only.
#include <bpf/bpf.h>

#include "empty_hooks.skel.h"
#include "kernel_charge_fixture.h"

namespace tally {
namespace {

using namespace tally::vmcharge;

// One program's runs and time in them, from the kernel's own BPF run-time
// statistics (counted while bpf_enable_stats' fd is open), found through
// the link the loader pinned.
struct ProgramTime {
  std::uint64_t runs = 0, ns = 0;
};
ProgramTime programTime(const std::string& linkPin) {
  ProgramTime t;
  int link = bpf_obj_get(linkPin.c_str());
  if (link < 0) return t;
  bpf_link_info li{};
  __u32 len = sizeof li;
  if (bpf_obj_get_info_by_fd(link, &li, &len) == 0) {
    int prog = bpf_prog_get_fd_by_id(li.prog_id);
    bpf_prog_info pi{};
    len = sizeof pi;
    if (prog >= 0 && bpf_obj_get_info_by_fd(prog, &pi, &len) == 0) {
      t.runs = pi.run_cnt;
      t.ns = pi.run_time_ns;
    }
    if (prog >= 0) ::close(prog);
  }
  ::close(link);
  return t;
}

TEST_F(VmKernelCharge, TheDevicesAreRegisteredAsTheDriverTheyPlay) {
  auto sys = fs::Root::open("/sys");
  ASSERT_TRUE(sys);
  auto rules = bpf::discoverDeviceRules(*sys);
  ASSERT_FALSE(rules.empty());
  for (const auto& r : rules) {
    EXPECT_EQ(r.kind, TALLY_DEVICE_TESTDRM) << r.major << ":" << r.minor;
    EXPECT_TRUE(r.charged);
  }
}

TEST_F(VmKernelCharge, AnAllocationThatWouldCrossTheBoundIsRefusedAndTheLeaseKeepsRunning) {
  std::string dir = cgroup("vm-kc-bound");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  Allocator a(dir);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  EXPECT_EQ(a.call(Allocator::Create, 8 * kMiB), 0);
  EXPECT_EQ(read(id).bytes, 8 * kMiB);
  EXPECT_EQ(a.call(Allocator::Create, 8 * kMiB), 0) << "exactly at the bound is allowed";
  EXPECT_EQ(read(id).bytes, 16 * kMiB);
  EXPECT_EQ(a.call(Allocator::Create, 1), -ENOMEM) << "one byte more (a page) would cross";
  EXPECT_EQ(a.call(Allocator::Create, 4 * kMiB, TALLY_TESTDRM_REGION_VRAM), -ENOMEM);
  auto c = read(id);
  EXPECT_EQ(c.bytes, 16 * kMiB) << "a refused allocation is never charged";
  EXPECT_EQ(c.peakBytes, 16 * kMiB);
  EXPECT_EQ(c.objects, 2u);
  EXPECT_EQ(c.refused, 2u);
  EXPECT_EQ(c.refusedBytes, 4096 + 4 * kMiB);
  auto refusals = charge_->refusals();
  ASSERT_EQ(refusals.size(), 2u);
  EXPECT_EQ(refusals[0].lease, id);
  EXPECT_EQ(refusals[0].requestedBytes, 4096u);
  EXPECT_EQ(refusals[0].chargedBytes, 16 * kMiB);
  EXPECT_EQ(refusals[0].maxBytes, 16 * kMiB);
  EXPECT_EQ(refusals[0].pid, static_cast<std::uint32_t>(a.pid()));
  EXPECT_TRUE(charge_->refusals().empty()) << "drained once";
  // It keeps running: freeing makes room again.
  ASSERT_EQ(a.call(Allocator::Close), 0);
  EXPECT_EQ(read(id).bytes, 0u) << "uncharged when the objects are freed";
  EXPECT_EQ(read(id).objects, 0u);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  EXPECT_EQ(a.call(Allocator::Create, 12 * kMiB), 0);
  EXPECT_EQ(read(id).peakBytes, 16 * kMiB);
}

// The drivers read a command by its number and copy what the caller's size
// says (drm_ioctl, kfd_ioctl): the same allocation in another encoding makes
// the same buffer, so it is decoded, charged and refused the same.
TEST_F(VmKernelCharge, AnAllocationInAnotherEncodingIsRefusedToo) {
  std::string dir = cgroup("vm-kc-encoding");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  Allocator a(dir);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  EXPECT_EQ(a.call(Allocator::CreateSizeOnly, 12 * kMiB), 0) << "the driver takes it";
  EXPECT_EQ(read(id).bytes, 12 * kMiB);
  EXPECT_EQ(a.call(Allocator::CreateSizeOnly, 8 * kMiB), -ENOMEM);
  EXPECT_EQ(a.call(Allocator::CreateOtherType, 8 * kMiB), -ENOTTY)
      << "DRM checks the type byte: nothing made, nothing to refuse";
  auto c = read(id);
  EXPECT_EQ(c.bytes, 12 * kMiB) << "never over the bound";
  EXPECT_EQ(c.peakBytes, 12 * kMiB);
  EXPECT_EQ(c.refused, 1u);
  EXPECT_EQ(c.refusedBytes, 8 * kMiB);
  EXPECT_EQ(a.call(Allocator::CreateSizeOnly, 4 * kMiB), 0) << "up to the bound";
  EXPECT_EQ(read(id).bytes, 16 * kMiB);
  EXPECT_EQ(charge_->refusals().size(), 1u);
}

// A dumb buffer, which any client of a card node may make
// (DRM_IOCTL_MODE_CREATE_DUMB): charged, and refused at the bound.
TEST_F(VmKernelCharge, ADumbBufferOnTheCardNodeIsChargedAndRefusedToo) {
  std::string dir = cgroup("vm-kc-dumb");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  Allocator a(dir);
  EXPECT_EQ(a.call(Allocator::Dumb, 8 * kMiB), 0) << "the driver makes it";
  EXPECT_EQ(read(id).bytes, 8 * kMiB);
  EXPECT_EQ(a.call(Allocator::Dumb, 12 * kMiB), -ENOMEM);
  EXPECT_EQ(a.call(Allocator::Dumb, 8 * kMiB), 0) << "up to the bound";
  auto c = read(id);
  EXPECT_EQ(c.bytes, 16 * kMiB);
  EXPECT_EQ(c.peakBytes, 16 * kMiB) << "never over the bound";
  EXPECT_EQ(c.refused, 1u);
  EXPECT_EQ(c.refusedBytes, 12 * kMiB);
}

// A 32-bit process's ioctls take compat_sys_ioctl, whose LSM hook is
// file_ioctl_compat, not file_ioctl (all three kernels of the matrix have
// it): refused there the same.
TEST_F(VmKernelCharge, A32BitProcessIsRefusedAtTheBoundToo) {
  std::string dir = cgroup("vm-kc-compat");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  std::string procs = dir + "/cgroup.procs";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    std::string self = std::to_string(::getpid()) + "\n";
    int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, self.data(), self.size()) < 0) ::_exit(3);
    ::execl(TALLY_VM_COMPAT_CREATE, TALLY_VM_COMPAT_CREATE, "12", "8", "4", nullptr);
    ::_exit(4);
  }
  ::close(out[1]);
  std::string said;
  char buf[256];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
    said.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "2: no device, 3: no cgroup, 4: no exec (IA-32 emulation?)";
  EXPECT_EQ(said, "0\n-12\n0\n") << "a 16 MiB bound: 12 MiB made, 8 MiB refused, 4 MiB made";
  auto c = read(id);
  EXPECT_EQ(c.peakBytes, 16 * kMiB) << "never over the bound";
  EXPECT_EQ(c.refused, 1u);
  EXPECT_EQ(c.refusedBytes, 8 * kMiB);
  EXPECT_EQ(c.bytes, 0u) << "its objects were freed as it exited, and uncharged";
}

TEST_F(VmKernelCharge, NothingOutsideALeaseAndNoLeaseWithoutABoundIsEverRefused) {
  std::string outside = cgroup("vm-kc-outside");
  std::string unbounded = cgroup("vm-kc-unbounded");
  std::uint64_t id = cgroupId(unbounded);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{}));
  Allocator out(outside);
  Allocator free(unbounded);
  ASSERT_EQ(out.call(Allocator::Open), 0);
  ASSERT_EQ(free.call(Allocator::Open), 0);
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(out.call(Allocator::Create, 32 * kMiB), 0);
    EXPECT_EQ(free.call(Allocator::Create, 32 * kMiB), 0);
  }
  EXPECT_EQ(read(id).bytes, 128 * kMiB) << "charged, never refused";
  EXPECT_EQ(read(id).refused, 0u);
  EXPECT_FALSE(charge_->read(cgroupId(outside))) << "a cgroup no lease holds is never armed";
  EXPECT_TRUE(charge_->refusals().empty());
}

TEST_F(VmKernelCharge, AChildInASubCgroupIsChargedToTheLease) {
  std::string dir = cgroup("vm-kc-parent");
  std::string sub = dir + "/worker";
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  cgroups_.push_back(sub);
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{24 * kMiB}));
  Allocator a(sub);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  EXPECT_EQ(a.call(Allocator::Create, 16 * kMiB), 0);
  EXPECT_EQ(a.call(Allocator::Create, 16 * kMiB), -ENOMEM);
  EXPECT_EQ(read(id).bytes, 16 * kMiB);
}

// A child lease (a Slurm step in its job's lease): its objects are charged
// to it and to its parent; an allocation is refused at its own bound and at
// the parent's, which holds all its children together; a freed object leaves
// both; a child's end leaves the parent's charge right.
TEST_F(VmKernelCharge, AChildLeaseIsChargedToItselfAndItsParentAndRefusedAtEitherBound) {
  std::string job = cgroup("vm-kc-job");
  std::string step0 = job + "/step_0", step1 = job + "/step_1";
  for (const auto& d : {step0, step1}) {
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
    cgroups_.push_back(d);
  }
  std::uint64_t jobId = cgroupId(job), id0 = cgroupId(step0), id1 = cgroupId(step1);
  ASSERT_TRUE(charge_->arm(jobId, bpf::ArmSpec{24 * kMiB}));
  ASSERT_TRUE(charge_->arm(id0, bpf::ArmSpec{16 * kMiB, jobId}));
  ASSERT_TRUE(charge_->arm(id1, bpf::ArmSpec{24 * kMiB, jobId}));
  Allocator a(step0), b(step1);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  ASSERT_EQ(b.call(Allocator::Open), 0);
  EXPECT_EQ(a.call(Allocator::Create, 16 * kMiB), 0);
  EXPECT_EQ(a.call(Allocator::Create, 4 * kMiB), -ENOMEM) << "the step's own 16 MiB";
  EXPECT_EQ(b.call(Allocator::Create, 8 * kMiB), 0);
  EXPECT_EQ(b.call(Allocator::Create, 4 * kMiB), -ENOMEM) << "the job's 24 MiB, held by both";
  EXPECT_EQ(read(id0).bytes, 16 * kMiB);
  EXPECT_EQ(read(id1).bytes, 8 * kMiB);
  EXPECT_EQ(read(jobId).bytes, 24 * kMiB) << "the job holds its steps' objects, once";
  EXPECT_EQ(read(jobId).refused, 1u) << "the job's bound refused step 1's";
  EXPECT_EQ(read(id0).refused, 1u) << "step 0's own bound refused its own";
  auto refusals = charge_->refusals();
  ASSERT_EQ(refusals.size(), 2u);
  EXPECT_EQ(refusals[0].lease, id0);
  EXPECT_EQ(refusals[1].lease, jobId);
  EXPECT_EQ(refusals[1].chargedBytes, 24 * kMiB);
  // Step 0 ends: its objects freed leave the job too.
  ASSERT_EQ(a.call(Allocator::Close), 0);
  EXPECT_EQ(read(jobId).bytes, 8 * kMiB);
  EXPECT_EQ(read(id0).bytes, 0u);
  // Step 1's lease ends (disarmed) while its object lives: when it is freed
  // the job is uncharged all the same.
  charge_->retire(id1);
  ASSERT_EQ(b.call(Allocator::Close), 0);
  EXPECT_EQ(read(jobId).bytes, 0u) << "never charged for an object gone";
  EXPECT_EQ(read(jobId).peakBytes, 24 * kMiB);
}

TEST_F(VmKernelCharge, ATaskNestedHundredsOfLevelsBelowItsLeaseIsStillCharged) {
  std::string dir = cgroup("vm-kc-deep");
  std::string deep = dir;
  for (int i = 0; i < 300; ++i) deep += "/d";
  ASSERT_EQ(std::system(("mkdir -p " + deep).c_str()), 0);
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  {
    Allocator a(deep);
    ASSERT_EQ(a.call(Allocator::Open), 0);
    EXPECT_EQ(a.call(Allocator::Create, 16 * kMiB), 0);
    EXPECT_EQ(a.call(Allocator::Create, 4096), -ENOMEM);
    EXPECT_EQ(read(id).bytes, 16 * kMiB);
  }
  ASSERT_EQ(std::system(("find " + dir + "/d -depth -type d -exec rmdir {} +").c_str()), 0);
}

TEST_F(VmKernelCharge, ABufferPassedToAnotherLeaseStaysChargedToItsCreator) {
  std::string dirA = cgroup("vm-kc-creator");
  std::string dirB = cgroup("vm-kc-receiver");
  std::uint64_t a = cgroupId(dirA), b = cgroupId(dirB);
  ASSERT_TRUE(charge_->arm(a, bpf::ArmSpec{64 * kMiB}));
  ASSERT_TRUE(charge_->arm(b, bpf::ArmSpec{16 * kMiB}));
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto creator = std::make_unique<Allocator>(dirA, sv[0]);
  Allocator receiver(dirB, sv[1]);
  ASSERT_EQ(creator->call(Allocator::Open), 0);
  ASSERT_EQ(creator->call(Allocator::Create, 48 * kMiB), 0);
  ASSERT_EQ(creator->call(Allocator::SendFd), 0) << "the fd parked in the socket, its own closed";
  ASSERT_EQ(receiver.call(Allocator::RecvFd), 0);
  creator.reset();  // the creator exits; the receiver holds its 48 MiB
  EXPECT_EQ(read(a).bytes, 48 * kMiB) << "still its creator's";
  EXPECT_EQ(read(b).bytes, 0u) << "never the receiver's";
  EXPECT_EQ(receiver.call(Allocator::Create, 8 * kMiB), 0)
      << "the receiver's own bound is untouched by what it was passed";
  EXPECT_EQ(read(b).bytes, 8 * kMiB);
  ASSERT_EQ(receiver.call(Allocator::Close), 0);
  EXPECT_EQ(read(a).bytes, 0u) << "uncharged from its creator when freed, whoever freed it";
  EXPECT_EQ(read(b).bytes, 0u);
}

TEST_F(VmKernelCharge, TheChargeAndTheBoundOutliveTheDaemonAndAreFoundAgain) {
  std::string dir = cgroup("vm-kc-restart");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  Allocator a(dir);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  ASSERT_EQ(a.call(Allocator::Create, 12 * kMiB), 0);
  charge_.reset();  // the daemon is gone (kill -9 leaves the same: pins hold the programs)
  EXPECT_EQ(a.call(Allocator::Create, 8 * kMiB), -ENOMEM) << "bounded with no daemon";
  EXPECT_EQ(a.call(Allocator::Create, 4 * kMiB), 0);
  load();
  auto armed = charge_->armed();
  EXPECT_NE(std::find(armed.begin(), armed.end(), id), armed.end());
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB})) << "re-armed: the charge is kept";
  auto c = read(id);
  EXPECT_EQ(c.bytes, 16 * kMiB);
  EXPECT_EQ(c.refused, 1u);
  EXPECT_EQ(charge_->refusals().size(), 1u)
      << "the refusal made while no daemon ran is still queued";
  EXPECT_EQ(a.call(Allocator::Create, 4096), -ENOMEM);
  ASSERT_EQ(a.call(Allocator::Close), 0);
  EXPECT_EQ(read(id).bytes, 0u) << "objects charged by the old programs are uncharged by the new";
}

TEST_F(VmKernelCharge, AmdgpuGemCreateAndKfdAllocationsAreDecodedFromTheirRealStructs) {
  charge_.reset();
  removePins();
  loadDriver("personality=amdgpu");
  load();
  auto sys = fs::Root::open("/sys");
  ASSERT_TRUE(sys);
  auto rules = bpf::discoverDeviceRules(*sys);
  bool kfd = false, amdgpu = false;
  for (const auto& r : rules) {
    kfd = kfd || r.kind == TALLY_DEVICE_KFD;
    amdgpu = amdgpu || (r.kind == TALLY_DEVICE_AMDGPU && r.charged);
  }
  EXPECT_TRUE(kfd && amdgpu);
  std::string dir = cgroup("vm-kc-amdgpu");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{32 * kMiB}));
  auto a = std::make_unique<Allocator>(dir);
  ASSERT_EQ(a->call(Allocator::Open), 0);
  ASSERT_EQ(a->call(Allocator::OpenKfd), 0);
  EXPECT_EQ(a->call(Allocator::Amdgpu, 16 * kMiB), 0);
  EXPECT_EQ(a->call(Allocator::Kfd, 8 * kMiB), 0);
  EXPECT_EQ(read(id).bytes, 24 * kMiB) << "GEM_CREATE and KFD's buffers, both charged";
  EXPECT_EQ(a->call(Allocator::Kfd, 16 * kMiB), -ENOMEM);
  EXPECT_EQ(a->call(Allocator::KfdOtherType, 16 * kMiB), -ENOMEM)
      << "KFD reads the command by its number too";
  EXPECT_EQ(a->call(Allocator::Amdgpu, 16 * kMiB, TALLY_TESTDRM_REGION_VRAM), -ENOMEM);
  EXPECT_EQ(a->call(Allocator::Amdgpu, 8 * kMiB, TALLY_TESTDRM_REGION_VRAM), 0);
  EXPECT_EQ(read(id).refused, 3u);
  EXPECT_EQ(read(id).bytes, 32 * kMiB);
  a.reset();
  EXPECT_EQ(read(id).bytes, 0u) << "KFD's buffers are freed when /dev/kfd closes, and uncharged";
  charge_.reset();
  loadDriver("");  // the driver as the other tests know it
}

// docs/PERFORMANCE.md: what the programs add to one allocation, as a ratio
// in one run (the variants alternate: without programs, with programs that do nothing, with
// tally's), and the overshoot past a bound (bytes held beyond it at any moment: the charge's own
// peak). Prints; asserts only that the loops ran (no wall-clock threshold in a test).
TEST_F(VmKernelCharge, BenchCreateCloseWithAndWithoutTheProgramsAndTheOvershoot) {
  std::string dir = cgroup("vm-kc-bench");
  std::uint64_t id = cgroupId(dir);
  Allocator a(dir);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  // A page (the smallest allocation: the programs' cost shows most) and
  // 2 MiB (amdgpu's usual minimum for a compute buffer).
  for (std::uint32_t pages : {1u, 512u}) {
    const std::uint64_t pairs = pages == 1 ? 20000 : 200;
    std::vector<double> ratios, floors;
    // A first loop warms the caches and the allocator's free lists; then
    // the three variants run in an order that reverses each round, so no
    // place in the round favours one.
    charge_.reset();
    removePins();
    ASSERT_GT(a.call(Allocator::Loop, pairs, pages), 0);
    for (int round = 0; round < 7; ++round) {
      std::int64_t without = 0, floor = 0, with = 0;
      auto timeWithout = [&] { without = a.call(Allocator::Loop, pairs, pages); };
      // The floor: programs that do nothing, at the same three hooks.
      auto timeFloor = [&] {
        tally_empty_hooks* empty = tally_empty_hooks__open_and_load();
        ASSERT_NE(empty, nullptr);
        EXPECT_EQ(tally_empty_hooks__attach(empty), 0);
        floor = a.call(Allocator::Loop, pairs, pages);
        tally_empty_hooks__destroy(empty);
      };
      auto timeWith = [&] {
        load();
        ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{1ull << 30}));
        int stats =
            std::getenv("TALLY_BENCH_BPF_STATS") ? bpf_enable_stats(BPF_STATS_RUN_TIME) : -1;
        ProgramTime before[3], after[3];
        const char* links[3] = {"link_charge", "link_uncharge", "link_refuse"};
        for (int p = 0; p < 3; ++p)
          before[p] = programTime("/sys/fs/bpf/tally-test/" + std::string(links[p]));
        with = a.call(Allocator::Loop, pairs, pages);
        for (int p = 0; p < 3; ++p)
          after[p] = programTime("/sys/fs/bpf/tally-test/" + std::string(links[p]));
        if (stats >= 0) ::close(stats);
        charge_.reset();
        removePins();
        // The programs' own time per pair (the refuse hook runs on both ioctls).
        double own = 0;
        for (int p = 0; p < 3; ++p) own += static_cast<double>(after[p].ns - before[p].ns);
        own /= static_cast<double>(pairs);
        auto perRun = [&](int p) {
          std::uint64_t runs = after[p].runs - before[p].runs;
          return runs ? static_cast<double>(after[p].ns - before[p].ns) / static_cast<double>(runs)
                      : 0.0;
        };
        // Only with the statistics on (they cost each run two clock reads of their own).
        if (stats >= 0)
          std::printf(
              "[ bench ] %u KiB: the programs' own time per pair %.0f ns: charge %.0f ns a run, "
              "uncharge %.0f, refuse %.0f (twice)\n",
              pages * 4, own, perRun(0), perRun(1), perRun(2));
      };
      if (round % 2 == 0) {
        timeWithout();
        timeFloor();
        timeWith();
      } else {
        timeWith();
        timeFloor();
        timeWithout();
      }
      if (HasFatalFailure()) return;
      ASSERT_GT(without, 0);
      ASSERT_GT(floor, 0);
      ASSERT_GT(with, 0);
      ratios.push_back(static_cast<double>(with) / static_cast<double>(without));
      floors.push_back(static_cast<double>(floor) / static_cast<double>(without));
      std::printf(
          "[ bench ] create+close of %u KiB: %lld ns without, %lld ns with programs that do "
          "nothing (%.3fx), %lld ns with tally's: %.3fx\n",
          pages * 4, static_cast<long long>(without), static_cast<long long>(floor), floors.back(),
          static_cast<long long>(with), ratios.back());
    }
    std::sort(ratios.begin(), ratios.end());
    std::sort(floors.begin(), floors.end());
    std::printf(
        "[ bench ] %u KiB: median ratio over %zu rounds: %.3fx (the floor, programs that do "
        "nothing at the same hooks: %.3fx)\n",
        pages * 4, ratios.size(), ratios[ratios.size() / 2], floors[floors.size() / 2]);
  }
  // The overshoot: 1 MiB at a time against a 64 MiB bound.
  load();
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{64 * kMiB}));
  ASSERT_EQ(a.call(Allocator::Close), 0);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  int made = 0, refused = 0;
  for (int i = 0; i < 80; ++i) (a.call(Allocator::Create, kMiB) == 0 ? made : refused)++;
  auto c = read(id);
  EXPECT_EQ(made, 64);
  EXPECT_EQ(refused, 16);
  EXPECT_EQ(c.peakBytes, 64 * kMiB);
  std::printf("[ bench ] overshoot past a 64 MiB bound in 1 MiB steps: %llu bytes (peak %llu)\n",
              static_cast<unsigned long long>(c.peakBytes - 64 * kMiB),
              static_cast<unsigned long long>(c.peakBytes));
}

}  // namespace
}  // namespace tally
