#include "cli/completion.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string_view>
#include <vector>

#include "cli/exit_codes.h"

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

// The options --help lists: a hidden one (group "", an old name kept for
// scripts) is neither completed nor documented.
std::vector<const CLI::Option*> visibleOptions(const CLI::App& app) {
  return app.get_options([](const CLI::Option* o) { return !o->get_group().empty(); });
}

// The values of an option CLI11 checks against a set ("TEXT:{kill,stop,continue}").
std::vector<std::string> memberValues(const CLI::Option* o) {
  std::string type = o->get_type_name();
  auto open = type.find(":{");
  if (open == std::string::npos || type.back() != '}') return {};
  std::vector<std::string> out;
  std::string body = type.substr(open + 2, type.size() - open - 3);
  for (std::size_t at = 0; at <= body.size();) {
    auto comma = body.find(',', at);
    if (comma == std::string::npos) comma = body.size();
    out.push_back(body.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::string words(const std::vector<std::string>& list) {
  return fmt::format("{}", fmt::join(list, " "));
}

// Values tally can name that no option's model carries: the shell asks the
// host or the daemon for them when it completes.
const char* kLeaseIds =
    "COMPREPLY=($(compgen -W \"$(tally leases --json 2>/dev/null | sed -n 's/.*\"lease\": "
    "\"\\([0-9a-f]\\{12\\}\\)\".*/\\1/p')\" -- \"$cur\"))";
std::string bashValues(const std::string& option) {
  if (option == "unit")
    return "COMPREPLY=($(compgen -W \"$(systemctl list-units --type=service,scope "
           "--state=running --no-legend --plain 2>/dev/null | awk '{print $1}')\" -- \"$cur\"))";
  if (option == "pid") return "_pids";
  if (option == "container")
    return "COMPREPLY=($(compgen -W \"$( (podman ps --format '{{.Names}}' || docker ps --format "
           "'{{.Names}}') 2>/dev/null)\" -- \"$cur\"))";
  if (option == "pool")
    return "COMPREPLY=($(compgen -W \"$(tally pools --json 2>/dev/null | sed -n 's/.*\"pool\": "
           "\"\\([^\"]*\\)\".*/\\1/p')\" -- \"$cur\"))";
  if (option == "lease" || option == "parent") return kLeaseIds;
  for (const char* file :
       {"config", "metrics-textfile", "state-dir", "socket", "svg", "cgroup-parent", "proc-root",
        "sys-root", "cgroup-root", "plugstack", "plugin-dir"})
    if (option == file) return "_filedir";
  return "";
}

}  // namespace

std::string bashCompletion(const CLI::App& app, const Enumerations& enums) {
  std::vector<Command> commands;
  walk(app, "", commands);
  std::string s =
      "# bash completion for tally; written by `tally completion bash` from its command-line\n"
      "# model: every command and option --help lists, the values of options that take one of a\n"
      "# set, and the pools, lease ids, units, processes and containers the host names.\n"
      "_tally() {\n"
      "  local cur prev words cword\n"
      "  _init_completion || return\n"
      "  local path=\"\" i w\n"
      "  for ((i = 1; i < cword; i++)); do\n"
      "    w=\"${words[i]}\"\n"
      "    [[ $w == -- ]] && return  # the workload's own arguments\n"
      "    case \"$path:$w\" in\n";
  // Options that take a value: the word after them is the value, not a command.
  std::string valued;
  for (const auto& c : commands)
    for (const CLI::Option* o : visibleOptions(*c.app))
      for (const auto& l : o->get_lnames())
        if (takesValue(o)) valued += fmt::format("|\"{}:--{}\"", c.path, l);
  if (!valued.empty()) s += fmt::format("      {}) ((i++)) ;;\n", valued.substr(1));
  for (const auto& c : commands) {
    std::string last = c.path.substr(c.path.rfind(' ') + 1);
    std::string parent = c.path.size() > last.size() ? c.path.substr(0, c.path.rfind(' ')) : "";
    s += fmt::format("      \"{}:{}\") path=\"{}\" ;;\n", parent, last, c.path);
  }
  s += "    esac\n  done\n\n  case \"$path:$prev\" in\n";
  for (const auto& c : commands) {
    for (const CLI::Option* o : visibleOptions(*c.app)) {
      if (!takesValue(o)) continue;
      for (const auto& l : o->get_lnames()) {
        std::vector<std::string> set = memberValues(o);
        if (auto e = enums.find(l); set.empty() && e != enums.end()) set = e->second;
        std::string action =
            set.empty() ? bashValues(l)
                        : fmt::format("COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))", words(set));
        // A value nobody can list (a size, a name): complete nothing rather than options.
        s += fmt::format("    \"{}:--{}\") {}; return ;;\n", c.path, l,
                         action.empty() ? ":" : action);
      }
    }
  }
  s += "  esac\n\n  if [[ $cur != -* ]]; then\n    case \"$path\" in\n";
  // Where the next word is a subcommand or a positional value tally can name.
  std::vector<std::string> top;
  for (const auto& c : commands)
    if (c.path.find(' ') == std::string::npos) top.push_back(c.path);
  s += fmt::format("      \"\") COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); return ;;\n",
                   words(top));
  for (const auto& c : commands) {
    std::vector<std::string> subs;
    for (const auto& d : commands)
      if (d.path.rfind(c.path + " ", 0) == 0 &&
          d.path.find(' ', c.path.size() + 1) == std::string::npos)
        subs.push_back(d.path.substr(c.path.size() + 1));
    std::string action;
    if (!subs.empty()) {
      action = fmt::format("COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))", words(subs));
    } else {
      for (const CLI::Option* o : visibleOptions(*c.app)) {
        if (!o->get_lnames().empty() || o->get_name().empty()) continue;
        if (o->get_name() == "ID") action = kLeaseIds;
        if (o->get_name() == "FILE") action = "_filedir toml";
      }
    }
    if (!action.empty()) s += fmt::format("      \"{}\") {}; return ;;\n", c.path, action);
  }
  s += "    esac\n  fi\n\n  local opts=\"\"\n  case \"$path\" in\n";
  s += "    \"\") opts=\"--help --version\" ;;\n";
  for (const auto& c : commands) {
    std::vector<std::string> opts;
    for (const CLI::Option* o : visibleOptions(*c.app))
      for (const auto& l : o->get_lnames()) opts.push_back("--" + l);
    s += fmt::format("    \"{}\") opts=\"{}\" ;;\n", c.path, words(opts));
  }
  s += "  esac\n  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n}\ncomplete -F _tally tally\n";
  return s;
}

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
    for (const CLI::Option* o : visibleOptions(*c.app)) {
      for (const auto& l : o->get_lnames()) {
        s += fmt::format("complete -c tally -n '__fish_seen_subcommand_from {}' -l {}{} -d '{}'\n",
                         last, l, takesValue(o) ? " -r" : "", oneLine(o->get_description(), "'\\"));
      }
    }
  }
  return s;
}

namespace {

// Text as roff reads it: a backslash is \e, a hyphen in a word \-, and a
// line that starts with . or ' is not a request.
std::string roff(std::string_view text) {
  std::string out;
  bool lineStart = true;
  for (char c : text) {
    if (lineStart && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
    lineStart = c == '\n';
  }
  return out;
}

std::string manSynopsis(const std::vector<Command>& commands) {
  std::string s;
  for (const auto& c : commands) {
    if (!c.app->get_subcommands([](const CLI::App* sub) { return sub->get_group() != ""; })
             .empty() &&
        visibleOptions(*c.app).size() <= 1)
      continue;  // a group of commands (lease, ledger, config) only names its members
    s += fmt::format(".B tally {}\n.RI [ options ]\n", roff(c.path));
    // Its operands, as --help names them: `tally run [ options ] [ -- ] command ...`.
    for (const CLI::Option* o : visibleOptions(*c.app)) {
      if (!o->get_lnames().empty() || !o->get_snames().empty() || o->get_name().empty()) continue;
      bool many = o->get_items_expected_max() > 1;
      if (many) s += ".RB [ \\-\\- ]\n";
      std::string word = roff(o->get_name()) + (many ? " ..." : "");
      s += o->get_required() ? fmt::format(".I \"{}\"\n", word)
                             : fmt::format(".RI [ \"{}\" ]\n", word);
    }
    s += ".br\n";
  }
  return s;
}

std::string manCommands(const std::vector<Command>& commands) {
  std::string s;
  for (const auto& c : commands) {
    s += fmt::format(".SS \"tally {}\"\n{}\n", roff(c.path), roff(c.app->get_description()));
    for (const CLI::Option* o : visibleOptions(*c.app)) {
      std::string names = o->get_name(true, true);
      if (o->get_lnames().empty() && o->get_snames().empty()) names = o->get_name();
      s += fmt::format(".TP\n.B {}{}\n{}\n", roff(names),
                       takesValue(o) && !o->get_lnames().empty()
                           ? fmt::format(" \\fI{}\\fR", roff(o->get_type_name()))
                           : std::string(),
                       roff(o->get_description()));
    }
    if (!c.app->get_footer().empty())
      s += fmt::format(".PP\n.nf\n{}\n.fi\n", roff(c.app->get_footer()));
  }
  return s;
}

std::string manExitStatus() {
  std::string s;
  for (const auto& e : exitStatuses())
    s += fmt::format(".TP\n.B {}\n{}\n", e.code, roff(e.meaning));
  return s;
}

}  // namespace

std::string manPage(const CLI::App& app, const std::string& templateText) {
  std::vector<Command> commands;
  walk(app, "", commands);
  std::string out;
  std::size_t at = 0;
  while (at < templateText.size()) {
    std::size_t end = templateText.find('\n', at);
    if (end == std::string::npos) end = templateText.size();
    std::string_view line(templateText.data() + at, end - at);
    if (line == "@TALLY_MAN_SYNOPSIS@")
      out += manSynopsis(commands);
    else if (line == "@TALLY_MAN_COMMANDS@")
      out += manCommands(commands);
    else if (line == "@TALLY_MAN_EXIT_STATUS@")
      out += manExitStatus();
    else
      out += std::string(line) + "\n";
    at = end + 1;
  }
  return out;
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
    for (const CLI::Option* o : visibleOptions(*c.app)) {
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
