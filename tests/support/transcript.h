// Output quoted in the docs, checked against what the binary prints today.
//
// A page marks the region a producer writes (a VM script run by a VM test):
//   <!-- transcript: vm/guide-example.sh -->  …  <!-- /transcript -->
// Inside it, every fenced block without an info string is a transcript or an
// excerpt. In a transcript, lines that begin with a prompt ("$ ", "alice$ ")
// are commands, the lines after each one its output; an excerpt has no
// command: its lines must come, in order, in what the producer printed (a
// journal's lines, a plugin's message). A block in a list is indented with
// its fence. The producer prints the same shape ("$ CMD",
// its output, "[exit status N]"). Each quoted command must be one the producer
// ran (quotes and a trailing "  # comment" aside), and its quoted output what
// one run of it printed, once the parts that differ from run to run are
// masked (ids, clocks, measured figures: see masked()). A quoted "…" line
// stands for any number of lines, and a line ending in "…" for any line it
// begins (what a race decides: whether systemd removed a cgroup before the
// daemon read it), one beginning with "…" for any line it ends. Rows that
// begin with a lease id, and a metric's series labelled by one, are compared
// in any order (listings are in id order, new each run); journal and event
// lines keep theirs. The checkout's path reads as /work/main. A producer is a
// file of the tree, with "#TAG" when one file produces several runs a page
// quotes (a test run on each kernel: "tests/vm/system_test.cpp#6.1").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tally::testing {

struct TranscriptStep {
  std::string prompt;               // "$ ", "alice$ ": whose command it is
  std::string command;              // without its prompt
  std::vector<std::string> output;  // trailing blank lines and "[exit status 0]" dropped
  std::size_t line = 0;             // 1-based, in the text it came from
};

// "$ tally seats" → "tally seats"; a line that is no command → npos.
std::size_t promptLength(std::string_view line);

std::vector<TranscriptStep> parseTranscript(std::string_view text, std::size_t firstLine = 1);

// A block is a transcript (it begins with a command: `steps`) or an excerpt
// of output (no command: `excerpt`, its lines as quoted).
struct QuotedTranscript {
  std::size_t line = 0;  // the block's first line in the page, 1-based
  std::vector<TranscriptStep> steps;
  std::vector<std::string> excerpt;
};

struct PageTranscripts {
  std::vector<QuotedTranscript> blocks;
  std::vector<std::string> problems;  // a region not closed, a block that is no transcript
};

// The transcript blocks of the page's regions written by `producer`.
PageTranscripts quotedTranscripts(std::string_view page, std::string_view producer);

// One line as compared: lease and container ids, sizes, every other digit
// run (with its sign: "-4096" and "+0" read "0") and runs of spaces read the
// same in every run ("86c89fb81241  64.9M/512M 12%" → "ID SIZE/SIZE 0%"), and
// so do a chart's axis marks (its bars, data, are dropped); words, columns, a figure's absence
// ("-"), a dash between digits (dates, versions), exit codes and line order
// stay.
std::string masked(std::string_view line);

// Empty when every quoted step matches one the producer ran; otherwise one
// message per difference, naming the page's line and showing both. Excerpts
// are not steps: see excerptDifferences.
std::vector<std::string> transcriptDifferences(const PageTranscripts& quoted,
                                               const std::vector<TranscriptStep>& produced);

// Empty when every excerpt's lines, masked, come one after another in this
// order in one command's output in `produced` (or in what it printed before
// any command; a "…" line standing for any lines, as in a transcript);
// otherwise one message per excerpt that does not. What a
// producer prints without a command (a journal, a plugin's message) is
// quoted this way.
std::vector<std::string> excerptDifferences(const PageTranscripts& quoted,
                                            std::string_view produced);

// `produced` with the checkout's path written as the docs write it (/work/main).
std::string asTheDocsWriteIt(std::string_view produced);

// The page at `pagePath` (under the source tree) against `produced`, the
// output of its region's producer: every difference, or that the page has no
// region for it. What a test of a page calls.
std::vector<std::string> pageDifferences(const std::string& pagePath, std::string_view producer,
                                         std::string_view produced);

// `page` with each quoted step's output replaced by what `produced` printed
// for the same command (the n-th quote of a command by the n-th run of it,
// in page order, or by its last run): how a page is refreshed from a
// test's transcript (tests/tools/doc_transcripts.cpp). A quote with a line
// ending in "…" is left as it is, for a person to cut again.
std::string refreshedPage(std::string_view page, std::string_view producer,
                          std::string_view produced);

// The lines of a page that quote output no test produces: a bare fenced
// block (at the margin or indented: a bare fence is what a program printed)
// outside every transcript region, and a region mark that is malformed.
std::vector<std::size_t> unproducedTranscriptBlocks(std::string_view page);

}  // namespace tally::testing
