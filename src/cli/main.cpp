// tally: a real memory bound and a true meter for every lease on a shared GPU box.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cmd_attach.h"
#include "cli/cmd_daemon.h"
#include "cli/cmd_daemon_reload.h"
#include "cli/cmd_daemon_status.h"
#include "cli/cmd_doctor.h"
#include "cli/cmd_events.h"
#include "cli/cmd_gpu.h"
#include "cli/cmd_lease_release.h"
#include "cli/cmd_lease_show.h"
#include "cli/cmd_leases.h"
#include "cli/cmd_ledger.h"
#include "cli/cmd_logs.h"
#include "cli/cmd_metrics.h"
#include "cli/cmd_pools.h"
#include "cli/cmd_run.h"
#include "cli/cmd_seats.h"
#include "cli/cmd_top.h"
#include "cli/completion.h"
#include "cli/exit_codes.h"
#include "lease/outcome.h"
#include "util/text.h"
#include "views/event_line.h"

namespace {

// The first word that is not an option must be a command: an unknown one is
// named, with the nearest command, before anything else is parsed.
// The sets of values commands check themselves (with their own words), for
// the bash completion: event kinds, and the outcome classes the ledger holds
// (a queued lease's "withdrawn" beside the classes of lease/outcome.h).
tally::cli::Enumerations completionValues() {
  std::vector<std::string> outcomes;
  for (tally::lease::OutcomeClass c : tally::lease::kAllOutcomeClasses)
    outcomes.push_back(tally::lease::outcomeClassName(c));
  outcomes.push_back("withdrawn");
  return {{"kind", tally::views::eventKinds()}, {"outcome", outcomes}};
}

std::optional<std::string> unknownCommand(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view word = argv[i];
    if (word.empty() || word[0] == '-') {
      if (word.find('=') == std::string_view::npos &&
          (word == "--proc-root" || word == "--sys-root" || word == "--cgroup-root"))
        ++i;  // a root option's value
      continue;
    }
    std::vector<std::string_view> names;
    for (const auto* sub : app.get_subcommands({})) {
      if (sub->get_name() == word) return std::nullopt;
      names.push_back(sub->get_name());
    }
    std::string shown(word.substr(0, 64));
    auto best = tally::text::nearest(word, names);
    return !best ? fmt::format("unknown command '{}' (tally --help lists them)", shown)
                 : fmt::format("unknown command '{}' (did you mean {}?)", shown, *best);
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tally;
  CLI::App app{"tally: per-lease memory bounds and GPU memory meters for shared GPU workers",
               "tally"};
  app.set_version_flag("--version", fmt::format("tally {} ({})", TALLY_VERSION, TALLY_COMMIT));
  app.require_subcommand(1);
  app.fallthrough();  // root options work after the subcommand too: tally gpu --proc-root X
  fs::RootPaths roots;
  app.add_option("--proc-root", roots.proc, "procfs to read (diagnostic/testing)")
      ->default_str(fs::kProcRoot)
      ->group("Diagnostic/testing");
  app.add_option("--sys-root", roots.sys, "sysfs to read (diagnostic/testing)")
      ->default_str(fs::kSysRoot)
      ->group("Diagnostic/testing");
  app.add_option("--cgroup-root", roots.cgroup, "cgroup v2 root to read (diagnostic/testing)")
      ->default_str(fs::kCgroupRoot)
      ->group("Diagnostic/testing");
  app.footer("Run 'tally <command> --help' for a command's options.\n\nExit status:\n" +
             cli::exitStatusText() +
             "  'tally run' exits with its workload's status instead (tally run --help).");

  cli::GpuOptions gpu;
  cli::addGpuCommand(app, gpu);
  cli::DoctorOptions doctor;
  cli::addDoctorCommand(app, doctor);
  cli::RunOptions run;
  cli::addRunCommand(app, run);
  cli::LedgerOptions ledger;
  cli::addLedgerCommand(app, ledger);
  cli::DaemonOptions daemonOpts;
  daemonOpts.build = {TALLY_VERSION, TALLY_COMMIT_ID};
  cli::addDaemonCommand(app, daemonOpts);
  cli::ConfigCheckOptions configOpts;
  cli::addConfigCommand(app, configOpts);
  // The daemon's client commands, each with its own options (cli/cmd_client.h).
  cli::LeasesOptions leasesOpts;
  auto* leasesCmd = cli::addLeasesCommand(app, leasesOpts);
  // `tally lease` only groups show and release: one of them runs.
  auto* lease = app.add_subcommand("lease", "One lease: show it, or release it");
  lease->require_subcommand(1);
  cli::LeaseShowOptions leaseShowOpts;
  auto* leaseShowCmd = cli::addLeaseShowCommand(*lease, leaseShowOpts);
  cli::LeaseReleaseOptions leaseReleaseOpts;
  auto* leaseReleaseCmd = cli::addLeaseReleaseCommand(*lease, leaseReleaseOpts);
  cli::LogsOptions logsOpts;
  auto* logsCmd = cli::addLogsCommand(app, logsOpts);
  cli::PoolsOptions poolsOpts;
  auto* poolsCmd = cli::addPoolsCommand(app, poolsOpts);
  cli::AttachOptions attachOpts;
  auto* attachCmd = cli::addAttachCommand(app, attachOpts);
  cli::EventsOptions eventsOpts;
  auto* eventsCmd = cli::addEventsCommand(app, eventsOpts);
  cli::SeatsOptions seatsOpts;
  auto* seatsCmd = cli::addSeatsCommand(app, seatsOpts);
  cli::DaemonStatusOptions daemonStatusOpts;
  auto* daemonStatusCmd = cli::addDaemonStatusCommand(app, daemonStatusOpts);
  cli::DaemonReloadOptions daemonReloadOpts;
  auto* daemonReloadCmd = cli::addDaemonReloadCommand(app, daemonReloadOpts);
  cli::MetricsOptions metricsOpts;
  auto* metricsCmd = cli::addMetricsCommand(app, metricsOpts);
  cli::TopOptions topOpts;
  cli::addTopCommand(app, topOpts);
  // Hidden: the build writes the zsh and fish completion with it (dist/install.cmake).
  std::string completionShell, completionFile, manTemplate;
  auto* completion =
      app.add_subcommand("completion", "Write bash, zsh or fish completion")->group("");
  completion->add_option("SHELL", completionShell, "bash, zsh or fish (or man: tally(1))")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish", "man"}));
  completion->add_option("--template", manTemplate, "man: the page's prose (dist/tally.1.in)");
  completion->add_option("FILE", completionFile, "where to write it (default: stdout)");

  // `tally run [options] -- CMD ARGS...`: everything after the first "--"
  // following "run" belongs to the workload and never reaches the parser.
  std::vector<std::string> workload;
  int parsedArgc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) != "run") continue;
    for (int j = i + 1; j < argc; ++j) {
      if (std::string_view(argv[j]) == "--") {
        parsedArgc = j;
        workload.assign(argv + j + 1, argv + argc);
        break;
      }
    }
    run.optionWords.assign(argv + i + 1, argv + parsedArgc);
    break;
  }
  if (auto unknown = unknownCommand(app, parsedArgc, argv)) {
    fmt::print(stderr, "tally: {}\n", *unknown);
    return cli::kExitUsage;
  }
  try {
    app.parse(parsedArgc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    if (rc != 0 && app.got_subcommand("run") && workload.empty()) {
      fmt::print(
          stderr,
          "tally run: put the command after --, e.g. tally run --memory-max 4G -- sh -c '...'\n");
    }
    return rc == 0 ? cli::kExitOk : cli::kExitUsage;
  }
  try {
    if (app.got_subcommand("gpu")) return cli::runGpu(roots, gpu);
    if (app.got_subcommand("doctor")) return cli::runDoctor(roots, doctor);
    if (app.got_subcommand("ledger")) return cli::runLedger(ledger);
    if (daemonStatusCmd && daemonStatusCmd->parsed()) return cli::runDaemonStatus(daemonStatusOpts);
    if (daemonReloadCmd && daemonReloadCmd->parsed()) return cli::runDaemonReload(daemonReloadOpts);
    if (app.got_subcommand("daemon")) return cli::runDaemon(roots, daemonOpts);
    if (app.got_subcommand("config"))
      return configOpts.suggest ? cli::runConfigSuggest(roots, configOpts)
                                : cli::runConfigCheck(roots, configOpts);
    if (app.got_subcommand("top")) return cli::runTop(topOpts);
    if (app.got_subcommand("completion")) {
      std::string text;
      if (completionShell == "man") {
        std::ifstream in(manTemplate);
        std::stringstream prose;
        prose << in.rdbuf();
        if (!in) {
          fmt::print(stderr, "tally completion man: cannot read --template '{}'\n", manTemplate);
          return cli::kExitUsage;
        }
        text = cli::manPage(app, prose.str());
      } else {
        text = completionShell == "zsh"    ? cli::zshCompletion(app)
               : completionShell == "fish" ? cli::fishCompletion(app)
                                           : cli::bashCompletion(app, completionValues());
      }
      if (completionFile.empty()) {
        fmt::print("{}", text);
        return cli::kExitOk;
      }
      std::FILE* f = std::fopen(completionFile.c_str(), "w");
      bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
      if (f) ok = std::fclose(f) == 0 && ok;
      if (!ok) {
        fmt::print(stderr, "tally completion: cannot write {}\n", completionFile);
        return cli::kExitEnvironment;
      }
      return cli::kExitOk;
    }
    if (eventsCmd->parsed()) return cli::runEvents(eventsOpts);
    if (leasesCmd->parsed()) return cli::runLeases(leasesOpts);
    if (logsCmd->parsed()) return cli::runLogs(logsOpts);
    if (leaseShowCmd->parsed()) return cli::runLeaseShow(leaseShowOpts);
    if (leaseReleaseCmd->parsed()) return cli::runLeaseRelease(leaseReleaseOpts);
    if (poolsCmd->parsed()) return cli::runPools(poolsOpts);
    if (seatsCmd->parsed()) return cli::runSeats(seatsOpts);
    if (metricsCmd->parsed()) return cli::runMetrics(metricsOpts);
    if (attachCmd->parsed()) return cli::runAttach(attachOpts);
    if (app.got_subcommand("run")) {
      if (!workload.empty()) run.command = workload;
      return cli::runRun(roots, run);
    }
  } catch (const std::exception& e) {
    // Errors are values inside tally; an exception here (bad_alloc, a JSON
    // library throw) is a bug, reported as such rather than as a crash.
    fmt::print(stderr, "tally: internal error: {}\n", e.what());
    return cli::kExitInternal;
  }
  return cli::kExitUsage;
}
