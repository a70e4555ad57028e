// `tally doctor --slurm` against a slurmctld that never answers: stand-ins
// for slurmd and scontrol on PATH (scontrol hangs, as over a dead link to the
// controller). The check stays inside --timeout, as NHC needs
// (check_cmd_status -t 30 kills it otherwise and drains the node): the
// first controller call gets what is left, the second is not made, and the
// check that needed it is unknown, never FAILED. (With no daemon answering,
// the checks of the node's GRES and memory are not judged at all: the VM's
// slurm_controller_test runs them against a real slurmctld.)
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "support/fake_host.h"
#include "support/process.h"

namespace tally {
namespace {

using namespace tally::testing;

TEST(DoctorSlurm, ASilentControllerLeavesItsChecksUnknownWithinTheTimeout) {
  TempDir dir;
  const std::string bin = dir.path() + "/bin";
  writeFile(bin + "/slurmd", "#!/bin/sh\necho 'slurm 22.05.8'\n");
  // A controller that never answers: blocks until killed (exec: the
  // stand-in is the process capture() kills at its deadline). No timing in it.
  writeFile(bin + "/scontrol", "#!/bin/sh\nexec tail -f /dev/null\n");
  ASSERT_EQ(::chmod((bin + "/slurmd").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((bin + "/scontrol").c_str(), 0755), 0);
  const std::string plugstack = dir.path() + "/plugstack.conf";
  writeFile(plugstack,
            "optional " + dir.path() + "/tally_spank.so socket=" + dir.path() + "/no.sock\n");
  auto r =
      runProgram({TALLY_BINARY, "doctor", "--slurm", "--timeout", "2s", "--plugstack", plugstack},
                 {"PATH=" + bin + ":/usr/bin:/bin"});
  const std::string& out = r.out;
  // The first controller call (scontrol show node) took what was left; the
  // second was not made, and its check is unknown, not FAILED.
  EXPECT_NE(out.find("\ncontain    unknown  whether PrologFlags has Contain is unknown: scontrol "
                     "show config: not run, the check's time (--timeout 2s) was spent"),
            std::string::npos)
      << out;
  // The daemon is local and asked first: its absence is FAILED (here with
  // the plugin's file, absent too), and so the exit is 1.
  EXPECT_NE(out.find("\ndaemon     FAILED"), std::string::npos) << out;
  EXPECT_EQ(r.exitCode(), 1) << out << r.err;
  auto bad = runProgram({TALLY_BINARY, "doctor", "--slurm", "--timeout", "0s"});
  EXPECT_EQ(bad.exitCode(), 2);
  EXPECT_NE(bad.err.find("--timeout 0s: must be 1s..1h"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tally
