// The output the docs quote is what the binary prints today: each VM script
// that produced a page's quotes runs here, and every quoted command's output
// must be what this run printed, once ids, clocks and measured figures are
// masked (tests/support/transcript.h). A page that drifts from the binary
// fails here with both texts. VM harness only (real systemd, cgroup v2, the
// test DRM driver, the kernel charge where the kernel has the BPF LSM).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "support/page_quotes.h"
#include "support/process.h"

namespace tally {
namespace {

using namespace tally::testing;

const std::string kSource = TALLY_SOURCE_DIR;

// Runs `script` (a path under the source tree) with stdout and stderr as one
// terminal would show them, prints what it printed (the text to paste when a
// page is refreshed), and checks `page`'s quotes from it.
void expectPageQuotesTheRun(std::initializer_list<std::string> pages, const std::string& script,
                            const std::vector<std::string>& args,
                            const std::vector<std::string>& env = {}) {
  std::string cmd = "sh " + kSource + "/" + script;
  for (const auto& a : args) cmd += " '" + a + "'";
  auto run = runProgram({"sh", "-c", cmd + " 2>&1"}, env);
  expectPagesQuote(pages, script, run.out);
}

class VmDocs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
        << "these tests need the VM harness: vm/run.sh -- tally_vm_tests";
  }
};

// docs/guide/strix-halo.md, "What it looks like": the daemon, an attached
// server, a job the kernel charge refuses, seats, metrics, top, the journal,
// the ledger, the events, a timeline and the shipped alert rules.
TEST_F(VmDocs, TheStrixHaloExampleQuotesWhatTheBinaryPrints) {
  expectPageQuotesTheRun({"docs/guide/strix-halo.md"}, "vm/guide-example.sh",
                         {TALLY_BINARY, TALLY_VM_WORKLOAD}, {"TALLY_SOURCE=" + kSource});
  runProgram(
      {"sh", "-c",
       "systemctl stop llama-server.service tally.service; systemctl reset-failed; "
       "rm -rf /etc/tally /var/lib/tally /run/tally /tmp/tally.prom /tmp/embed-timeline.svg"});
}

// docs/run.md: every outcome class of a standalone `tally run`, the sampled
// GPU bound, the record and the ledger; docs/enforcement.md quotes its kill.
TEST_F(VmDocs, TheRunPageQuotesWhatTheBinaryPrints) {
  expectPageQuotesTheRun({"docs/run.md", "docs/enforcement.md"}, "vm/examples.sh",
                         {TALLY_BINARY, TALLY_VM_WORKLOAD});
  runProgram({"sh", "-c",
              "rm -rf /tmp/examples-state; rmdir /sys/fs/cgroup/deleg/* /sys/fs/cgroup/deleg"});
}

}  // namespace
}  // namespace tally
