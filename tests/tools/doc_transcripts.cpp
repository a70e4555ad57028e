// tally_doc_transcripts: a page's quoted output against a producer's run,
// from the host, where the docs are writable (the VM's view of the tree is
// read-only). Reads the transcript a VM test printed (a whole log will do:
// the part between "[ transcript of PRODUCER ]" and "[ end of transcript ]"),
// prints each difference, and with --write refreshes the page from the run.
//   tally_doc_transcripts PAGE PRODUCER LOG [--write]
//   e.g. build/release/tests/tally_doc_transcripts docs/guide/strix-halo.md
//          vm/guide-example.sh /tmp/tally-vm-logs.*/docs.log --write
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "support/transcript.h"

namespace {

std::string readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5 || (argc == 5 && std::strcmp(argv[4], "--write") != 0)) {
    fmt::print(stderr, "usage: tally_doc_transcripts PAGE PRODUCER LOG [--write]\n");
    return 2;
  }
  const std::string page = argv[1], producer = argv[2], log = readWhole(argv[3]);
  std::string produced = log;
  const std::string open = "[ transcript of " + producer + " ]\n", close = "[ end of transcript ]";
  if (auto at = log.find(open); at != std::string::npos) {
    at += open.size();
    produced = log.substr(at, log.find(close, at) - at);
  }
  auto differences = tally::testing::pageDifferences(page, producer, produced);
  for (const auto& d : differences) fmt::print("{}\n", d);
  if (argc == 5) {
    std::string path = std::string(TALLY_SOURCE_DIR) + "/" + page;
    std::string text = tally::testing::refreshedPage(readWhole(path), producer,
                                                     tally::testing::asTheDocsWriteIt(produced));
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    auto left = tally::testing::pageDifferences(page, producer, produced);
    fmt::print(stderr, "{}: {} differences, {} after the refresh\n", page, differences.size(),
               left.size());
    return left.empty() ? 0 : 1;
  }
  return differences.empty() ? 0 : 1;
}
