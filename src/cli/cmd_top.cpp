// `tally top`: fetch the daemon's overview every interval and draw it
// (views/top.h). On a terminal: the alternate screen, no echo, redrawn in
// place, resized on SIGWINCH, 'q' quits and the terminal is restored on every
// exit path. Not a terminal (a pipe, a log): one plain listing, then exit.
#include "cli/cmd_top.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "cli/cmd_client.h"
#include "cli/exit_codes.h"
#include "cli/option_values.h"
#include "cli/socket_path.h"
#include "cli/user_names.h"
#include "rpc/client.h"
#include "rpc/messages.h"
#include "util/clock.h"
#include "util/unique_fd.h"
#include "views/top.h"

namespace tally::cli {
namespace {

using json = nlohmann::json;

struct Size {
  std::size_t width = 120, height = 40;
};

Size terminalSize(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
    return {ws.ws_col, ws.ws_row};
  Size s;
  // Not a terminal: $COLUMNS when the shell exports it, else wide enough for every column.
  if (const char* c = std::getenv("COLUMNS"); c && std::atoi(c) > 40)
    s.width = static_cast<std::size_t>(std::atoi(c));
  else
    s.width = 160;
  return s;
}

void writeAll(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

// The terminal in the mode top draws in, restored by the destructor (and so
// on every return, including after SIGINT/SIGTERM, which arrive as reads on
// the signalfd rather than killing the process mid-frame).
class Screen {
 public:
  Screen(int in, int out) : in_(in), out_(out) {
    if (tcgetattr(in_, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_ = tcsetattr(in_, TCSANOW, &raw) == 0;
    }
    writeAll(out_, "\x1b[?1049h\x1b[?25l");  // alternate screen, cursor hidden
  }
  ~Screen() {
    writeAll(out_, "\x1b[?25h\x1b[?1049l");
    if (restore_) tcsetattr(in_, TCSANOW, &saved_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;
  void draw(const std::vector<std::string>& lines) {
    std::string frame = "\x1b[H";
    for (std::size_t i = 0; i < lines.size(); ++i) {
      frame += lines[i];
      if (i + 1 < lines.size()) frame += "\r\n";
    }
    frame += "\x1b[J";  // clear what a taller previous frame left below
    writeAll(out_, frame);
  }

 private:
  int in_, out_;
  termios saved_{};
  bool restore_ = false;
};

class Fetcher {
 public:
  explicit Fetcher(std::string path) : path_(std::move(path)) {}
  // The overview, or the reason there is none (kept on screen until the next success).
  std::optional<json> fetch(std::string& error) {
    if (!client_) {
      auto c = rpc::Client::connect(path_);
      if (!c) {
        error = c.error().message;
        return std::nullopt;
      }
      client_.emplace(std::move(*c));
    }
    // A hung daemon must not freeze the keys for long.
    auto m = client_->call(rpc::api::Overview{}, {}, 2000);
    if (!m || !m->ok) {
      error = m ? m->error.message : m.error().message;
      client_.reset();  // reconnect next time (the daemon restarted, or went away)
      return std::nullopt;
    }
    auto doc = rpc::api::decodeDocument(m->result, "seats");
    if (!doc) {
      error = doc.error().message;
      return std::nullopt;
    }
    error.clear();
    if (doc->contains("seats")) names_.annotate((*doc)["seats"]);  // NSS once per uid
    return std::move(*doc);
  }

 private:
  std::string path_;
  UserNames names_;
  std::optional<rpc::Client> client_;
};

}  // namespace

void addTopCommand(CLI::App& app, TopOptions& o) {
  auto* top = app.add_subcommand(
      "top", "A live view: leases against their limits, pools, devices, headroom, coverage");
  top->footer(
      "Redraws every --interval from the daemon's overview: each lease's host memory "
      "(memory.current\n"
      "against memory.max) and GPU memory (GTT, VRAM, their sum against gpu_memory_max), pools "
      "with\n"
      "holders, queue and budgets, DRM devices with GTT/VRAM used, and the GPU memory no lease "
      "accounts\n"
      "for. A lease not sampled within 2 x sample_interval shows 'stale' and no figures; with "
      "the\n"
      "daemon gone the header says STALE and every measured figure on screen is '-'.\n"
      "Keys: q quits; m, g, n sort by memory, GPU memory, name (l: the daemon's order); the "
      "header\n"
      "names the key in use.\n"
      "Over a limit red, within 10% of it yellow, stale dim (NO_COLOR=1 turns colour off).\n"
      "Resizes follow the terminal: less important columns go first, whole (80 columns keep "
      "the\n"
      "essentials). Works over SSH (plain VT100 sequences).\n"
      "Not a terminal (a pipe, a file): prints one plain listing and exits; so does --once.\n"
      "Exit status: 0 quit, 2 usage, 3 the daemon cannot be reached (--once or not a terminal).");
  top->add_option("--interval", o.interval, "time between refreshes (100ms..1h)")
      ->default_str("1s");
  top->add_flag("--once", o.once, "print one plain listing and exit, even on a terminal");
  addSocketOption(top, o.socket);
}

int runTop(const TopOptions& o) {
  std::optional<std::uint64_t> intervalUs;
  if (!durationOption("top", "--interval", o.interval, intervalUs)) return kExitUsage;
  if (!intervalUs || *intervalUs < 100'000 || *intervalUs > 3'600'000'000ull) {
    fmt::print(stderr, "tally top: --interval must be between 100ms and 1h\n");
    return kExitUsage;
  }
  Fetcher fetcher(socketPath(o.socket));
  views::ViewOptions view;
  view.refreshMs = *intervalUs / 1000;
  bool tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
  // Colour only where it can be seen and is wanted (https://no-color.org).
  const char* term = std::getenv("TERM");
  view.colour =
      tty && !o.once && !std::getenv("NO_COLOR") && !(term && std::string_view(term) == "dumb");
  if (!tty || o.once) {
    std::string error;
    auto overview = fetcher.fetch(error);
    if (!overview) {
      fmt::print(stderr, "tally top: {}\n", error);
      return kExitEnvironment;
    }
    view.width = terminalSize(STDOUT_FILENO).width;
    for (const auto& line : views::render(*overview, view)) {
      std::string_view l = line;  // printable already (views/top.cpp: fit)
      while (!l.empty() && l.back() == ' ') l.remove_suffix(1);
      fmt::print("{}\n", l);
    }
    return kExitOk;
  }

  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaddset(&signals, sig);
  sigset_t old;
  sigprocmask(SIG_BLOCK, &signals, &old);
  UniqueFd sigFd(signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK));
  int rc = kExitOk;
  {
    Screen screen(STDIN_FILENO, STDOUT_FILENO);
    json last = json::object();
    std::uint64_t nextFetchUs = 0;
    for (bool running = true; running;) {
      std::uint64_t now = clock::monotonicUs();
      if (now >= nextFetchUs) {
        if (auto ov = fetcher.fetch(view.status)) {
          last = std::move(*ov);
          view.daemonGone = false;
        } else {
          view.status =
              "cannot reach the daemon: " + view.status + " (retrying; 'tally daemon' must run)";
          view.daemonGone = true;  // what is on screen is no longer current
        }
        nextFetchUs = now + *intervalUs;
      }
      Size size = terminalSize(STDOUT_FILENO);
      view.width = size.width;
      view.height = size.height;
      screen.draw(views::render(last, view));
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {sigFd.get(), POLLIN, 0}};
      std::uint64_t after = clock::monotonicUs();
      int waitMs = nextFetchUs > after ? static_cast<int>((nextFetchUs - after) / 1000 + 1) : 0;
      if (::poll(fds, 2, waitMs) <= 0) continue;
      if (fds[0].revents & (POLLHUP | POLLERR)) break;  // the terminal went away
      if (fds[0].revents & POLLIN) {
        char keys[64];
        ssize_t n = ::read(STDIN_FILENO, keys, sizeof keys);
        for (ssize_t i = 0; i < n; ++i) {
          switch (keys[i]) {
            case 'q':
            case 'Q':
              running = false;
              break;
            case 'm':  // htop's keys: sort by memory, GPU, name; l: the daemon's order
              view.sort = views::SortKey::Memory;
              break;
            case 'g':
              view.sort = views::SortKey::Gpu;
              break;
            case 'n':
              view.sort = views::SortKey::Name;
              break;
            case 'l':
              view.sort = views::SortKey::Lease;
              break;
            default:
              break;
          }
        }
      }
      if (fds[1].revents & POLLIN) {
        signalfd_siginfo si{};
        while (::read(sigFd.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
          if (si.ssi_signo != SIGWINCH) running = false;  // INT, TERM, HUP: leave cleanly
        }
      }
    }
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return rc;
}

}  // namespace tally::cli
