// The checker that holds the docs' quoted output to what the binary prints
// (tests/support/transcript.h): what it masks, what it reads as a command,
// and that it fails on the drift it exists to catch.
#include "support/transcript.h"

#include <gtest/gtest.h>

namespace tally::testing {
namespace {

TEST(Transcript, MasksIdsClocksAndMeasuredFiguresButKeepsWordsAndColumns) {
  EXPECT_EQ(masked("86c89fb81241 llama        running  64.9M/512M  12%   256M/384M  66%    65.4M"),
            "ID llama running SIZE/SIZE 0% SIZE/SIZE 0% SIZE");
  EXPECT_EQ(masked("     7  2026-12-03 14:10:52        0s  1f61d8f848b2  finetune  exited  1  "
                   "536.0 KiB   96.0 MiB"),
            "0 0-0-0 0:0:0 0s ID finetune exited 0 SIZE SIZE");
  EXPECT_EQ(masked("/machine.slice/libpod-4ee4df0055e4dc4e4758bdcc752712b6f99627c1cad2f5248c79d98ab"
                   "ee7e197.scope/container"),
            "/machine.slice/libpod-ID.scope/container");
  EXPECT_EQ(masked("~5.8 MiB 0 B 0B 1 GPU allocation (32.0 MiB)"),
            "SIZE SIZE SIZE 0 GPU allocation (SIZE)");
  // An absent figure stays itself: "-" is not a size.
  EXPECT_NE(masked("exited  0  -"), masked("exited  0  4.0 KiB"));
}

TEST(Transcript, ASignedFiguresSignIsMaskedWithItButADashBetweenDigitsIsNot) {
  EXPECT_EQ(masked("memory.current -253952 bytes, drm-total-gtt +67108864 bytes"),
            masked("memory.current +0 bytes, drm-total-gtt +67108864 bytes"));
  EXPECT_EQ(masked("changed by -4096 bytes (x)"), "changed by 0 bytes (x)");
  EXPECT_EQ(masked("kernel 6.1.0-57-amd64, 2026-12-07"), "kernel 0.0.0-0-amd64, 0-0-0");
  EXPECT_EQ(masked("6.12.118+deb12-amd64"), "0.0.0+deb12-amd64");
  EXPECT_EQ(masked("exited with code -1"), "exited with code -1");  // an exit code stays
  auto both =
      quotedTranscripts("<!-- transcript: p -->\n```\n……\n```\n<!-- /transcript -->\n", "p");
  EXPECT_EQ(excerptDifferences(both, "abc\n").size(), 1u);  // "……" matches no line
}

TEST(Transcript, AChartKeepsItsFrameAndLabelsButNotItsData) {
  EXPECT_EQ(masked("      0 B ┤▂▂▂▂▃▃▃▃▂▂         "), "SIZE ┤");
  EXPECT_EQ(masked("          ┤                   "), masked("          ┤ ██████▆▆      "));
  EXPECT_EQ(masked("          ┤       ▆▆▆▆████   "), masked("          ┤ ██████▆▆      "));
  EXPECT_EQ(masked("          └────▲──────▲"), "└─");
  EXPECT_EQ(masked("           ▲ 14:11:02 refused"), "─ 0:0:0 refused");
  // A sample at the bound crosses the dotted max line, or just misses it
  // (CI, 2026-12-07): the line reads the same; its label stays.
  EXPECT_EQ(masked("      max ┤┄┄┄┄┄┄┄┄┄┄┄┄┄┄"), masked("      max ┤┄┄┄┄▅▅▅▅▅┄┄┄┄┄"));
  EXPECT_NE(masked("      max ┤┄┄┄┄"), masked("          ┤┄┄┄┄"));
}

TEST(Transcript, ExitCodesAndNamesKeepTheirDigitsMonthsAndSampleCountsDoNot) {
  EXPECT_NE(masked("lease x (fits) exited with code 0"),
            masked("lease x (fits) exited with code 1"));
  EXPECT_NE(masked("killed by SIGUSR1"), masked("killed by SIGUSR2"));
  EXPECT_NE(masked("memory controller is on cgroup v1"),
            masked("memory controller is on cgroup v2"));
  EXPECT_EQ(masked("Dec 07 14:36:16 vm tally[640]: epoch 1"),
            masked("Jan 01 09:00:00 vm tally[17]: epoch 2"));
  EXPECT_EQ(masked("(1 sample every 1s)"), masked("(2 samples every 1s)"));
}

TEST(Transcript, PromptsAreRootsAUsersOrPlain) {
  EXPECT_EQ(promptLength("$ tally seats"), 2u);
  // Not "# ": output has such lines (Prometheus' "# HELP", comments).
  EXPECT_EQ(promptLength("# HELP tally_leases_live"), std::string_view::npos);
  EXPECT_EQ(promptLength("alice$ tally run -- true"), 7u);
  EXPECT_EQ(promptLength("tally-deb-member$ tally leases"), 18u);
  EXPECT_EQ(promptLength("tally: lease 86c89fb81241 granted"), std::string_view::npos);
  EXPECT_EQ(promptLength("#comment"), std::string_view::npos);
  EXPECT_EQ(promptLength("$"), std::string_view::npos);
}

TEST(Transcript, StepsDropBlankTailsAndASuccessfulExitButKeepAFailedOne) {
  auto steps = parseTranscript(
      "\n$ tally attach x\nid\n[exit status 0]\n\n$ tally run y\nno\n"
      "[exit status 1]\n");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].prompt, "$ ");
  EXPECT_EQ(steps[0].command, "tally attach x");
  EXPECT_EQ(steps[0].output, std::vector<std::string>{"id"});
  EXPECT_EQ(steps[0].line, 2u);
  EXPECT_EQ(steps[1].output, (std::vector<std::string>{"no", "[exit status 1]"}));
  // apt ends its lines with CRLF; a terminal shows the same line.
  EXPECT_EQ(parseTranscript("$ apt install x\r\nSetting up x ...\r\n")[0].output,
            std::vector<std::string>{"Setting up x ..."});
}

constexpr const char* kPage = R"(# A page

<!-- transcript: vm/example.sh -->
```
$ tally seats
LEASE        NAME   USER  STATE
86c89fb81241 llama  root  running
```

```sh illustrative
tally seats
```
<!-- /transcript -->

<!-- transcript: vm/other.sh -->
```
$ tally other
x
```
<!-- /transcript -->

```
$ tally ledger
nothing checks this
```
)";

TEST(Transcript, ARegionsBlocksAreItsProducersAndOthersAreNot) {
  auto page = quotedTranscripts(kPage, "vm/example.sh");
  EXPECT_TRUE(page.problems.empty());
  ASSERT_EQ(page.blocks.size(), 1u);
  EXPECT_EQ(page.blocks[0].line, 4u);
  ASSERT_EQ(page.blocks[0].steps.size(), 1u);
  EXPECT_EQ(page.blocks[0].steps[0].command, "tally seats");
  EXPECT_EQ(page.blocks[0].steps[0].line, 5u);
  EXPECT_EQ(unproducedTranscriptBlocks(kPage), std::vector<std::size_t>{22});
}

TEST(Transcript, TheSameOutputInAnotherRunMatches) {
  auto page = quotedTranscripts(kPage, "vm/example.sh");
  auto run = parseTranscript(
      "$ tally seats\nLEASE        NAME   USER  STATE\n1f61d8f848b2 llama  root  running\n"
      "[exit status 0]\n");
  EXPECT_EQ(transcriptDifferences(page, run), std::vector<std::string>{});
}

TEST(Transcript, AColumnTheBinaryAddedIsADifferenceShownBothWays) {
  auto page = quotedTranscripts(kPage, "vm/example.sh");
  auto run = parseTranscript(
      "$ tally seats\nLEASE        NAME   USER  STATE  AGE\n1f61d8f848b2 llama  root  running  "
      "2s\n");
  auto diff = transcriptDifferences(page, run);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_NE(diff[0].find("line 5: `tally seats` is quoted as printing"), std::string::npos)
      << diff[0];
  EXPECT_NE(diff[0].find("LEASE NAME USER STATE AGE"), std::string::npos) << diff[0];
  EXPECT_NE(diff[0].find("1f61d8f848b2 llama  root  running  2s"), std::string::npos) << diff[0];
}

TEST(Transcript, AQuotedCommandTheProducerNeverRanIsADifference) {
  auto page = quotedTranscripts(kPage, "vm/example.sh");
  auto diff = transcriptDifferences(page, parseTranscript("$ tally leases\n"));
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0], "line 5: `tally seats` is quoted, but the producer never ran it");
}

TEST(Transcript, AnEllipsisStandsForAnyLinesAndAnyRunOfTheCommandMayMatch) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\n$ tally leases\nA\n…\nD\n$ tally leases\nE\n"
      "```\n<!-- /transcript -->\n",
      "p");
  auto twice = parseTranscript("$ tally leases\nA\nB\nC\nD\n$ tally leases\nE\n");
  EXPECT_TRUE(transcriptDifferences(page, twice).empty());
  auto once = parseTranscript("$ tally leases\nE\n");
  EXPECT_EQ(transcriptDifferences(page, once).size(), 1u);
  // A failed exit the quote does not show is a difference.
  auto failed = parseTranscript("$ tally leases\nA\nD\n$ tally leases\nE\n[exit status 3]\n");
  EXPECT_EQ(transcriptDifferences(page, failed).size(), 1u);
}

TEST(Transcript, ALineEndingInAnEllipsisStandsForTheLinesItBegins) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\n$ tally ledger\nunit x restarted; …\n"
      "```\n<!-- /transcript -->\n",
      "p");
  EXPECT_TRUE(transcriptDifferences(page, parseTranscript("$ tally ledger\nunit x restarted; the "
                                                          "kernel OOM killer killed none\n"))
                  .empty());
  EXPECT_TRUE(
      transcriptDifferences(page, parseTranscript("$ tally ledger\nunit x restarted; "
                                                  "whether the OOM killer acted is unknown\n"))
          .empty());
  EXPECT_EQ(
      transcriptDifferences(page, parseTranscript("$ tally ledger\nunit x stopped; it\n")).size(),
      1u);
}

TEST(Transcript, RowsKeyedByALeaseIdMatchInAnyOrderButNotOtherLines) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\n$ tally seats\nLEASE NAME\n"
      "86c89fb81241 llama\n1f61d8f848b2 comfyui\nfooter\n```\n"
      "<!-- /transcript -->\n",
      "p");
  EXPECT_TRUE(
      transcriptDifferences(page, parseTranscript("$ tally seats\nLEASE NAME\n"
                                                  "0123456789ab comfyui\nba9876543210 llama\n"
                                                  "footer\n"))
          .empty());
  EXPECT_EQ(transcriptDifferences(page, parseTranscript("$ tally seats\nfooter\n"
                                                        "0123456789ab comfyui\nba9876543210 llama\n"
                                                        "LEASE NAME\n"))
                .size(),
            1u);
}

TEST(Transcript, SeriesLabelledByALeaseIdMatchInAnyOrderEventsDoNot) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\n$ tally metrics\n"
      "x{lease=\"86c89fb81241\",key=\"a\"} 1\nx{lease=\"1f61d8f848b2\",key=\"b\"} 1\n"
      "$ tally events\nlease 86c89fb81241 (a): granted\n"
      "lease 86c89fb81241 (a): started\n```\n<!-- /transcript -->\n",
      "p");
  EXPECT_TRUE(transcriptDifferences(
                  page, parseTranscript("$ tally metrics\nx{lease=\"0123456789ab\",key=\"b\"} 1\n"
                                        "x{lease=\"ba9876543210\",key=\"a\"} 1\n$ tally events\n"
                                        "lease ba9876543210 (a): granted\n"
                                        "lease ba9876543210 (a): started\n"))
                  .empty());
  EXPECT_EQ(transcriptDifferences(
                page, parseTranscript("$ tally metrics\nx{lease=\"0123456789ab\",key=\"b\"} 1\n"
                                      "x{lease=\"ba9876543210\",key=\"a\"} 1\n$ tally events\n"
                                      "lease ba9876543210 (a): started\n"
                                      "lease ba9876543210 (a): granted\n"))
                .size(),
            1u);
}

TEST(Transcript, ACommandIsComparedExactlyButForTheRunsOwnIds) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\n"
      "$ tally run --memory-max 64M -- hog 200\nok\n"
      "$ tally lease show 86c89fb81241\nok\n"
      "$ journalctl TALLY_ATTR_SLURM_JOB_ID=2 -o cat\nok\n"
      "```\n<!-- /transcript -->\n",
      "p");
  EXPECT_TRUE(transcriptDifferences(
                  page, parseTranscript("$ tally run --memory-max 64M -- hog 200\nok\n"
                                        "$ tally lease show 1f61d8f848b2\nok\n"
                                        "$ journalctl TALLY_ATTR_SLURM_JOB_ID=37 -o cat\nok\n"))
                  .empty());
  auto other = transcriptDifferences(
      page, parseTranscript("$ tally run --memory-max 640M -- hog 2000\nok\n"
                            "$ tally lease show 1f61d8f848b2\nok\n"
                            "$ journalctl TALLY_ATTR_SLURM_JOB_ID=37 -o cat\nok\n"));
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other[0].find("never ran it"), std::string::npos);
}

TEST(Transcript, AMalformedMarkOrAnIndentedBlockIsNeverCountedAsChecked) {
  const std::string page =
      "<!-- transcript: vm/examples.sh-->\n```\n$ tally ledger\nx\n```\n<!-- /transcript -->\n"
      "- a list:\n\n   ```\n   $ scontrol show job 2\n   AdminComment=x\n   ```\n";
  EXPECT_EQ(unproducedTranscriptBlocks(page), (std::vector<std::size_t>{1, 2, 9}));
  auto quoted = quotedTranscripts(page, "vm/examples.sh");
  ASSERT_EQ(quoted.problems.size(), 1u);
  EXPECT_NE(quoted.problems[0].find("is no region mark"), std::string::npos);
  // In a region, a list's block is read without its indent.
  auto indented = quotedTranscripts(
      "<!-- transcript: p -->\n  ```\n  $ a\n  b\n  ```\n<!-- /transcript -->\n", "p");
  EXPECT_TRUE(indented.problems.empty());
  ASSERT_EQ(indented.blocks.size(), 1u);
  ASSERT_EQ(indented.blocks[0].steps.size(), 1u);
  EXPECT_EQ(indented.blocks[0].steps[0].command, "a");
  EXPECT_EQ(indented.blocks[0].steps[0].output, std::vector<std::string>{"b"});
}

TEST(Transcript, EveryBareBlockOutsideARegionIsUncheckedOutput) {
  // Output without a command is output all the same; an info string says a
  // block is something else (a synopsis, a config).
  const std::string page =
      "```\nslurmd: error: tally: x\n```\n\n```text\ntally run [--name N]\n```\n"
      "<!-- transcript: p -->\n```\ny\n```\n<!-- /transcript -->\n  ```\n  z\n  ```\n";
  EXPECT_EQ(unproducedTranscriptBlocks(page), (std::vector<std::size_t>{1, 13}));
}

TEST(Transcript, AnExcerptsLinesComeOneAfterAnotherInWhatWasPrinted) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\nslurmd: error: tally: bad key 12\n"
      "…: the step runs unbounded\n```\n<!-- /transcript -->\n",
      "p");
  ASSERT_EQ(page.blocks.size(), 1u);
  EXPECT_EQ(page.blocks[0].excerpt, (std::vector<std::string>{"slurmd: error: tally: bad key 12",
                                                              "…: the step runs unbounded"}));
  EXPECT_TRUE(page.problems.empty());
  // Anywhere, numbers masked; a line beginning with "…" matches its ending.
  EXPECT_TRUE(excerptDifferences(page,
                                 "start\nslurmd: error: tally: bad key 7\n"
                                 "Dec 07 vm slurmd[9]: the step runs unbounded\nend\n")
                  .empty());
  // Apart, in the other order, or a word changed: a difference each.
  EXPECT_EQ(excerptDifferences(page,
                               "slurmd: error: tally: bad key 7\nother\n"
                               "x: the step runs unbounded\n")
                .size(),
            1u);
  EXPECT_EQ(excerptDifferences(page,
                               "x: the step runs unbounded\n"
                               "slurmd: error: tally: bad key 7\n")
                .size(),
            1u);
  auto diff = excerptDifferences(page,
                                 "slurmd: error: tally: bad value 7\n"
                                 "x: the step runs unbounded\n");
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_NE(diff[0].find("line 2: an excerpt of output the producer never printed"),
            std::string::npos)
      << diff[0];
  // Excerpts are not steps: a transcript comparison passes them by.
  EXPECT_TRUE(transcriptDifferences(page, {}).empty());
}

TEST(Transcript, AnExcerptComesFromOneRunAndQuotesSomething) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\nbasis        x\n…\nverdict: host only\n```\n"
      "<!-- /transcript -->\n",
      "p");
  // Within one command's output the "…" skips lines; across two it does not.
  EXPECT_TRUE(
      excerptDifferences(page, "$ tally doctor\nbasis        x\nsign y\nverdict: host only\n")
          .empty());
  EXPECT_EQ(excerptDifferences(page,
                               "$ tally doctor\nbasis        x\n[exit status 1]\n"
                               "$ tally doctor --active\nverdict: host only\n")
                .size(),
            1u);
  auto nothing =
      quotedTranscripts("<!-- transcript: p -->\n```\n…\n```\n<!-- /transcript -->\n", "p");
  EXPECT_EQ(excerptDifferences(nothing, "anything\n"),
            std::vector<std::string>{"line 2: an excerpt that quotes nothing"});
}

TEST(Transcript, ALedgerListingsRowsMatchInAnyOrder) {
  // Rows in the order the leases ended, which races between a job's steps.
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\n$ tally ledger\n SEQ STARTED\n"
      "  22  2026-12-07 14:47:13  3s  70a53a4fc135  slurm-5.0\n"
      "  23  2026-12-07 14:47:12  4s  dcb2737c9b4f  slurm-5.batch\n```\n<!-- /transcript -->\n",
      "p");
  EXPECT_TRUE(
      transcriptDifferences(
          page, parseTranscript("$ tally ledger\n SEQ STARTED\n"
                                "  31  2026-12-08 09:00:01  4s  0123456789ab  slurm-9.batch\n"
                                "  32  2026-12-08 09:00:02  3s  ba9876543210  slurm-9.0\n"))
          .empty());
}

TEST(Transcript, ARefreshGivesTheCommandTheRunsIds) {
  const std::string page =
      "<!-- transcript: p -->\n```\n$ tally lease show 86c89fb81241 --svg x\nlease "
      "86c89fb81241\n```\n"
      "<!-- /transcript -->\n";
  EXPECT_EQ(
      refreshedPage(page, "p", "$ tally lease show 1f61d8f848b2 --svg x\nlease 1f61d8f848b2\n"),
      "<!-- transcript: p -->\n```\n$ tally lease show 1f61d8f848b2 --svg x\nlease "
      "1f61d8f848b2\n```\n"
      "<!-- /transcript -->\n");
}

TEST(Transcript, ACommandReadsTheSameWithoutItsQuotesOrATrailingComment) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\n"
      "$ sh -c 'echo a; echo b'      # two lines\na\nb\n"
      "```\n<!-- /transcript -->\n",
      "p");
  EXPECT_TRUE(
      transcriptDifferences(page, parseTranscript("$ sh -c echo a; echo b\na\nb\n")).empty());
  EXPECT_EQ(transcriptDifferences(page, parseTranscript("$ sh -c echo a\na\nb\n")).size(), 1u);
}

TEST(Transcript, AnUnclosedRegionOrACommandInTheMiddleOfABlockIsAProblem) {
  auto unclosed = quotedTranscripts("<!-- transcript: p -->\n```\n$ a\n```\n", "p");
  ASSERT_EQ(unclosed.problems.size(), 1u);
  EXPECT_EQ(unclosed.problems[0],
            "line 1: a transcript region is never closed (<!-- /transcript -->)");
  auto late = quotedTranscripts(
      "<!-- transcript: p -->\n```\noutput\n$ a\n```\n<!-- /transcript -->\n", "p");
  ASSERT_EQ(late.problems.size(), 1u);
  EXPECT_EQ(late.problems[0],
            "line 4: a command in the middle of a block: a transcript begins with its command, "
            "an excerpt of output has none");
  EXPECT_FALSE(transcriptDifferences(late, {}).empty());
  auto empty = quotedTranscripts("<!-- transcript: p -->\n```\n```\n<!-- /transcript -->\n", "p");
  EXPECT_EQ(empty.problems, std::vector<std::string>{"line 2: an empty block"});
}

TEST(Transcript, WhoseCommandItIsIsPartOfIt) {
  auto page = quotedTranscripts(
      "<!-- transcript: p -->\n```\nbob$ tally seats\ndenied\n```\n"
      "<!-- /transcript -->\n",
      "p");
  EXPECT_EQ(page.blocks.at(0).steps.at(0).prompt, "bob$ ");
  EXPECT_EQ(transcriptDifferences(page, parseTranscript("$ tally seats\ndenied\n")).size(), 1u);
  EXPECT_TRUE(transcriptDifferences(page, parseTranscript("bob$ tally seats\ndenied\n")).empty());
}

TEST(Transcript, ARefreshTakesTheNthRunForTheNthQuoteAndLeavesAnEllipsisAlone) {
  const std::string page =
      "text\n<!-- transcript: p -->\n```\n$ tally leases\nold one\n\n$ tally leases\nold two\n"
      "$ tally ledger\nA\n…\n```\n<!-- /transcript -->\n";
  const std::string run =
      "$ tally leases\nnew one\nline\n[exit status 0]\n\n$ tally ledger\nA\nB\n$ tally leases\n"
      "new two\n[exit status 3]\n";
  EXPECT_EQ(refreshedPage(page, "p", run),
            "text\n<!-- transcript: p -->\n```\n$ tally leases\nnew one\nline\n\n$ tally leases\n"
            "new two\n[exit status 3]\n$ tally ledger\nA\n…\n```\n<!-- /transcript -->\n");
  EXPECT_EQ(refreshedPage(page, "other", run), page);
}

// A page's test as the VM tests call it: the checkout's path reads as the
// docs' (/work/main), wherever the checkout is, and this page quotes itself.
TEST(Transcript, APageIsComparedWithTheCheckoutsPathAsTheDocsWriteIt) {
  const std::string produced =
      std::string("$ tally run -- touch /tmp/marker\n") +
      "tally: lease e16781b89103 (touch) containment-refused: the workload "
      "never ran: no systemd (PID 1 is process_api); memory controller is "
      "on cgroup v1\n[exit status 125]\n";
  EXPECT_EQ(pageDifferences("docs/run.md", "tests/cli/run_cli_test.cpp", produced),
            std::vector<std::string>{});
  auto none = pageDifferences("docs/run.md", "vm/no-such-producer.sh", produced);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_NE(none[0].find("mark its region <!-- transcript: vm/no-such-producer.sh -->"),
            std::string::npos);
  auto drifted = pageDifferences("docs/run.md", "tests/cli/run_cli_test.cpp",
                                 "$ tally run -- touch /tmp/marker\n" +
                                     std::string(TALLY_SOURCE_DIR) + "\n[exit status 125]\n");
  ASSERT_EQ(drifted.size(), 1u);
  EXPECT_EQ(drifted[0].rfind("docs/run.md:", 0), 0u) << drifted[0];
  EXPECT_NE(drifted[0].find("    /work/main\n"), std::string::npos) << drifted[0];
}

}  // namespace
}  // namespace tally::testing
