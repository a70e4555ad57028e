#include "cli/completion.h"

#include <fmt/format.h>

#include <string_view>
#include <vector>

namespace tally::cli {
namespace {

// The first line of a help text, without what a shell would take as syntax.
std::string oneLine(const std::string& text, std::string_view drop) {
  std::string line = text.substr(0, text.find('\n'));
  std::string out;
  for (char c : line) {
    if (drop.find(c) != std::string_view::npos) continue;
    out += c;
  }
  return out;
}

struct Command {
  std::string path;  // "lease show"
  const CLI::App* app;
};

void walk(const CLI::App& app, const std::string& prefix, std::vector<Command>& out) {
  for (const CLI::App* sub : app.get_subcommands(
           [](const CLI::App* s) { return !s->get_name().empty() && s->get_group() != ""; })) {
    std::string path = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    out.push_back({path, sub});
    walk(*sub, path, out);
  }
}

bool takesValue(const CLI::Option* o) { return o->get_expected_min() > 0; }

}  // namespace

std::string fishCompletion(const CLI::App& app) {
  std::vector<Command> commands;
  walk(app, "", commands);
  std::string s = "# fish completion for tally; written by `tally completion fish`\n";
  s += "complete -c tally -f\n";
  for (const auto& c : commands) {
    std::string last = c.path.substr(c.path.rfind(' ') + 1);
    std::string parent = c.path.size() > last.size() ? c.path.substr(0, c.path.rfind(' ')) : "";
    std::string cond = parent.empty() ? "__fish_use_subcommand"
                                      : fmt::format("__fish_seen_subcommand_from {}", parent);
    s += fmt::format("complete -c tally -n '{}' -a {} -d '{}'\n", cond, last,
                     oneLine(c.app->get_description(), "'\\"));
  }
  for (const auto& c : commands) {
    std::string last = c.path.substr(c.path.rfind(' ') + 1);
    for (const CLI::Option* o : c.app->get_options()) {
      for (const auto& l : o->get_lnames()) {
        s += fmt::format("complete -c tally -n '__fish_seen_subcommand_from {}' -l {}{} -d '{}'\n",
                         last, l, takesValue(o) ? " -r" : "", oneLine(o->get_description(), "'\\"));
      }
    }
  }
  return s;
}

std::string zshCompletion(const CLI::App& app) {
  std::vector<Command> commands;
  walk(app, "", commands);
  std::string s = "#compdef tally\n# zsh completion for tally; written by `tally completion zsh`\n";
  s += "_tally() {\n  local -a commands\n  if (( CURRENT == 2 )); then\n    commands=(\n";
  for (const auto& c : commands) {
    if (c.path.find(' ') != std::string::npos) continue;
    s += fmt::format("      '{}:{}'\n", c.path, oneLine(c.app->get_description(), "':\\[]"));
  }
  s += "    )\n    _describe command commands\n    return\n  fi\n  case \"${words[2]} "
       "${words[3]}\" in\n";
  // Nested commands first: "lease show" before "lease".
  for (auto it = commands.rbegin(); it != commands.rend(); ++it) {
    const auto& c = *it;
    std::vector<std::string> specs;
    for (const CLI::Option* o : c.app->get_options()) {
      for (const auto& l : o->get_lnames()) {
        specs.push_back(fmt::format("'--{}[{}]{}'", l, oneLine(o->get_description(), "':\\[]"),
                                    takesValue(o) ? ":value:" : ""));
      }
    }
    std::string pattern = c.path.find(' ') != std::string::npos ? c.path + "*" : c.path + " *";
    s += fmt::format("    \"{}\") _arguments -s \\\n", pattern);
    for (const auto& spec : specs) s += fmt::format("        {} \\\n", spec);
    s += "        '*::argument:_files' ;;\n";
  }
  s += "  esac\n}\n_tally \"$@\"\n";
  return s;
}

}  // namespace tally::cli
