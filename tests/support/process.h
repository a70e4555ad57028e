// Running a program from a test: argv (no shell), extra environment, stdout
// and stderr captured separately, the raw wait status kept.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace tally::testing {

struct ProgramResult {
  int waitStatus = -1;
  std::string out, err;
  int exitCode() const;  // WEXITSTATUS, or -1 when it did not exit
};

struct Spawned {
  pid_t pid = -1;
  std::string outPath, errPath;  // where its output goes
};

// `env` entries are NAME=VALUE added to (or replacing in) the test's environment.
Spawned spawnProgram(const std::vector<std::string>& argv,
                     const std::vector<std::string>& env = {});
ProgramResult waitProgram(const Spawned& s);
ProgramResult runProgram(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {});

// `sh -c CMD`: its exit status (-1 when it did not exit), and its stdout with
// trailing newlines and spaces cut. For the VM tests' systemctl and journalctl.
int shell(const std::string& cmd);
std::string shellOut(const std::string& cmd);

}  // namespace tally::testing
