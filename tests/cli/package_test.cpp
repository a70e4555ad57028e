// What `cmake --install` puts on a machine (the staging root build/stage, made
// by the tally_stage target): the files, a man page man(1) renders without a
// warning, bash completion that offers every option --help lists, an example
// config `tally config check` accepts, and units naming the installed paths.
// systemd-analyze verify runs on these units in the VM (tests/vm/package_test.cpp).
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "cli_fixture.h"
#include "support/fake_host.h"
#include "support/process.h"
#include "support/transcript.h"

namespace tally {
namespace {

using namespace tally::testing;

const std::string kStage = TALLY_STAGE_DIR;
const std::string kPrefix = kStage + "/usr/local";

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

TEST(Package, InstallsTheBinaryUnitsManPageCompletionAndExample) {
  for (const char* f :
       {"/bin/tally", "/lib/systemd/system/tally.service", "/lib/systemd/user/tally.service",
        "/share/man/man1/tally.1", "/share/bash-completion/completions/tally",
        "/share/doc/tally/examples/tally.toml", "/share/doc/tally/guide/README.md",
        "/share/doc/tally/examples/grafana/tally.json",
        "/share/doc/tally/examples/prometheus/tally.rules.yml"}) {
    EXPECT_TRUE(exists(kPrefix + f)) << kPrefix + f;
  }
  std::string unit = readFile(kPrefix + "/lib/systemd/system/tally.service");
  EXPECT_NE(unit.find("\nType=notify\n"), std::string::npos);
  EXPECT_NE(unit.find("\nExecStart=/usr/local/bin/tally daemon --config /etc/tally/tally.toml\n"),
            std::string::npos)
      << unit;
  EXPECT_NE(unit.find("\nProtectSystem=strict\n"), std::string::npos);
  EXPECT_EQ(unit.find("@TALLY_"), std::string::npos) << "an unconfigured placeholder";
  std::string user = readFile(kPrefix + "/lib/systemd/user/tally.service");
  EXPECT_NE(user.find("\nExecStart=/usr/local/bin/tally daemon --config %E/tally/tally.toml\n"),
            std::string::npos)
      << user;
  auto check = runProgram({kPrefix + "/bin/tally", "config", "check",
                           kPrefix + "/share/doc/tally/examples/tally.toml"});
  // Valid where the package's group exists (systemd-sysusers makes it);
  // elsewhere the missing group is the one thing config check finds.
  if (::getgrnam("tally")) {
    EXPECT_EQ(check.exitCode(), 0) << check.out << check.err;
  } else {
    EXPECT_EQ(check.exitCode(), 1) << check.out << check.err;
    EXPECT_NE(check.err.find("daemon.socket_group 'tally' does not exist on this host"),
              std::string::npos)
        << check.err;
    EXPECT_EQ(check.err.find("would refuse"), std::string::npos) << check.err;
  }
}

// The Slurm plugin lands in Slurm's own PluginDir whatever tally's prefix
// (Slurm never looks under /usr/local/lib/slurm-wlm), next to Slurm's own plugins.
TEST(Package, TheSlurmPluginGoesWhereSlurmLooks) {
  const std::string pluginDir = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
  ASSERT_TRUE(exists(pluginDir + "/proctrack_cgroup.so"))
      << "Slurm's plugins are not where this test expects: install slurmd "
         "(scripts/install-deps.sh)";
  EXPECT_TRUE(exists(kStage + pluginDir + "/tally_spank.so"));
  // It loads no C++ runtime (libstdc++, libgcc_s, libfmt) into srun and
  // slurmstepd (C programs) at every step: C's libraries and the loader only
  // (src/CMakeLists.txt says why).
  auto dynamic = runProgram({"readelf", "-d", "-W", kStage + pluginDir + "/tally_spank.so"});
  ASSERT_EQ(dynamic.exitCode(), 0) << dynamic.err;
  std::set<std::string> needed;
  std::istringstream lines(dynamic.out);
  static const std::regex kNeeded(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  for (std::string line; std::getline(lines, line);)
    if (std::smatch m; std::regex_search(line, m, kNeeded)) needed.insert(m[1]);
  EXPECT_TRUE(needed.count("libc.so.6"));
  // A sanitized build's runtimes aside: the shipped build has none.
  const std::set<std::string> allowed = {"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2",
                                         "libasan.so.8", "libubsan.so.1"};
  for (const auto& lib : needed) EXPECT_TRUE(allowed.count(lib)) << "tally_spank.so needs " << lib;
  EXPECT_FALSE(exists(kPrefix + "/lib/slurm-wlm/tally_spank.so"));
  EXPECT_FALSE(exists(kPrefix + "/lib/x86_64-linux-gnu/slurm-wlm/tally_spank.so"));
}

// A stripped binary, operators' docs only, and zsh and fish completion that
// offer every subcommand and every option --help lists (they are written from
// the same command-line model, so this holds by construction; the test keeps it so).
TEST(Package, AStrippedBinaryUserDocsAndZshAndFishCompletion) {
  auto sections = runProgram({"readelf", "-S", "-W", kPrefix + "/bin/tally"});
  ASSERT_EQ(sections.exitCode(), 0) << sections.err;
  EXPECT_EQ(sections.out.find(".symtab"), std::string::npos)
      << "the installed binary is not stripped";
  EXPECT_EQ(sections.out.find(".debug_info"), std::string::npos);
  for (const char* doc : {"/share/doc/tally/run.md", "/share/doc/tally/doctor.md",
                          "/share/doc/tally/guide/install.md"})
    EXPECT_TRUE(exists(kPrefix + doc)) << doc;
  for (const char* dev : {"/share/doc/tally/PERFORMANCE.md", "/share/doc/tally/testing.md",
                          "/share/doc/tally/vm-harness.md"})
    EXPECT_FALSE(exists(kPrefix + dev)) << dev << " is for developers, not installed";
  EXPECT_NE(readFile(std::string(TALLY_STAGE_DIR) + "/../CMakeCache.txt")
                .find("\nTALLY_BENCH:BOOL=OFF\n"),
            std::string::npos)
      << "the default build builds no benchmark (the release preset does)";
  std::string zsh = readFile(kPrefix + "/share/zsh/vendor-completions/_tally");
  std::string fish = readFile(kPrefix + "/share/fish/vendor_completions.d/tally.fish");
  EXPECT_EQ(zsh.rfind("#compdef tally\n", 0), 0u);
  for (const char* cmd : {"run", "attach", "ledger", "doctor", "gpu", "top", "events"}) {
    EXPECT_NE(zsh.find(std::string("'") + cmd + ":"), std::string::npos) << cmd;
    EXPECT_NE(fish.find(std::string("-a ") + cmd + " "), std::string::npos) << cmd;
  }
  for (const char* opt : {"memory-max", "gpu-memory-max", "quiet", "force", "since", "timeout"}) {
    EXPECT_NE(zsh.find(std::string("'--") + opt + "["), std::string::npos) << opt;
    EXPECT_NE(fish.find(std::string(" -l ") + opt + " "), std::string::npos) << opt;
  }
  // Each shell parses its file (scripts/install-deps.sh installs both).
  auto zshOk = runProgram({"zsh", "-n", kPrefix + "/share/zsh/vendor-completions/_tally"});
  EXPECT_EQ(zshOk.exitCode(), 0) << zshOk.err;
  auto fishOk =
      runProgram({"fish", "--no-execute", kPrefix + "/share/fish/vendor_completions.d/tally.fish"});
  EXPECT_EQ(fishOk.exitCode(), 0) << fishOk.err;
  // fish loads it and completes an option of `tally run`.
  auto offered = runProgram({"fish", "-c",
                             "source " + kPrefix + "/share/fish/vendor_completions.d/tally.fish; " +
                                 "complete -C 'tally run --memory-m'"});
  EXPECT_NE(offered.out.find("--memory-max"), std::string::npos) << offered.out << offered.err;
}

TEST(Package, TheManPageRendersWithoutWarnings) {
  auto r = runProgram({"man", "--warnings", "-l", kPrefix + "/share/man/man1/tally.1"},
                      {"MANWIDTH=80", "MAN_KEEP_FORMATTING=0"});
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  EXPECT_EQ(r.err, "");
  // man overstrikes for bold ("N\bN") when not on a terminal: keep the letters.
  std::string plain;
  for (char c : r.out) {
    if (c == '\b') {
      if (!plain.empty()) plain.pop_back();
    } else {
      plain += c;
    }
  }
  r.out = plain;
  for (const char* want :
       {"NAME", "tally top", "--gpu-memory-max", "EXIT STATUS", "/etc/tally/tally.toml"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want;
  }
  EXPECT_EQ(r.out.find("@"), std::string::npos) << "an unconfigured placeholder";
}

// The options `tally <cmd> --help` lists.
std::set<std::string> helpOptions(const std::vector<std::string>& cmd) {
  std::vector<std::string> argv = {TALLY_BINARY};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  argv.push_back("--help");
  std::string out = runProgram(argv).out;
  std::set<std::string> opts;
  // "-h,--help", "-q,--quiet", "--last,--limit": every long name of the option.
  static const std::regex re("^  ((?:-[a-z],)?--[a-z][a-z-]+(?:,--[a-z][a-z-]+)*)");
  static const std::regex name("--[a-z][a-z-]+");
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, re)) continue;
    std::string names = m[1];
    for (auto it = std::sregex_iterator(names.begin(), names.end(), name);
         it != std::sregex_iterator(); ++it)
      opts.insert(it->str());
  }
  // Root options (fallthrough) are listed under every command; completion offers them only where
  // they matter.
  for (const char* root : {"--proc-root", "--sys-root", "--cgroup-root", "--version"})
    opts.erase(root);
  return opts;
}

// What the completion offers after `tally <words> <cur>`.
std::set<std::string> completed(const std::vector<std::string>& words,
                                const std::string& cur = "-") {
  std::string line = "tally";
  for (const auto& w : words) line += " " + w;
  std::string script = ". /usr/share/bash-completion/bash_completion; . '" + kPrefix +
                       "/share/bash-completion/completions/tally'; COMP_LINE='" + line + " " + cur +
                       "'; COMP_WORDS=(" + line + " '" + cur +
                       "'); COMP_CWORD=" + std::to_string(words.size() + 1) +
                       "; COMP_POINT=${#COMP_LINE}; _tally; printf '%s\\n' \"${COMPREPLY[@]}\"";
  auto r = runProgram({"bash", "-c", script}, {"PATH=/usr/bin:/bin"});
  std::set<std::string> out;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    if (!l.empty()) out.insert(l);
  }
  return out;
}

TEST(Package, BashCompletionOffersEveryOptionHelpLists) {
  for (const auto& cmd : clitest::commandPaths()) {
    auto help = helpOptions(cmd);
    ASSERT_FALSE(help.empty()) << cmd[0];
    auto offered = completed(cmd);
    for (const auto& o : help)
      EXPECT_TRUE(offered.count(o)) << "tally " << cmd[0] << ": completion lacks " << o;
    for (const auto& o : offered)
      EXPECT_TRUE(help.count(o)) << "tally " << cmd[0] << ": completion offers " << o
                                 << ", which --help lacks";
  }
  // Commands, and values tally can name.
  auto top = completed({}, "");
  EXPECT_TRUE(top.count("seats") && top.count("top") && top.count("metrics") && top.count("run"));
  std::string script = ". /usr/share/bash-completion/bash_completion; . '" + kPrefix +
                       "/share/bash-completion/completions/tally'; COMP_WORDS=(tally run "
                       "--gpu-memory-action ''); COMP_CWORD=3; _tally; "
                       "printf '%s\\n' \"${COMPREPLY[@]}\"";
  EXPECT_EQ(runProgram({"bash", "-c", script}).out, "refuse\nkill\nreport\n");
  // Generated from the command line's model: subcommands, the sets commands
  // check themselves, never the hidden `completion` command.
  EXPECT_FALSE(top.count("completion"));
  EXPECT_EQ(completed({"lease"}, ""), (std::set<std::string>{"release", "show"}));
  EXPECT_EQ(completed({"events", "--kind"}, "gpu-memory-h"),
            (std::set<std::string>{"gpu-memory-high", "gpu-memory-high-cleared"}));
  auto outcomes = completed({"ledger", "--outcome"}, "");
  EXPECT_TRUE(outcomes.count("killed-by-tally") && outcomes.count("withdrawn") &&
              outcomes.count("oom-killed"))
      << outcomes.size();
  // A value nobody can list completes nothing, not the command's options.
  EXPECT_TRUE(completed({"run", "--memory-max"}, "").empty());
  // The word after an option that takes a value is that value, not a command.
  EXPECT_TRUE(completed({"attach", "--name", "lease"}).count("--pool"));
}

// docs/run.md's synopsis names every option `tally run --help` lists, and
// nothing it does not: a new option cannot leave the page behind.
TEST(Docs, RunsSynopsisNamesEveryOptionOfItsHelp) {
  std::string page = readFile(std::string(TALLY_SOURCE_DIR) + "/docs/run.md");
  auto at = page.find("```text\ntally run [");
  ASSERT_NE(at, std::string::npos);
  std::string synopsis = page.substr(at, page.find("```", at + 4) - at);
  std::set<std::string> named;
  static const std::regex name("--[a-z][a-z-]+");
  for (auto it = std::sregex_iterator(synopsis.begin(), synopsis.end(), name);
       it != std::sregex_iterator(); ++it)
    named.insert(it->str());
  auto help = helpOptions({"run"});
  help.erase("--help");
  for (const auto& o : help) EXPECT_TRUE(named.count(o)) << "docs/run.md's synopsis lacks " << o;
  for (const auto& o : named)
    EXPECT_TRUE(help.count(o)) << "docs/run.md names " << o << ", which tally run lacks";
}

// Every shell block in README.md and docs/ says what it is: `runnable` (the
// VM runs it as written: VmPackage.TheGuidesRunnableBlocksRunAsWritten, which
// reads docs/guide/ only) or `illustrative` (it needs a real GPU, a cluster,
// or a site's own paths). A block that says neither would drift unnoticed.
TEST(Docs, EveryShellBlockIsRunnableInTheVmOrMarkedIllustrative) {
  namespace fs = std::filesystem;
  std::vector<std::string> pages = {std::string(TALLY_SOURCE_DIR) + "/README.md"};
  for (const auto& e : fs::recursive_directory_iterator(std::string(TALLY_SOURCE_DIR) + "/docs"))
    if (e.path().extension() == ".md") pages.push_back(e.path().string());
  static const std::regex fence("^```(sh|bash|console|shell|zsh)( [a-z]+)?$");
  std::size_t runnable = 0, blocks = 0;
  for (const auto& page : pages) {
    std::istringstream lines(readFile(page));
    bool inside = false;
    int n = 0;
    for (std::string l; std::getline(lines, l);) {
      ++n;
      if (l.rfind("```", 0) != 0) continue;
      if (inside) {
        inside = l != "```";
        continue;
      }
      inside = true;
      std::smatch m;
      if (!std::regex_match(l, m, fence)) continue;
      ++blocks;
      std::string mark = m[2].matched ? m[2].str().substr(1) : "";
      EXPECT_TRUE(mark == "runnable" || mark == "illustrative")
          << page << ":" << n << ": " << l << " (mark it runnable or illustrative)";
      if (mark == "runnable") {
        ++runnable;
        EXPECT_NE(page.find("/docs/guide/"), std::string::npos)
            << page << ":" << n << ": the VM runs runnable blocks of docs/guide/ only";
      }
    }
  }
  EXPECT_GE(blocks, 30u);
  EXPECT_GE(runnable, 3u);
}

// Every quoted output (a bare fenced block: a command with its output, or an
// excerpt of what a program printed) sits in a transcript region whose
// producer a test runs and checks it against (tests/support/transcript.h):
// output the binary no longer prints cannot stay in the docs. Any other block
// says what it is with an info string ("text" for a synopsis or a diagram).
// The producer is a file of the tree ("#TAG" naming one of its runs), and a
// test names it whole.
TEST(Docs, EveryQuotedCommandsOutputIsCheckedAgainstTheBinaryByATest) {
  namespace fs = std::filesystem;
  const std::string root = TALLY_SOURCE_DIR;
  std::vector<std::string> pages = {root + "/README.md"};
  for (const auto& e : fs::recursive_directory_iterator(root + "/docs"))
    if (e.path().extension() == ".md") pages.push_back(e.path().string());
  // The tests that compare: not the comparison's own code, its unit tests or
  // its comments (tests/support, transcript_test.cpp), which name producers
  // and pages as examples.
  std::vector<std::string> testSources;
  for (const auto& e : fs::recursive_directory_iterator(root + "/tests")) {
    const std::string path = e.path().string();
    if ((e.path().extension() != ".cpp" && e.path().extension() != ".h") ||
        path.find("/tests/support/") != std::string::npos ||
        path.find("/transcript_test.cpp") != std::string::npos)
      continue;
    testSources.push_back(readFile(path));
  }
  static const std::regex marker("^ *<!-- transcript: ([^ ]+) -->$");
  std::size_t checked = 0;
  for (const auto& page : pages) {
    std::string text = readFile(page);
    for (std::size_t line : unproducedTranscriptBlocks(text))
      ADD_FAILURE() << page << ":" << line
                    << ": quoted output no test checks: put the block in a transcript region "
                       "(<!-- transcript: PRODUCER --> ... <!-- /transcript -->) whose producer "
                       "a test runs, or give the fence an info string (```text) if it is no "
                       "program's output";
    std::set<std::string> producers;
    std::istringstream lines(text);
    for (std::string l; std::getline(lines, l);)
      if (std::smatch m; std::regex_match(l, m, marker)) producers.insert(m[1].str());
    for (const auto& producer : producers) {
      EXPECT_TRUE(fs::exists(root + "/" + producer.substr(0, producer.find('#'))))
          << page << ": no producer " << producer;
      // One test file names both, as string literals: the producer it runs
      // and the page (its path from the tree's root) it compares.
      std::string relative = page.substr(root.size() + 1);
      bool compared = std::any_of(testSources.begin(), testSources.end(), [&](const auto& src) {
        return src.find("\"" + producer + "\"") != std::string::npos &&
               src.find("\"" + relative + "\"") != std::string::npos;
      });
      EXPECT_TRUE(compared) << page << ": no test file names both this page and its producer "
                            << producer << " (pageDifferences or expectPagesQuote)";
      auto quoted = quotedTranscripts(text, producer);
      EXPECT_EQ(quoted.problems, std::vector<std::string>{}) << page;
      checked += quoted.blocks.size();
    }
  }
  EXPECT_GE(checked, 25u);
}

}  // namespace
}  // namespace tally
