#include "bpf/libbpf_log.h"

#include <bpf/libbpf.h>
#include <fmt/format.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

namespace tally::bpf {

namespace {

// libbpf says why a load failed through its print callback: the last
// warnings are kept for the error message (the verifier's log can be long:
// only its tail is kept).
thread_local std::string libbpfSaid;
int keepWarning(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char line[512];
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(line, sizeof line, format, copy);
  va_end(copy);
  if (n > 0) {
    libbpfSaid += line;
    if (libbpfSaid.size() > 2048) libbpfSaid.erase(0, libbpfSaid.size() - 2048);
  }
  return 0;
}

// libbpf's words on the failure: its first line that names what failed (a
// map, a program, an attach) and its last, joined.
std::string lastSaid() {
  std::vector<std::string> lines;
  std::string_view rest = libbpfSaid;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    std::string line(rest.substr(0, nl));
    if (!line.empty()) lines.push_back(line);
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  if (lines.empty()) return "";
  std::string first;
  for (const auto& l : lines)
    if (first.empty() && l.find("fail") != std::string::npos) first = l;
  if (first.empty() || first == lines.back()) return lines.back();
  return first + "; " + lines.back();
}

}  // namespace

void keepLibbpfWarnings() {
  libbpfSaid.clear();
  libbpf_set_print(keepWarning);
}

Error bpfError(int err, std::string what) {
  std::string said = lastSaid();
  return Error{err, said.empty() ? fmt::format("{}: {}", what, std::strerror(err))
                                 : fmt::format("{}: {} ({})", what, std::strerror(err), said)};
}

}  // namespace tally::bpf
