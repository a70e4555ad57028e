#include "cli/cmd_daemon_reload.h"

#include <fmt/format.h>
#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli/daemon_call.h"
#include "cli/exit_codes.h"
#include "cli/print_line.h"
#include "cli/socket_path.h"
#include "rpc/client.h"
#include "rpc/lease_api.h"
#include "util/text.h"

namespace tally::cli {

CLI::App* addDaemonReloadCommand(CLI::App& app, DaemonReloadOptions& o) {
  CLI::App* daemon = nullptr;
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == "daemon") daemon = sub;
  if (!daemon) return nullptr;
  auto* reload = daemon->add_subcommand(
      "reload", "Make the running daemon read its config again and say what changed (root)");
  reload->footer(
      "The daemon reads the file it started from through every check 'tally config check' "
      "makes.\nPools and [leases.*] change in place: a new budget, capacity, share or default "
      "applies to the\nnext grant; a waiter the new pools can never grant is refused. A change "
      "that would strand a\nlive lease (a pool it holds removed, a limit lowered below what its "
      "leases hold) is refused\nwhole: nothing changes, and the reason names each lease. A "
      "declared lease that runs keeps what\nit was granted; its new declaration applies from "
      "its unit's next run. [daemon] settings are\nread at start only: they are listed, and "
      "apply at the next restart.\n"
      "SIGHUP does the same (the result is in the journal); systemctl reload tally runs this "
      "command.\n"
      "Exit status: 0 reloaded (each change on a line), 5 refused or not root (nothing "
      "changed; the\nreason on stderr), 3 the daemon cannot be reached.");
  addSocketOption(reload, o.socket);
  addReplyTimeoutOption(reload, o.replyTimeout);
  return reload;
}

int runDaemonReload(const DaemonReloadOptions& o) {
  // As systemd's ExecReload: the socket is found in the file being reloaded,
  // which may name another socket than the one the running daemon serves (a
  // [daemon] socket edit applies at restart). systemd names the daemon's pid
  // (MAINPID): it is asked by SIGHUP instead, and the journal says the rest.
  if (const char* mainPid = std::getenv("MAINPID"); mainPid && *mainPid && o.socket.empty()) {
    std::string path = socketPath(o.socket);
    auto client = rpc::Client::connect(path);
    auto pid = text::parseU64(mainPid);
    // Only the daemon itself is signalled: MAINPID must run this very binary.
    auto exe = [](const std::string& link) {
      std::error_code ec;
      auto target = std::filesystem::read_symlink(link, ec);
      return ec ? std::string() : target.string();
    };
    bool isTally = pid && *pid > 1 && *pid <= INT32_MAX && !exe("/proc/self/exe").empty() &&
                   exe(fmt::format("/proc/{}/exe", *pid)) == exe("/proc/self/exe");
    if (!client && isTally) {
      if (::kill(static_cast<pid_t>(*pid), SIGHUP) != 0) {
        fmt::print(stderr,
                   "tally daemon reload: cannot reach the daemon at {} ({}), nor signal "
                   "it (pid {}): {}\n",
                   path, client.error().message, *pid, std::strerror(errno));
        return kExitEnvironment;
      }
      fmt::print(
          "the daemon does not answer at {} (the file names another socket?): sent it "
          "SIGHUP (pid {}); journalctl -u tally says what changed or why nothing did\n",
          path, *pid);
      return kExitOk;
    }
  }
  int rc = kExitOk;
  auto m = callDaemon("daemon reload", o, rpc::api::Reload{}, rc);
  if (!m) return rc;
  auto r = rpc::api::decodeReloadReply(m->result);
  if (!r) return badReply("daemon reload", r.error());
  for (const auto& line : r->changes) printLine(line);
  return kExitOk;
}

}  // namespace tally::cli
