// `tally daemon status` from the daemon's overview: uptime, leases, the
// kernel charge line as the daemon words it, coverage, and a ledger that
// cannot write said loud (and exit 1 in the command).
#include "views/daemon_status.h"

#include <gtest/gtest.h>

#include "support/overview_sample.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;

TEST(DaemonStatus, SaysUptimeLeasesTheInKernelChargeCoverageAndTheLedger) {
  json o = overviewWith(freshSeat());
  o["daemon"]["pid"] = 4242;
  o["kernel_charge"] = {{"charging", false},
                        {"refusing", false},
                        {"line",
                         "off: bpf is not in /sys/kernel/security/lsm: add lsm=...,bpf to the "
                         "kernel command line; GPU memory is metered from fdinfo and bounded by "
                         "the sampled kill"}};
  // 100 s after the start the overview_sample's daemon gives.
  auto s = views::daemonStatus(o, 1'700'000'100'000'000'000ULL, true);
  ASSERT_EQ(s.lines.size(), 5u);
  EXPECT_EQ(s.lines[0],
            "daemon: pid 4242, tally 0.9.0 (commit 0effe31abcde), up 1min 40s (since 2023-11-14 "
            "22:13:20)");
  EXPECT_EQ(s.lines[1], "leases: 1 live, 0 queued; sampled every 1s");
  EXPECT_EQ(s.lines[2],
            "kernel charge: off: bpf is not in /sys/kernel/security/lsm: add lsm=...,bpf to "
            "the kernel command line; GPU memory is metered from fdinfo and bounded by the "
            "sampled kill");
  EXPECT_EQ(s.lines[3], "coverage: MemoryMax covers host on kernel 6.12.0");
  EXPECT_EQ(s.lines[4], "ledger: /var/lib/tally/ledger.db writes");
  EXPECT_TRUE(s.ledgerWrites);

  o["ledger"] = {{"path", "/var/lib/tally/ledger.db"}, {"writes", false}, {"failure", "disk full"}};
  s = views::daemonStatus(o, 1'700'000'100'000'000'000ULL, true);
  EXPECT_FALSE(s.ledgerWrites);
  EXPECT_EQ(
      s.lines[4].rfind("ledger: /var/lib/tally/ledger.db CANNOT WRITE: disk full; new leases", 0),
      0u)
      << s.lines[4];
  // A host where no lease can be contained: said second, with why.
  o["daemon"]["containment"] = {
      {"possible", false},
      {"problems", {"no systemd (PID 1 is init)", "memory controller is on cgroup v1"}}};
  s = views::daemonStatus(o, 1'700'000'100'000'000'000ULL, true);
  EXPECT_EQ(s.lines[1],
            "containment: NONE: no lease can be contained here (no systemd (PID 1 is "
            "init),memory controller is on cgroup v1); run leases end as containment-refused "
            "(tally doctor)");
  // A reply missing its parts says so, never invents them.
  s = views::daemonStatus(json::object(), 0, true);
  EXPECT_EQ(s.lines[0], "daemon: pid ?");
  EXPECT_EQ(s.lines[1], "leases: ? live, ? queued; sampled every ?");
  EXPECT_EQ(s.lines[2], "kernel charge: not reported");
  EXPECT_TRUE(s.ledgerWrites);
}

}  // namespace
}  // namespace tally
