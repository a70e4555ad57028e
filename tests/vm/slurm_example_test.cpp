// The example set a site starts from (dist/slurm: slurm.conf's lines,
// gres.conf, cgroup.conf, plugstack.conf and the pool in tally.toml;
// docs/slurm.md shows each) run by this VM's cluster: the files as shipped,
// with only what names a site's hardware put to this node's (the node list,
// its CPUs and RAM, the GRES count, and the plugin's and socket's paths).
// What accounting adds (AccountingStorageTRES, TRES billing, a QOS limit)
// needs slurmdbd, which this cluster does not run (docs/slurm.md says what
// slurmctld does without it).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "slurm_fixture.h"
#include "support/page_quotes.h"

namespace tally {
namespace {

using namespace tally::vmslurm;

std::string exampleFile(const std::string& name) {
  std::ifstream in(std::string(TALLY_SOURCE_DIR) + "/dist/slurm/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every occurrence of `from` in `text` made `to`; none found is the test's failure.
std::string put(std::string text, const std::string& from, const std::string& to) {
  EXPECT_NE(text.find(from), std::string::npos) << "the example no longer says " << from;
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// The VM's 1 GiB GRES for the example's 96 GiB ("96G", "96GiB").
std::string sized(std::string text) { return put(std::move(text), "96G", "1G"); }

// This node for the example's sixteen nodes.
std::string forThisNode(std::string text) {
  return sized(put(std::move(text), "halo[01-16]", shellOut("hostname -s")));
}

// The VM's slurm.conf with each key the example sets taken from the example.
std::string withExampleLines(const std::string& base, const std::string& example) {
  std::set<std::string> keys;
  std::istringstream ex(example);
  for (std::string line; std::getline(ex, line);)
    if (!line.empty() && line[0] != '#') keys.insert(line.substr(0, line.find('=')));
  std::string out;
  std::istringstream in(base);
  for (std::string line; std::getline(in, line);)
    if (!keys.contains(line.substr(0, line.find('=')))) out += line + "\n";
  return out + example;
}

TEST_F(VmSlurm, TheShippedExampleSetRunsJobsWithAndWithoutTheGres) {
  const std::vector<std::string> files = {"slurm.conf", "gres.conf", "cgroup.conf",
                                          "plugstack.conf"};
  std::map<std::string, std::string> saved;
  for (const auto& f : files) saved[f] = readFile("/etc/slurm/" + f);
  std::string daemonConfig = readFile(kConfig);
  struct Restore {
    std::map<std::string, std::string>& saved;
    std::string daemonConfig;
    ~Restore() {
      for (const auto& [f, text] : saved) writeFile("/etc/slurm/" + f, text);
      writeFile(kConfig, daemonConfig);
      shell("systemctl stop " + kDaemonUnit + "; systemctl restart slurmctld slurmd");
      startDaemon();
      nodeIdle();
    }
  } restore{saved, daemonConfig};

  std::string slurmConf = forThisNode(exampleFile("slurm.conf"));
  slurmConf = put(slurmConf, "CPUs=32", "CPUs=" + shellOut("nproc | tr -d '\\n'"));
  slurmConf = put(slurmConf, "RealMemory=28672", "RealMemory=512");
  writeFile("/etc/slurm/slurm.conf", withExampleLines(saved["slurm.conf"], slurmConf));
  writeFile("/etc/slurm/gres.conf", forThisNode(exampleFile("gres.conf")));
  writeFile("/etc/slurm/cgroup.conf", exampleFile("cgroup.conf"));
  std::string plugstack = put(exampleFile("plugstack.conf"), "tally_spank.so", kPlugin);
  writeFile("/etc/slurm/plugstack.conf", put(plugstack, "/run/tally/tally.sock", kSocket));
  // The fixture's [daemon] section (its socket, its state) and the example's pool.
  writeFile(kConfig, daemonConfig.substr(0, daemonConfig.find("\n[pools.")) + "\n" +
                         sized(exampleFile("tally.toml")));
  ASSERT_EQ(shell("systemctl stop " + kDaemonUnit + "; systemctl restart slurmctld slurmd"), 0);
  startDaemon();
  ASSERT_TRUE(nodeIdle()) << shellOut(
      "sinfo; journalctl --no-pager -u slurmctld -u slurmd | "
      "tail -n 20");

  auto doctor = tally({"doctor", "--slurm"});
  EXPECT_EQ(doctor.exitCode(), 0) << doctor.out << doctor.err;
  EXPECT_EQ(doctor.out.find("FAILED"), std::string::npos) << doctor.out;

  auto gres = runProgram({"srun", "--gres=tallymem:64M", "sh", "-c", "echo $SLURM_JOB_ID"});
  ASSERT_EQ(gres.exitCode(), 0) << gres.out << gres.err;
  std::string job = gres.out.substr(0, gres.out.find('\n'));
  json jobRows = rowsNamed("slurm-" + job), step = rowsNamed("slurm-" + job + ".0");
  ASSERT_FALSE(jobRows.empty()) << "job " << job;
  ASSERT_FALSE(step.empty()) << "job " << job;
  EXPECT_EQ(jobRows[0]["body"]["pools"], json::array({"slurm"})) << jobRows[0].dump(2);
  EXPECT_EQ(jobRows[0]["body"]["declared"]["gpu_memory_max"], 64 * kMiB);
  // PrologFlags=Contain: the extern step made the job's lease (only it says
  // so in this form; a first step that makes it says nothing of its own).
  std::string made =
      shellOut("journalctl --no-pager -o cat | grep -a 'tally: job " + job + " is tally lease '");
  EXPECT_NE(made.find(jobRows[0].value("lease", "")), std::string::npos) << made;
  EXPECT_EQ(step[0]["body"]["parent"], jobRows[0].value("lease", ""));

  // A job without the GRES runs, and is leased with no GPU memory (no_gres=refuse).
  auto cpu = runProgram({"srun", "sh", "-c", "echo $SLURM_JOB_ID"});
  ASSERT_EQ(cpu.exitCode(), 0) << cpu.out << cpu.err;
  json cpuJob = rowsNamed("slurm-" + cpu.out.substr(0, cpu.out.find('\n')));
  ASSERT_FALSE(cpuJob.empty()) << cpu.out;
  EXPECT_EQ(cpuJob[0]["body"]["declared"]["gpu_memory_max"], 0) << cpuJob[0].dump(2);
}

// docs/slurm.md's quoted output is this run of vm/slurm-examples.sh on the
// suite's cluster (plugstack.conf `required`, as the page advises): doctor
// --slurm, srun --help, a step within its GRES and one past it, the ledger,
// the journal, AdminComment, a typo, a stopped daemon, a batch script. Each
// quoted command's output is what this run printed, ids, clocks and measured
// figures masked (tests/support/transcript.h). The page quotes Debian 12's
// Slurm 22.05, whose wording it shows; other releases word srun's own lines
// otherwise.
TEST_F(VmSlurm, TheSlurmPageQuotesWhatTheBinaryPrints) {
  if (kRelease != "22.05") GTEST_SKIP() << "docs/slurm.md quotes Slurm 22.05; this is " << kRelease;
  const std::string script = "vm/slurm-examples.sh";
  auto run = runProgram({"sh", "-c",
                         fmt::format("sh {}/{} {} {} {} {} {} {} 2>&1", TALLY_SOURCE_DIR, script,
                                     kTally, kPlugin, kWorkload, kSocket, kConfig, kDaemonUnit)});
  const std::string& produced = run.out;
  expectPagesQuote({"docs/slurm.md"}, script, produced);
}

}  // namespace
}  // namespace tally
