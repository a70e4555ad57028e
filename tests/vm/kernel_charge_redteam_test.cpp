// The kernel charge tried as a hostile user would (issue "The kernel charge is
// exact"), on 6.1, 6.12 and 7.x: allocation flags in the kernel's order, an
// argument in a page not yet mapped, on-chip domains beside memory, a full
// object map, release and re-attach, racing allocators, buffers that outlive
// their lease, tasks moved in, devices that appear later. Each asserts the
// lease never holds more than its bound and is never refused but at it (or
// failing closed, said with its reason). The fixture: kernel_charge_fixture.h.
#include <cstdio>

#include "kernel_charge_fixture.h"

namespace tally {
namespace {

using namespace tally::vmcharge;

constexpr std::uint64_t kKiB = 1u << 10;

// KFD's allocation flags decided as amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu()
// decides them: VRAM, then GTT, before USERPTR/DOORBELL/MMIO_REMAP. A GTT or
// VRAM buffer with one of those flags beside is a plain buffer (before: "not
// memory", 256 MiB held under a 64 MiB bound).
TEST_F(VmKernelCharge, KfdFlagsAreDecidedInTheKernelsOrder) {
  charge_.reset();
  removePins();
  loadDriver("personality=amdgpu");
  load();
  std::string dir = cgroup("vm-kc-kfd-flags");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  {
    Allocator a(dir);
    ASSERT_EQ(a.call(Allocator::OpenKfd), 0);
    const std::uint32_t gtt = TALLY_TESTKFD_ALLOC_GTT, vram = TALLY_TESTKFD_ALLOC_VRAM;
    EXPECT_EQ(a.call(Allocator::KfdFlags, 12 * kMiB, gtt | TALLY_TESTKFD_ALLOC_USERPTR), 0)
        << "the driver makes a GTT buffer";
    EXPECT_EQ(read(id).bytes, 12 * kMiB) << "charged as the buffer it is";
    EXPECT_EQ(a.call(Allocator::KfdFlags, 8 * kMiB, vram | TALLY_TESTKFD_ALLOC_USERPTR), -ENOMEM)
        << "VRAM|USERPTR is a VRAM buffer: past the bound";
    EXPECT_EQ(a.call(Allocator::KfdFlags, TALLY_TESTKFD_DOORBELL_SLICE,
                     vram | TALLY_TESTKFD_ALLOC_DOORBELL),
              0);
    EXPECT_EQ(a.call(Allocator::KfdFlags, 4 * kKiB, gtt | TALLY_TESTKFD_ALLOC_MMIO_REMAP), 0);
    EXPECT_EQ(read(id).bytes, 12 * kMiB + 12 * kKiB);
    // AQL queue memory: one buffer of half the size (mapped twice).
    EXPECT_EQ(a.call(Allocator::KfdFlags, 2 * kMiB, gtt | TALLY_TESTKFD_ALLOC_AQL_QUEUE_MEM), 0);
    EXPECT_EQ(read(id).bytes, 13 * kMiB + 12 * kKiB);
    // What is not memory the lease grows, or memory memcg charges, stays uncharged.
    EXPECT_EQ(a.call(Allocator::KfdFlags, 4 * kMiB, TALLY_TESTKFD_ALLOC_USERPTR), 0);
    EXPECT_EQ(
        a.call(Allocator::KfdFlags, TALLY_TESTKFD_DOORBELL_SLICE, TALLY_TESTKFD_ALLOC_DOORBELL), 0);
    EXPECT_EQ(a.call(Allocator::KfdFlags, 4 * kKiB, TALLY_TESTKFD_ALLOC_MMIO_REMAP), 0);
    // A buffer mapped on four GPUs: three attachments over its memory (a
    // dma-buf import on each peer), not three more buffers.
    EXPECT_EQ(a.call(Allocator::KfdMapOn, 2 * kMiB, 4), 0);
    auto c = read(id);
    EXPECT_EQ(c.bytes, 15 * kMiB + 12 * kKiB);
    EXPECT_EQ(c.refused, 1u);
    EXPECT_EQ(c.refusedFailsafe, 0u);
    EXPECT_LE(c.peakBytes, 16 * kMiB) << "never over the bound";
  }
  EXPECT_EQ(read(id).bytes, 0u) << "every buffer freed with /dev/kfd, and uncharged";
  EXPECT_EQ(read(id).underflows, 0u);
  charge_.reset();
  loadDriver("");
}

// The hook reads the argument as the driver will: copy_from_user() faults a
// page in, so the sleepable file_ioctl program does too (before: a struct in
// a page not yet mapped passed the bound at any size).
TEST_F(VmKernelCharge, AnArgumentInAPageNotYetMappedIsReadAsTheDriverReadsIt) {
  std::string dir = cgroup("vm-kc-cold");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  Allocator a(dir);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  EXPECT_EQ(a.call(Allocator::Create, 12 * kMiB), 0);
  EXPECT_EQ(a.call(Allocator::ColdCreate, 8 * kMiB), -ENOMEM);
  EXPECT_EQ(a.call(Allocator::ColdCreate, 4 * kMiB), 0) << "up to the bound, read cold";
  auto c = read(id);
  EXPECT_EQ(c.bytes, 16 * kMiB);
  EXPECT_EQ(c.peakBytes, 16 * kMiB) << "never over the bound";
  EXPECT_EQ(c.refused, 1u);
  EXPECT_EQ(c.refusedFailsafe, 0u) << "refused at the bound, having read it";
}

// Drivers pad a dumb buffer's pitch (amdgpu aligns the width to 256 pixels
// at one byte a pixel): 1 pixel by 16 Ki rows is 16 KiB of pixels and a 4 MiB
// buffer. The reservation is the most a driver makes (before: 16 KiB was
// checked and 4 MiB made, each time, past any bound).
TEST_F(VmKernelCharge, ADumbBufferIsReservedAtWhatTheDriverPadsItTo) {
  std::string dir = cgroup("vm-kc-dumb-pad");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{4 * kMiB}));
  Allocator a(dir);
  EXPECT_EQ(a.call(Allocator::DumbNarrow, 16384), 0) << "4 MiB made: at the bound";
  EXPECT_EQ(read(id).bytes, 4 * kMiB);
  EXPECT_EQ(a.call(Allocator::DumbNarrow, 16384), -ENOMEM);
  EXPECT_EQ(a.call(Allocator::DumbNarrow, 64), -ENOMEM) << "64 KiB reserved: past the bound";
  auto c = read(id);
  EXPECT_EQ(c.bytes, 4 * kMiB);
  EXPECT_EQ(c.peakBytes, 4 * kMiB) << "never over the bound";
  EXPECT_EQ(c.extraBytes, 0u) << "nothing made beyond what was reserved";
  EXPECT_EQ(c.refused, 2u);
}

// The compat hook cannot fault a page in: a 32-bit allocation whose argument
// it cannot read is refused for a bounded lease (fail closed), with its reason.
TEST_F(VmKernelCharge, A32BitAllocationWhoseArgumentCannotBeReadIsRefusedNotPassed) {
  std::string dir = cgroup("vm-kc-compat-cold");
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
    ::execl(TALLY_VM_COMPAT_CREATE, TALLY_VM_COMPAT_CREATE, "4", "c4", nullptr);
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
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit " << status;
  EXPECT_EQ(said, "0\n-12\n") << "4 MiB made; 4 MiB more from a cold page refused";
  auto c = read(id);
  EXPECT_EQ(c.refused, 1u);
  EXPECT_EQ(c.refusedFailsafe, 1u) << "refused because it could not be read, and counted so";
  auto refusals = charge_->refusals();
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0].reason, static_cast<std::uint32_t>(bpf::RefusalReason::Unreadable));
}

// amdgpu_bo_create() sizes GWS/OA in pages per unit (size << PAGE_SHIFT) and
// GDS as ALIGN(size, 4) << PAGE_SHIFT. A kernel without
// amdgpu_gem_are_domains_valid() makes such a buffer in memory when a memory
// domain is beside: the decoder predicts the made size (before: 16 KiB
// checked, 64 MiB made). A kernel with the check refuses the mix itself.
TEST_F(VmKernelCharge, OnChipDomainsBesideMemoryAreSizedAsTheKernelSizesThem) {
  charge_.reset();
  removePins();
  loadDriver("personality=amdgpu domains_checked=0");
  load();
  std::string dir = cgroup("vm-kc-gws");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{32 * kMiB}));
  const std::uint32_t gtt = TALLY_TESTDRM_AMDGPU_DOMAIN_GTT;
  {
    Allocator a(dir);
    ASSERT_EQ(a.call(Allocator::Open), 0);
    EXPECT_EQ(a.call(Allocator::AmdgpuDomains, 16 * kKiB, TALLY_TESTDRM_AMDGPU_DOMAIN_GWS | gtt),
              -ENOMEM)
        << "16 Ki units of GWS: a 64 MiB buffer";
    EXPECT_EQ(a.call(Allocator::AmdgpuDomains, 4 * kKiB, TALLY_TESTDRM_AMDGPU_DOMAIN_OA | gtt), 0);
    EXPECT_EQ(read(id).bytes, 16 * kMiB) << "4 Ki units of OA: 16 MiB made and charged";
    EXPECT_EQ(a.call(Allocator::AmdgpuDomains, 4097, TALLY_TESTDRM_AMDGPU_DOMAIN_GDS | gtt),
              -ENOMEM)
        << "GDS: ALIGN(4097, 4) pages, past the bound";
    EXPECT_EQ(a.call(Allocator::AmdgpuDomains, 16 * kKiB, TALLY_TESTDRM_AMDGPU_DOMAIN_GWS), 0)
        << "GWS alone: on-chip, not memory";
    EXPECT_EQ(read(id).bytes, 16 * kMiB) << "and not charged";
    // The kernels of the matrix refuse the mix: reserved, then given back.
    ASSERT_EQ(std::system("echo 1 > /sys/module/tally_testdrm/parameters/domains_checked"), 0);
    EXPECT_EQ(a.call(Allocator::AmdgpuDomains, 4 * kKiB, TALLY_TESTDRM_AMDGPU_DOMAIN_OA | gtt),
              -EINVAL);
    auto c = read(id);
    EXPECT_EQ(c.bytes, 16 * kMiB) << "the reservation of a refused ioctl goes back at its end";
    EXPECT_EQ(c.peakBytes, 16 * kMiB);
    EXPECT_EQ(c.refused, 2u);
  }
  EXPECT_EQ(read(id).bytes, 0u);
  charge_.reset();
  loadDriver("");
}

// One lease cannot switch the bound off for the others by filling the
// object map: each lease holds at most its object quota, and past the map's
// room a bounded lease's allocation is refused (with its reason), an
// unbounded one's object left uncharged and counted; never a silent pass.
TEST_F(VmKernelCharge, AFullObjectMapOrAQuotaRefusesABoundedLeaseAndIsCounted) {
  charge_.reset();
  removePins();
  bpf::Sizing room;
  room.objects = 48;
  room.leases = 64;
  room.objectsPerLease = 16;
  load(room);
  std::string du = cgroup("vm-kc-room-u"), d1 = cgroup("vm-kc-room-b1"),
              d2 = cgroup("vm-kc-room-b2"), d3 = cgroup("vm-kc-room-b3");
  std::uint64_t u = cgroupId(du), b1 = cgroupId(d1), b2 = cgroupId(d2), b3 = cgroupId(d3);
  ASSERT_TRUE(charge_->arm(u, bpf::ArmSpec{}));
  for (auto b : {b1, b2, b3}) ASSERT_TRUE(charge_->arm(b, bpf::ArmSpec{1ull << 30}));
  auto au = std::make_unique<Allocator>(du);
  Allocator a1(d1), a2(d2), a3(d3);
  for (Allocator* a : {au.get(), &a1, &a2, &a3}) ASSERT_EQ(a->call(Allocator::Open), 0);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(au->call(Allocator::Create, 4 * kKiB), 0) << "an unbounded lease is never refused";
  auto cu = read(u);
  EXPECT_EQ(cu.objects, 16u) << "its object quota";
  EXPECT_EQ(cu.untracked, 4u) << "the rest uncharged, and counted";
  EXPECT_EQ(cu.bytes, 64 * kKiB);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(a1.call(Allocator::Create, 4 * kKiB), 0);
  EXPECT_EQ(a1.call(Allocator::Create, 4 * kKiB), -ENOMEM) << "its object quota";
  for (int i = 0; i < 16; ++i) EXPECT_EQ(a2.call(Allocator::Create, 4 * kKiB), 0);
  EXPECT_EQ(a3.call(Allocator::Create, 4 * kKiB), -ENOMEM) << "the map is full";
  auto t = charge_->totals();
  EXPECT_EQ(t.objects, 48u);
  EXPECT_EQ(t.objectsCapacity, 48u);
  EXPECT_EQ(read(b1).refusedFailsafe, 1u);
  EXPECT_EQ(read(b3).refusedFailsafe, 1u);
  auto refusals = charge_->refusals();
  ASSERT_EQ(refusals.size(), 2u);
  EXPECT_EQ(refusals[0].reason, static_cast<std::uint32_t>(bpf::RefusalReason::Objects));
  EXPECT_EQ(refusals[0].lease, b1);
  EXPECT_EQ(refusals[1].reason, static_cast<std::uint32_t>(bpf::RefusalReason::MapFull));
  EXPECT_EQ(refusals[1].lease, b3);
  // Room comes back as buffers go.
  au.reset();
  EXPECT_EQ(charge_->totals().objects, 32u);
  EXPECT_EQ(a3.call(Allocator::Create, 4 * kKiB), 0);
  EXPECT_EQ(read(b3).bytes, 4 * kKiB);
}

// Release, then attach the same workload again (the natural way to change a
// bound): its charge is carried, not started from zero, so its figure is what
// it holds and no free takes it below zero (before: the charge wrapped). A
// daemon restart that retires and later re-arms does the same.
TEST_F(VmKernelCharge, ReleaseThenAttachAgainCarriesTheChargeAndNothingGoesBelowZero) {
  std::string dir = cgroup("vm-kc-reattach");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  Allocator a(dir);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(a.call(Allocator::Create, 4 * kMiB), 0);
  charge_->retire(id);
  auto armed = charge_->armed();
  EXPECT_EQ(std::find(armed.begin(), armed.end(), id), armed.end()) << "charged no more";
  auto ended = charge_->ended();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].cgroupId, id);
  EXPECT_EQ(ended[0].charge.bytes, 16 * kMiB) << "its buffers still count in it";
  EXPECT_EQ(a.call(Allocator::Create, 4 * kMiB), 0) << "an ended lease refuses nothing";
  EXPECT_EQ(read(id).bytes, 16 * kMiB) << "and charges nothing new";
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{32 * kMiB})) << "attached again, a larger bound";
  EXPECT_EQ(read(id).bytes, 16 * kMiB) << "carried: what it made while leased";
  EXPECT_TRUE(charge_->ended().empty());
  EXPECT_EQ(a.call(Allocator::Create, 20 * kMiB), -ENOMEM) << "16 + 20 > 32 is refused";
  EXPECT_EQ(a.call(Allocator::Create, 12 * kMiB), 0);
  EXPECT_EQ(read(id).bytes, 28 * kMiB);
  ASSERT_EQ(a.call(Allocator::Close), 0);
  auto c = read(id);
  EXPECT_EQ(c.bytes, 0u) << "everything freed: zero, not a wrapped figure";
  EXPECT_EQ(c.objects, 0u);
  EXPECT_EQ(c.underflows, 0u);
  EXPECT_LE(c.peakBytes, 32 * kMiB);

  // A restart: the new daemon retires what no lease claims, then re-adopts.
  ASSERT_EQ(a.call(Allocator::Open), 0);
  ASSERT_EQ(a.call(Allocator::Create, 8 * kMiB), 0);
  charge_.reset();
  load();
  charge_->retire(id);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  EXPECT_EQ(read(id).bytes, 8 * kMiB);
  ASSERT_EQ(a.call(Allocator::Close), 0);
  EXPECT_EQ(read(id).bytes, 0u);
  EXPECT_EQ(read(id).underflows, 0u);
  // Retired holding nothing: gone at the second look that sees it so (a hook
  // that found it an instant before may still be reserving on it).
  charge_->retire(id);
  EXPECT_TRUE(charge_->read(id));
  EXPECT_TRUE(charge_->reap().empty());
  EXPECT_EQ(charge_->reap(), (std::vector<std::uint64_t>{id}));
  EXPECT_FALSE(charge_->read(id));
}

// Reserve before admitting: eight processes allocating at once at the bound
// never hold more than it together, and none is refused while there was
// room (docs/PERFORMANCE.md: the overshoot).
TEST_F(VmKernelCharge, EightRacingAllocatorsNeverHoldMoreThanTheBound) {
  std::string dir = cgroup("vm-kc-race");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{64 * kMiB}));
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<std::unique_ptr<Allocator>> racers;
  for (int i = 0; i < 8; ++i) {
    racers.push_back(std::make_unique<Allocator>(dir, -1, go[0]));
    ASSERT_EQ(racers.back()->call(Allocator::Open), 0);
  }
  for (auto& r : racers) ASSERT_TRUE(r->send(Allocator::Race, kMiB, 16));
  ASSERT_EQ(::write(go[1], "gogogogo", 8), 8);
  std::int64_t made = 0;
  for (auto& r : racers) made += r->answer();
  auto c = read(id);
  EXPECT_EQ(made, 64) << "every MiB of room taken, none more";
  EXPECT_EQ(c.bytes, 64 * kMiB);
  EXPECT_EQ(c.peakBytes, 64 * kMiB) << "never over the bound, at any moment";
  EXPECT_EQ(c.refused, 64u);
  EXPECT_EQ(c.refusedFailsafe, 0u);
  // Made with their object unseen (the init program's run skipped on a
  // preemptible kernel): kept charged, so never past the bound either.
  std::printf(
      "[ bench ] 8 racing allocators, 1 MiB each, 64 MiB bound: %lld made, overshoot %llu "
      "bytes (%llu bytes kept charged unseen: recursion misses %llu)\n",
      static_cast<long long>(made), static_cast<unsigned long long>(c.peakBytes - 64 * kMiB),
      static_cast<unsigned long long>(c.unseenBytes),
      static_cast<unsigned long long>(charge_->totals().recursionMisses.value_or(0)));
  ::close(go[0]);
  ::close(go[1]);
}

// A child racing its parent: four processes in the job's own cgroup and four
// in its step's, at the job's bound.
TEST_F(VmKernelCharge, AChildRacingItsParentNeverTakesTheParentOverItsBound) {
  std::string job = cgroup("vm-kc-race-job");
  std::string step = job + "/step_0";
  ASSERT_EQ(::mkdir(step.c_str(), 0755), 0);
  cgroups_.push_back(step);
  std::uint64_t jobId = cgroupId(job), stepId = cgroupId(step);
  ASSERT_TRUE(charge_->arm(jobId, bpf::ArmSpec{32 * kMiB}));
  ASSERT_TRUE(charge_->arm(stepId, bpf::ArmSpec{32 * kMiB, jobId}));
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<std::unique_ptr<Allocator>> racers;
  for (int i = 0; i < 8; ++i) {
    racers.push_back(std::make_unique<Allocator>(i % 2 ? step : job, -1, go[0]));
    ASSERT_EQ(racers.back()->call(Allocator::Open), 0);
  }
  for (auto& r : racers) ASSERT_TRUE(r->send(Allocator::Race, kMiB, 8));
  ASSERT_EQ(::write(go[1], "gogogogo", 8), 8);
  std::int64_t made = 0;
  for (auto& r : racers) made += r->answer();
  EXPECT_EQ(made, 32);
  EXPECT_EQ(read(jobId).bytes, 32 * kMiB);
  EXPECT_EQ(read(jobId).peakBytes, 32 * kMiB) << "the job never over its bound";
  EXPECT_LE(read(stepId).peakBytes, 32 * kMiB);
  EXPECT_EQ(read(stepId).underflows + read(jobId).underflows, 0u);
  ::close(go[0]);
  ::close(go[1]);
}

// Buffers that outlive their lease are charged to someone: a step's stay in
// its ended entry and in its job (which still holds them against its bound),
// until whoever holds them frees them.
TEST_F(VmKernelCharge, BuffersPassedOnOutliveTheirLeaseAndStayCountedInItsParent) {
  std::string job = cgroup("vm-kc-outlive-job");
  std::string stepA = job + "/step_a", stepC = job + "/step_c";
  for (const auto& d : {stepA, stepC}) {
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
    cgroups_.push_back(d);
  }
  std::string other = cgroup("vm-kc-outlive-other");
  std::uint64_t jobId = cgroupId(job), a = cgroupId(stepA), cId = cgroupId(stepC);
  ASSERT_TRUE(charge_->arm(jobId, bpf::ArmSpec{64 * kMiB}));
  ASSERT_TRUE(charge_->arm(a, bpf::ArmSpec{48 * kMiB, jobId}));
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto creator = std::make_unique<Allocator>(stepA, sv[0]);
  Allocator holder(other, sv[1]);  // a process outside every lease
  ASSERT_EQ(creator->call(Allocator::Open), 0);
  ASSERT_EQ(creator->call(Allocator::Create, 40 * kMiB), 0);
  ASSERT_EQ(creator->call(Allocator::SendFd), 0);
  ASSERT_EQ(holder.call(Allocator::RecvFd), 0);
  creator.reset();
  charge_->retire(a);  // the step ended
  auto ended = charge_->ended();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].cgroupId, a);
  EXPECT_EQ(ended[0].parent, jobId);
  EXPECT_EQ(ended[0].charge.bytes, 40 * kMiB) << "held by buffers of the ended step";
  EXPECT_EQ(read(jobId).bytes, 40 * kMiB) << "and still the job's";
  auto elsewhere = charge_->arm(a, bpf::ArmSpec{48 * kMiB});
  ASSERT_FALSE(elsewhere) << "carried into a lease under no parent, they would count nowhere";
  EXPECT_NE(elsewhere.error().message.find("charged under parent lease cgroup"), std::string::npos)
      << elsewhere.error().message;
  ASSERT_TRUE(charge_->arm(cId, bpf::ArmSpec{48 * kMiB, jobId}));
  Allocator next(stepC);
  ASSERT_EQ(next.call(Allocator::Open), 0);
  EXPECT_EQ(next.call(Allocator::Create, 32 * kMiB), -ENOMEM)
      << "the job's bound holds what its ended step left";
  EXPECT_EQ(next.call(Allocator::Create, 24 * kMiB), 0);
  EXPECT_TRUE(charge_->reap().empty()) << "still held";
  ASSERT_EQ(holder.call(Allocator::Close), 0);  // whoever holds them frees them
  EXPECT_TRUE(charge_->reap().empty()) << "seen holding nothing once";
  auto reaped = charge_->reap();
  ASSERT_EQ(reaped.size(), 1u);
  EXPECT_EQ(reaped[0], a);
  EXPECT_FALSE(charge_->read(a));
  EXPECT_EQ(read(jobId).bytes, 24 * kMiB);
  EXPECT_EQ(read(jobId).underflows, 0u);
}

// A task moved into a lease's cgroup tree may bring buffers made outside it
// (only fdinfo shows those): the lease's count tells the daemon to look.
TEST_F(VmKernelCharge, ATaskMovedIntoALeaseIsCountedSoItsFdinfoIsRead) {
  std::string dir = cgroup("vm-kc-moved");
  std::string sub = dir + "/sub";
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  cgroups_.push_back(sub);
  std::string outside = cgroup("vm-kc-moved-out");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  Allocator a(outside);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  ASSERT_EQ(a.call(Allocator::Create, 8 * kMiB), 0) << "made outside the lease";
  EXPECT_EQ(read(id).movedIn, 0u);
  writeFile(dir + "/cgroup.procs", std::to_string(a.pid()) + "\n");
  EXPECT_EQ(read(id).movedIn, 1u);
  writeFile(sub + "/cgroup.procs", std::to_string(a.pid()) + "\n");
  EXPECT_EQ(read(id).movedIn, 2u) << "moved within the tree: still into the lease";
  writeFile(outside + "/cgroup.procs", std::to_string(a.pid()) + "\n");
  EXPECT_EQ(read(id).movedIn, 2u) << "moved out: nothing to count";
  EXPECT_EQ(read(id).bytes, 0u) << "its buffer is not the lease's charge (fdinfo's floor)";
}

// A GPU that appears after the programs were loaded is charged and refused
// once registered (the daemon rescans; doctor says which devices are covered).
TEST_F(VmKernelCharge, ADeviceRegisteredLaterIsChargedFromThen) {
  charge_.reset();
  removePins();
  bpf::LoadOptions o;
  o.pinDir = "/sys/fs/bpf/tally-test";  // no device yet
  auto loaded = bpf::loadKernelCharge(o);
  ASSERT_TRUE(loaded) << loaded.error().message;
  charge_ = std::move(*loaded);
  EXPECT_TRUE(charge_->devices().empty());
  std::string dir = cgroup("vm-kc-hotplug");
  std::uint64_t id = cgroupId(dir);
  ASSERT_TRUE(charge_->arm(id, bpf::ArmSpec{16 * kMiB}));
  Allocator a(dir);
  ASSERT_EQ(a.call(Allocator::Open), 0);
  EXPECT_EQ(a.call(Allocator::Create, 24 * kMiB), 0) << "an unregistered device: unseen";
  EXPECT_EQ(read(id).bytes, 0u);
  auto sys = fs::Root::open("/sys");
  ASSERT_TRUE(sys);
  auto rules = bpf::discoverDeviceRules(*sys);
  auto added = charge_->addDevices(rules);
  ASSERT_TRUE(added) << added.error().message;
  EXPECT_EQ(*added, rules.size());
  EXPECT_EQ(*charge_->addDevices(rules), 0u) << "registered once";
  EXPECT_EQ(charge_->devices().size(), rules.size());
  EXPECT_EQ(a.call(Allocator::Create, 24 * kMiB), -ENOMEM);
  EXPECT_EQ(a.call(Allocator::Create, 8 * kMiB), 0);
  EXPECT_EQ(read(id).bytes, 8 * kMiB);
}

// What the programs could not do exactly is read from the kernel, the
// recursion misses of the tracing programs among it.
TEST_F(VmKernelCharge, TheProgramsMissesAndCountersAreRead) {
  auto t = charge_->totals();
  ASSERT_TRUE(t.recursionMisses) << "read from each tracing program's info";
  EXPECT_EQ(*t.recursionMisses, 0u);
  EXPECT_GE(t.objectsCapacity, bpf::kMinObjects);
  EXPECT_EQ(t.staleObjects + t.insertFailed + t.untrackedFull + t.orphanUncharges, 0u);
}

}  // namespace
}  // namespace tally
