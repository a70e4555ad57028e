// The map in docs/ARCHITECTURE.md is the rule the code's includes follow: a
// folder of src/ includes only folders on floors below its own. This test
// reads the floors table from the document itself (one rule, kept in one
// place, where people read it) and every include in src/, and fails on an
// include that runs sideways or up, on a folder the table does not place,
// and on a comment or document that names a source file the repository does
// not have.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace tally {
namespace {

namespace stdfs = std::filesystem;

struct SourceFile {
  std::string path;  // relative to src/: "daemon/service.cpp"
  std::string text;
};

std::string readWhole(const stdfs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool folderChar(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }

// " floor 10  daemon/   run/   slurm/     the daemon; ..." -> {daemon, run,
// slurm} on 10. Only lines that start (after blanks) with "floor N".
std::map<std::string, int> parseFloors(std::string_view doc) {
  std::map<std::string, int> floors;
  std::istringstream lines{std::string(doc)};
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string word;
    int floor = 0;
    if (!(words >> word) || word != "floor" || !(words >> floor)) continue;
    while (words >> word) {
      if (word.size() < 2 || word.back() != '/') break;  // the description begins
      std::string name = word.substr(0, word.size() - 1);
      bool ok = true;
      for (char c : name) ok = ok && folderChar(c);
      if (!ok) break;
      floors[name] = floor;
    }
  }
  return floors;
}

// Every problem with the includes of `files` against `floors`, one line each.
std::vector<std::string> floorViolations(const std::map<std::string, int>& floors,
                                         const std::vector<SourceFile>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) {
    std::string from = f.path.substr(0, f.path.find('/'));
    auto own = floors.find(from);
    if (own == floors.end()) {
      out.push_back("src/" + from + "/ is on no floor of docs/ARCHITECTURE.md's table");
      continue;
    }
    std::istringstream lines(f.text);
    int n = 0;
    for (std::string line; std::getline(lines, line);) {
      ++n;
      constexpr std::string_view kInclude = "#include \"";
      if (line.rfind(kInclude, 0) != 0) continue;
      std::string target = line.substr(kInclude.size());
      auto slash = target.find('/');
      if (slash == std::string::npos) continue;
      std::string to = target.substr(0, slash);
      if (to == from) continue;
      auto theirs = floors.find(to);
      if (theirs == floors.end()) {
        out.push_back("src/" + f.path + ":" + std::to_string(n) + " includes " + to +
                      "/, which is on no floor");
      } else if (theirs->second >= own->second) {
        out.push_back("src/" + f.path + ":" + std::to_string(n) + " includes " + to + "/ (floor " +
                      std::to_string(theirs->second) + ") from " + from + "/ (floor " +
                      std::to_string(own->second) + "): a folder includes only floors below it");
      }
    }
  }
  return out;
}

// Whether text[i] starts a path under "src/" or "tests/unit/" written from
// the repository's root ("src/daemon/lease.h"), not inside a longer path.
bool afterRepositoryPrefix(std::string_view text, std::size_t i) {
  for (std::string_view prefix : {"src/", "tests/unit/"}) {
    if (i < prefix.size() || text.substr(i - prefix.size(), prefix.size()) != prefix) continue;
    std::size_t start = i - prefix.size();
    if (start == 0) return true;
    char before = text[start - 1];
    return !(folderChar(before) || before == '/' || before == '.' || before == '-');
  }
  return false;
}

// Paths like "daemon/lease.h" that `text` names, where the first part is one
// of `folders` and the token is not part of a longer path ("kernel/cgroup/
// dmem.c" names the kernel's file, not src/cgroup/dmem.c).
std::vector<std::string> citedSources(std::string_view text, const std::set<std::string>& folders) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!folderChar(text[i])) continue;
    if (i > 0 && !afterRepositoryPrefix(text, i)) {
      char before = text[i - 1];
      if (folderChar(before) || before == '/' || before == '.' || before == '-' ||
          (before >= 'A' && before <= 'Z') || (before >= '0' && before <= '9') || before == '<')
        continue;
    }
    std::size_t j = i;
    while (j < text.size() && folderChar(text[j])) ++j;
    if (j >= text.size() || text[j] != '/' || !folders.count(std::string(text.substr(i, j - i)))) {
      i = j;
      continue;
    }
    std::size_t k = j + 1;
    while (k < text.size() && (folderChar(text[k]) || (text[k] >= '0' && text[k] <= '9') ||
                               text[k] == '.' || text[k] == '/'))
      ++k;
    std::string token(text.substr(i, k - i));
    while (!token.empty() && (token.back() == '.' || token.back() == '/')) token.pop_back();
    for (std::string_view ext : {".h", ".cpp", ".c"}) {
      if (token.size() > ext.size() &&
          token.compare(token.size() - ext.size(), ext.size(), ext) == 0) {
        out.push_back(token);
        break;
      }
    }
    i = k;
  }
  return out;
}

const stdfs::path kRoot = TALLY_SOURCE_DIR;

std::vector<SourceFile> sourceTree() {
  std::vector<SourceFile> files;
  for (const auto& e : stdfs::recursive_directory_iterator(kRoot / "src")) {
    if (!e.is_regular_file()) continue;
    auto ext = e.path().extension();
    if (ext != ".h" && ext != ".cpp" && ext != ".c") continue;
    files.push_back({stdfs::relative(e.path(), kRoot / "src").string(), readWhole(e.path())});
  }
  return files;
}

std::set<std::string> srcFolders() {
  std::set<std::string> out;
  for (const auto& e : stdfs::directory_iterator(kRoot / "src"))
    if (e.is_directory()) out.insert(e.path().filename().string());
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(Floors, TheTableIsReadFromTheDocumentsOwnLines) {
  auto floors = parseFloors(
      "```\n"
      " floor 3  cgroup/  devices/      a cgroup held as a directory fd; DRM devices\n"
      "                                 classes/ that wrap onto a second line\n"
      " floor  1  util/                  Result, owned fds\n"
      "```\n"
      "A floor of its own is not a table line: floor 9 is not either.\n");
  EXPECT_EQ(floors, (std::map<std::string, int>{{"cgroup", 3}, {"devices", 3}, {"util", 1}}));
}

TEST(Floors, AnIncludeUpOrSidewaysIsCaughtWithItsFileAndLine) {
  std::map<std::string, int> floors{{"util", 1}, {"cgroup", 3}, {"devices", 3}, {"daemon", 10}};
  std::vector<SourceFile> files{
      {"daemon/a.cpp", "#include \"cgroup/cgroup.h\"\n#include \"daemon/a.h\"\n"},  // down: fine
      {"util/text.cpp", "// x\n#include \"daemon/lease.h\"\n"},                     // up
      {"cgroup/x.cpp", "#include \"devices/ttm.h\"\n"},                             // sideways
      {"devices/y.cpp", "#include <cgroup/z.h>\n#include \"views/top.h\"\n"},       // no floor
      {"views/top.cpp", "\n"},                                                      // unplaced
  };
  auto v = floorViolations(floors, files);
  ASSERT_EQ(v.size(), 4u) << joined(v);
  EXPECT_EQ(v[0],
            "src/util/text.cpp:2 includes daemon/ (floor 10) from util/ (floor 1): a folder "
            "includes only floors below it");
  EXPECT_EQ(v[1],
            "src/cgroup/x.cpp:1 includes devices/ (floor 3) from cgroup/ (floor 3): a folder "
            "includes only floors below it");
  EXPECT_EQ(v[2], "src/devices/y.cpp:2 includes views/, which is on no floor");
  EXPECT_EQ(v[3], "src/views/ is on no floor of docs/ARCHITECTURE.md's table");
}

// The real tree against the real document: adding an include against the
// table (or a folder the table does not place) fails here.
TEST(Floors, EveryIncludeInSrcRunsDownTheArchitectureTable) {
  auto floors = parseFloors(readWhole(kRoot / "docs/ARCHITECTURE.md"));
  auto folders = srcFolders();
  for (const auto& folder : folders)
    EXPECT_TRUE(floors.count(folder)) << "src/" << folder << "/ is missing from the table";
  for (const auto& [folder, floor] : floors)
    EXPECT_TRUE(folders.count(folder)) << folder << "/ (floor " << floor << ") is not in src/";
  auto v = floorViolations(floors, sourceTree());
  EXPECT_TRUE(v.empty()) << joined(v);
}

TEST(Citations, OnlyWholeRepositoryPathsAreTakenAsCitations) {
  std::set<std::string> folders{"cgroup", "daemon", "bpf"};
  auto cited = citedSources(
      "see daemon/lease.h and (cgroup/subtree.cpp), not kernel/cgroup/dmem.c, not <bpf/libbpf.h>,"
      " not daemon/ alone nor daemon/README, and bpf/gpu_charge.bpf.c; src/cgroup/path.h,"
      " tests/unit/daemon/views_test.cpp, not linux/src/cgroup/x.c.",
      folders);
  EXPECT_EQ(cited, (std::vector<std::string>{"daemon/lease.h", "cgroup/subtree.cpp",
                                             "bpf/gpu_charge.bpf.c", "cgroup/path.h",
                                             "daemon/views_test.cpp"}));
}

// A comment or a document that sends the reader to a file must send them to
// one that exists: src/<path>, or a test under tests/unit/<path>.
TEST(Citations, EveryFileACommentOrDocumentNamesExists) {
  auto folders = srcFolders();
  std::vector<std::pair<std::string, std::string>> texts;  // where, text
  for (const auto& f : sourceTree()) texts.push_back({"src/" + f.path, f.text});
  for (const auto& e : stdfs::recursive_directory_iterator(kRoot / "docs"))
    if (e.is_regular_file() && e.path().extension() == ".md")
      texts.push_back({stdfs::relative(e.path(), kRoot).string(), readWhole(e.path())});
  texts.push_back({"README.md", readWhole(kRoot / "README.md")});
  std::vector<std::string> missing;
  for (const auto& [where, text] : texts) {
    for (const auto& cited : citedSources(text, folders)) {
      if (stdfs::exists(kRoot / "src" / cited) || stdfs::exists(kRoot / "tests/unit" / cited))
        continue;
      missing.push_back(where + " names " + cited + ", which the repository does not have");
    }
  }
  EXPECT_TRUE(missing.empty()) << joined(missing);
}

}  // namespace
}  // namespace tally
