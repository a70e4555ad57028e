#include "support/transcript.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace tally::testing {
namespace {

constexpr std::string_view kRegionOpen = "<!-- transcript: ";
constexpr std::string_view kRegionClose = "<!-- /transcript -->";
constexpr std::string_view kAnyLines = "…";

// Lease, invocation and container ids: the run's own, in commands and output.
const std::regex& runIds() {
  static const std::regex ids("\\b([0-9a-f]{64}|[0-9a-f]{32}|[0-9a-f]{12})\\b");
  return ids;
}

std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

void closeStep(std::vector<TranscriptStep>& steps) {
  if (steps.empty()) return;
  auto& out = steps.back().output;
  while (!out.empty() && (out.back().empty() || out.back() == "[exit status 0]")) out.pop_back();
}

// "<!-- transcript: NAME -->" exactly gives NAME; a line that begins so and
// is not that is malformed: a region nobody could check.
struct RegionMark {
  bool open = false, malformed = false;
  std::string_view producer;
};
RegionMark regionMark(std::string_view l) {
  l.remove_prefix(std::min(l.size(), l.find_first_not_of(' ')));  // in a list, indented with it
  if (l.substr(0, kRegionOpen.size()) != kRegionOpen) return {};
  std::string_view name = l.substr(kRegionOpen.size());
  constexpr std::string_view kEnd = " -->";
  if (name.size() <= kEnd.size() || name.substr(name.size() - kEnd.size()) != kEnd)
    return {false, true, {}};
  name.remove_suffix(kEnd.size());
  if (name.find(' ') != std::string_view::npos) return {false, true, {}};
  return {true, false, name};
}

bool isRegionClose(std::string_view l) {
  l.remove_prefix(std::min(l.size(), l.find_first_not_of(' ')));
  return l == kRegionClose;
}

// A fence as Markdown reads one, indented too (a list's block): the text from
// its backticks, or npos.
std::size_t fenceAt(std::string_view l) {
  std::size_t i = l.find_first_not_of(' ');
  return i != std::string_view::npos && l.substr(i, 3) == "```" ? i : std::string_view::npos;
}

bool endsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// A quoted line that ends in "…" stands for every line it begins (the rest of
// the line differs from run to run, or says what a race decided); one that
// begins with "…", for every line it ends (a journal's time and host before a
// message); one that does both, for every line that holds it.
bool lineMatches(std::string_view quoted, std::string_view produced) {
  bool head = quoted.size() > kAnyLines.size() && quoted.substr(0, kAnyLines.size()) == kAnyLines;
  if (head) quoted.remove_prefix(kAnyLines.size());
  bool tail = endsWith(quoted, kAnyLines);
  if (tail) quoted.remove_suffix(kAnyLines.size());
  if (head && tail && quoted.empty()) return false;  // "……" says nothing
  if (head && tail) return produced.find(quoted) != std::string_view::npos;
  if (head) return endsWith(produced, quoted);
  if (tail) return produced.substr(0, quoted.size()) == quoted;
  return quoted == produced;
}

// Greedy with backtracking over "…" lines; both sides already masked. The
// quote covers the rest of what was produced, or (an excerpt) only begins it.
bool linesMatch(const std::vector<std::string>& quoted, std::size_t q,
                const std::vector<std::string>& produced, std::size_t p, bool toTheEnd = true) {
  if (q == quoted.size()) return !toTheEnd || p == produced.size();
  if (quoted[q] == kAnyLines) {
    for (std::size_t skip = p; skip <= produced.size(); ++skip)
      if (linesMatch(quoted, q + 1, produced, skip, toTheEnd)) return true;
    return false;
  }
  return p < produced.size() && lineMatches(quoted[q], produced[p]) &&
         linesMatch(quoted, q + 1, produced, p + 1, toTheEnd);
}

bool isExitStatus(std::string_view line) {
  return line.substr(0, 13) == "[exit status " && line.back() == ']';
}

std::vector<std::string> maskedAll(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines)
    if (l != "[exit status 0]") out.push_back(isExitStatus(l) ? l : masked(l));  // kept exact
  while (!out.empty() && out.back().empty()) out.pop_back();
  // Listings keyed by a lease id (a table's rows, a metric's series) come in
  // id order, which is new each run: the order within a run of such lines is
  // not compared, their contents are. Journals and events are in time order,
  // and stay compared line by line.
  for (auto it = out.begin(); it != out.end();) {
    // A ledger listing's rows (SEQ, then the date: "0 0-0-0 0:0:0 …") are in
    // the order the leases ended, which races between a job's steps.
    auto isRow = [](const std::string& l) {
      return l.rfind("ID ", 0) == 0 || l.find("{lease=\"ID\"") != std::string::npos ||
             l.rfind("0 0-0-0 0:0:0 ", 0) == 0;
    };
    auto end = std::find_if_not(it, out.end(), isRow);
    std::sort(it, end);
    it = end == out.end() ? end : end + 1;
  }
  return out;
}

std::string shown(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "    " + l + "\n";
  return s.empty() ? "    (nothing)\n" : s;
}

// A command as compared: exact, but for its quotes and a trailing
// "  # comment" (a producer's `echo "$ $*"` drops the quoting a reader
// types), runs of spaces, and what is the run's own: lease and container
// ids, a Slurm job id, a process id.
std::string commandKey(const TranscriptStep& step) {
  static const std::regex runs("(JOB_ID=|show job |--pid )[0-9]+");
  static const std::regex spaces(" +");
  std::string c = step.command;
  if (std::size_t hash = c.find("  #"); hash != std::string::npos) c.erase(hash);
  std::erase_if(c, [](char ch) { return ch == '\'' || ch == '"'; });
  c = std::regex_replace(c, runIds(), "ID");
  c = std::regex_replace(c, runs, "$1N");
  c = std::regex_replace(c, spaces, " ");
  while (!c.empty() && c.back() == ' ') c.pop_back();
  return step.prompt + c;
}

// Digit runs read as 0, but for those that name something (after a letter:
// SIGUSR1, cgroup v2, amd64) and an exit code ("code 1").
std::string maskDigits(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] < '0' || s[i] > '9') {
      out += s[i++];
      continue;
    }
    std::size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    bool named = i > 0 && std::isalpha(static_cast<unsigned char>(s[i - 1]));
    bool exitCode = (out.size() >= 5 && out.compare(out.size() - 5, 5, "code ") == 0) ||
                    (out.size() >= 6 && out.compare(out.size() - 6, 6, "code -") == 0);
    if (named || exitCode) {
      out.append(s, i, j - i);
    } else {
      // A signed figure's sign is part of what a run measured ("+0", "-253952":
      // memory.current moves both ways while a probe runs, in the VM); a dash between
      // digits (a date, a kernel's "6.1.0-57") is not a sign.
      bool sign =
          !out.empty() && (out.back() == '+' || out.back() == '-') &&
          (out.size() == 1 || !std::isalnum(static_cast<unsigned char>(out[out.size() - 2])));
      if (sign) out.pop_back();
      out += '0';
    }
    i = j;
  }
  return out;
}

}  // namespace

std::size_t promptLength(std::string_view line) {
  // "$ ", or a user's prompt "alice$ ": a lower-case name, then the sign. Not
  // "# ": output has such lines (Prometheus' "# HELP", a config's comments).
  std::size_t i = 0;
  while (i < line.size() && ((line[i] >= 'a' && line[i] <= 'z') || line[i] == '-' ||
                             (i > 0 && line[i] >= '0' && line[i] <= '9')))
    ++i;
  if (i + 1 < line.size() && line[i] == '$' && line[i + 1] == ' ') return i + 2;
  return std::string_view::npos;
}

std::vector<TranscriptStep> parseTranscript(std::string_view text, std::size_t firstLine) {
  std::vector<TranscriptStep> steps;
  std::size_t n = firstLine;
  for (std::string_view line : splitLines(text)) {
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // as a terminal shows CRLF
    if (std::size_t p = promptLength(line); p != std::string_view::npos) {
      closeStep(steps);
      steps.push_back({std::string(line.substr(0, p)), std::string(line.substr(p)), {}, n});
    } else if (!steps.empty()) {
      steps.back().output.emplace_back(line);
    }
    ++n;
  }
  closeStep(steps);
  return steps;
}

PageTranscripts quotedTranscripts(std::string_view page, std::string_view producer) {
  PageTranscripts found;
  auto lines = splitLines(page);
  bool inRegion = false, inFence = false, quotedHere = false;
  std::size_t fenceLine = 0, regionLine = 0, indent = 0;
  std::string body;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (RegionMark mark = regionMark(l); !inFence && (mark.open || mark.malformed)) {
      if (mark.malformed)
        found.problems.push_back(fmt::format(
            "line {}: '{}' is no region mark (<!-- transcript: PRODUCER -->)", i + 1, l));
      if (inRegion)
        found.problems.push_back(
            fmt::format("line {}: a transcript region opens inside the one "
                        "opened at line {}",
                        i + 1, regionLine));
      inRegion = mark.open && mark.producer == producer;
      regionLine = i + 1;
      continue;
    }
    if (!inFence && isRegionClose(l)) {
      inRegion = false;
      continue;
    }
    if (fenceAt(l) == std::string_view::npos) {
      if (inFence && quotedHere) {
        // A list's block: its lines are indented as far as its fence.
        std::size_t lead = std::min({indent, l.size(), l.find_first_not_of(' ')});
        body += std::string(l.substr(lead)) + "\n";
      }
      continue;
    }
    if (inFence) {
      inFence = false;
      if (!quotedHere) continue;
      auto steps = parseTranscript(body, fenceLine + 1);
      if (!steps.empty() && steps.front().line == fenceLine + 1) {
        found.blocks.push_back({fenceLine, std::move(steps), {}});
      } else if (!steps.empty()) {
        found.problems.push_back(
            fmt::format("line {}: a command in the middle of a block: a transcript begins with "
                        "its command, an excerpt of output has none",
                        steps.front().line));
      } else {
        QuotedTranscript excerpt{fenceLine, {}, {}};
        for (std::string_view b : splitLines(body)) {
          while (!b.empty() && b.back() == '\r') b.remove_suffix(1);
          excerpt.excerpt.emplace_back(b);
        }
        while (!excerpt.excerpt.empty() && excerpt.excerpt.back().empty())
          excerpt.excerpt.pop_back();
        if (excerpt.excerpt.empty())
          found.problems.push_back(fmt::format("line {}: an empty block", fenceLine));
        else
          found.blocks.push_back(std::move(excerpt));
      }
      continue;
    }
    inFence = true;
    fenceLine = i + 1;
    indent = fenceAt(l);
    quotedHere = inRegion && l.substr(indent) == "```";
    body.clear();
  }
  if (inRegion)
    found.problems.push_back(
        fmt::format("line {}: a transcript region is never closed ({})", regionLine, kRegionClose));
  return found;
}

std::string masked(std::string_view line) {
  static const std::regex sizes("~?\\b[0-9]+(\\.[0-9]+)? ?(B|KiB|MiB|GiB|TiB|K|M|G|T)\\b");
  static const std::regex months("\\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\\b");
  static const std::regex samples("\\b0 samples\\b");
  static const std::regex spaces(" +");
  // A chart's data: its bars, with the dotted max line a bar may cross
  // (which row a sample near the bound reaches is a race: CI, 2026-12-07),
  // are dropped; its frame (rows, labels, axis) stays. And the axis' event
  // marks (tally lease show).
  static const std::regex bars("(▁|▂|▃|▄|▅|▆|▇|█|┄)(▁|▂|▃|▄|▅|▆|▇|█|┄| )*");
  static const std::regex axis("(─|▲)+");
  std::string s = std::regex_replace(std::string(line), bars, "");
  s = std::regex_replace(s, axis, "─");
  s = std::regex_replace(s, runIds(), "ID");
  s = std::regex_replace(s, sizes, "SIZE");
  s = std::regex_replace(s, months, "Mon");
  s = maskDigits(s);
  s = std::regex_replace(s, samples, "0 sample");  // 1 sample, 2 samples: a clock's
  s = std::regex_replace(s, spaces, " ");
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (!s.empty() && s.front() == ' ') s.erase(0, 1);
  return s;
}

std::vector<std::string> transcriptDifferences(const PageTranscripts& quoted,
                                               const std::vector<TranscriptStep>& produced) {
  std::vector<std::string> out = quoted.problems;
  // Each run's key and masked output once, not once per quoted step.
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> outputs;
  for (const auto& run : produced) {
    keys.push_back(commandKey(run));
    outputs.push_back(maskedAll(run.output));
  }
  for (const auto& block : quoted.blocks) {
    for (const auto& step : block.steps) {
      std::string command = commandKey(step);
      auto want = maskedAll(step.output);
      std::size_t sameCommand = produced.size(), match = produced.size();
      for (std::size_t i = 0; i < produced.size() && match == produced.size(); ++i) {
        if (keys[i] != command) continue;
        if (sameCommand == produced.size()) sameCommand = i;
        if (linesMatch(want, 0, outputs[i], 0)) match = i;
      }
      if (match != produced.size()) {
        continue;
      } else if (sameCommand == produced.size()) {
        out.push_back(fmt::format("line {}: `{}` is quoted, but the producer never ran it",
                                  step.line, step.command));
      } else {
        out.push_back(fmt::format(
            "line {}: `{}` is quoted as printing (masked)\n{}but the binary printed (masked)\n{}"
            "and as it printed it\n{}",
            step.line, step.command, shown(want), shown(outputs[sameCommand]),
            shown(produced[sameCommand].output)));
      }
    }
  }
  return out;
}

std::vector<std::string> excerptDifferences(const PageTranscripts& quoted,
                                            std::string_view produced) {
  std::vector<std::string> out;
  // An excerpt comes from one command's output (or from what was printed
  // before any command): a "…" line never joins two runs.
  std::vector<std::vector<std::string>> chunks(1);
  for (std::string_view l : splitLines(produced)) {
    while (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (promptLength(l) != std::string_view::npos) chunks.emplace_back();
    chunks.back().emplace_back(l);
  }
  std::vector<std::vector<std::string>> runs;
  for (const auto& c : chunks) runs.push_back(maskedAll(c));
  std::vector<std::string> all;
  for (const auto& r : runs) all.insert(all.end(), r.begin(), r.end());
  for (const auto& block : quoted.blocks) {
    if (block.excerpt.empty()) continue;
    auto want = maskedAll(block.excerpt);
    if (std::all_of(want.begin(), want.end(),
                    [](const std::string& l) { return l == kAnyLines || l.empty(); })) {
      out.push_back(fmt::format("line {}: an excerpt that quotes nothing", block.line));
      continue;
    }
    bool found = false;
    for (const auto& run : runs)
      for (std::size_t at = 0; at < run.size() && !found; ++at)
        found = linesMatch(want, 0, run, at, /*toTheEnd=*/false);
    if (!found)
      out.push_back(
          fmt::format("line {}: an excerpt of output the producer never printed (masked)\n{}"
                      "(every line in this order, one after another, in what it printed{})",
                      block.line, shown(want),
                      all.size() <= 40 ? ":\n" + shown(all) : ", printed whole above"));
  }
  return out;
}

std::string asTheDocsWriteIt(std::string_view produced) {
  // The checkout's own path reads as the docs' (/work/main): CI's is elsewhere.
  std::string text(produced);
  const std::string source = TALLY_SOURCE_DIR;
  const std::string docs = "/work/main";
  if (source == docs) return text;
  for (std::size_t at = 0; (at = text.find(source, at)) != std::string::npos; at += docs.size())
    text.replace(at, source.size(), docs);
  return text;
}

std::vector<std::string> pageDifferences(const std::string& pagePath, std::string_view producer,
                                         std::string_view produced) {
  std::ifstream in(std::string(TALLY_SOURCE_DIR) + "/" + pagePath);
  std::ostringstream page;
  page << in.rdbuf();
  auto quoted = quotedTranscripts(page.str(), producer);
  if (quoted.blocks.empty() && quoted.problems.empty())
    return {fmt::format("{} quotes nothing of {}: mark its region <!-- transcript: {} -->",
                        pagePath, producer, producer)};
  const std::string text = asTheDocsWriteIt(produced);
  auto out = transcriptDifferences(quoted, parseTranscript(text));
  for (auto& d : excerptDifferences(quoted, text)) out.push_back(std::move(d));
  for (auto& d : out) d = pagePath + ":" + d.substr(5);  // "line N: …" → "page:N: …"
  return out;
}

std::string refreshedPage(std::string_view page, std::string_view producer,
                          std::string_view produced) {
  auto lines = splitLines(page);
  std::vector<std::string> out(lines.begin(), lines.end());
  auto runs = parseTranscript(produced);
  std::vector<const TranscriptStep*> steps;
  const PageTranscripts quoted = quotedTranscripts(page, producer);
  for (const auto& block : quoted.blocks)
    for (const auto& step : block.steps) steps.push_back(&step);
  // The n-th quote of a command is refreshed from its n-th run.
  std::vector<const TranscriptStep*> from(steps.size(), nullptr);
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::string key = commandKey(*steps[i]);
    std::size_t nth = seen[key]++;
    for (const auto& r : runs) {  // the n-th run, or the last there is
      if (commandKey(r) != key) continue;
      from[i] = &r;
      if (nth-- == 0) break;
    }
  }
  // From the bottom up, so each step's line numbers still hold.
  for (std::size_t i = steps.size(); i-- > 0;) {
    const TranscriptStep& step = *steps[i];
    const TranscriptStep* run = from[i];
    if (!run || std::any_of(step.output.begin(), step.output.end(), [](const std::string& l) {
          return endsWith(l, kAnyLines) || l.rfind(kAnyLines, 0) == 0;
        }))
      continue;
    std::vector<std::string> fresh;
    for (const auto& l : run->output)
      if (l != "[exit status 0]") fresh.push_back(l);
    auto first =
        out.begin() + static_cast<std::ptrdiff_t>(step.line);  // the line after the command
    out.erase(first, first + static_cast<std::ptrdiff_t>(step.output.size()));
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(step.line), fresh.begin(), fresh.end());
    // The command's ids become the run's, so the command names what its output shows.
    static const std::regex id("\\b[0-9a-f]{12}\\b");
    std::vector<std::string> theRunsIds;
    for (std::sregex_iterator it(run->command.begin(), run->command.end(), id), end; it != end;
         ++it)
      theRunsIds.push_back(it->str());
    std::string& command = out[step.line - 1];
    std::size_t k = 0;
    std::string rewritten;
    std::size_t last = 0;
    for (std::sregex_iterator it(command.begin(), command.end(), id), end;
         it != end && k < theRunsIds.size(); ++it, ++k) {
      rewritten +=
          command.substr(last, static_cast<std::size_t>(it->position()) - last) + theRunsIds[k];
      last = static_cast<std::size_t>(it->position() + it->length());
    }
    command = rewritten + command.substr(last);
  }
  std::string text;
  for (std::size_t i = 0; i < out.size(); ++i) text += out[i] + (i + 1 < out.size() ? "\n" : "");
  if (!page.empty() && page.back() == '\n') text += "\n";
  return text;
}

std::vector<std::size_t> unproducedTranscriptBlocks(std::string_view page) {
  std::vector<std::size_t> out;
  auto lines = splitLines(page);
  bool inRegion = false, inFence = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (RegionMark mark = regionMark(l); !inFence && mark.malformed) out.push_back(i + 1);
    if (RegionMark mark = regionMark(l); !inFence && mark.open) inRegion = true;
    if (!inFence && isRegionClose(l)) inRegion = false;
    std::size_t indent = fenceAt(l);
    if (indent == std::string_view::npos) continue;
    if (inFence) {
      inFence = false;
      continue;
    }
    inFence = true;
    // A bare fence, at the margin or indented in a list, is what a program
    // printed: an info string says what any other block is ("text", "toml").
    if (!inRegion && l.substr(indent) == "```") out.push_back(i + 1);
  }
  return out;
}

}  // namespace tally::testing
