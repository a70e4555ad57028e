// The Slurm example set ships as files (dist/slurm, installed under the
// package's examples; VmSlurm.TheShippedExampleSet… runs them) and is shown
// in docs/slurm.md: every line of a file that is not a comment is a whole
// line of the document, so a line changed in the files must change there
// too. (One way only: a line the page shows and the files lack is not caught.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tally {
namespace {

namespace stdfs = std::filesystem;

std::string readWhole(const stdfs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SlurmExamples, EveryLineOfTheShippedFilesIsInTheDocsAsItIs) {
  const stdfs::path root = TALLY_SOURCE_DIR;
  std::string doc = readWhole(root / "docs/slurm.md");
  ASSERT_FALSE(doc.empty());
  int files = 0;
  for (const auto& entry : stdfs::directory_iterator(root / "dist/slurm")) {
    ++files;
    std::istringstream in(readWhole(entry.path()));
    int lines = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      ++lines;
      EXPECT_NE(doc.find("\n" + line + "\n"), std::string::npos)
          << entry.path().filename().string() << ": docs/slurm.md does not show \"" << line << "\"";
    }
    EXPECT_GT(lines, 0) << entry.path();
  }
  EXPECT_EQ(files, 5) << "slurm.conf, gres.conf, cgroup.conf, plugstack.conf, tally.toml";
}

}  // namespace
}  // namespace tally
