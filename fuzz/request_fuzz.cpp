// libFuzzer target for the daemon's whole request path: arbitrary bytes
// through the framing (LineReader), the envelope, the typed decoders and
// Service::handle, exactly as the server runs them (daemon::Dispatcher), on
// a synthetic host (proc, sys and cgroup trees in /dev/shm), in-memory seams
// for the socket, inotify and systemd, and a real ledger.
//
// A crash, a sanitizer report, any request answered "internal" (an
// exception reached the boundary) or a reply that is not one JSON object
// per line is a finding.
//
// To reach past "not found", a line may name what earlier lines created:
//   @L0..@L9  the ids of the leases granted so far (in grant order)
//   @C0..@C9  lease k's own scope cgroup (created on demand, populated)
//   @S0..@S9  lease k's slice cgroup
// and a line starting with '!' drives the loop: !tick, !sample, !drop (the
// connection goes away), !peer (the next lines come from uid 1000, then 0).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/dispatch.h"
#include "daemon/service.h"
#include "fs/root.h"
#include "ledger/ledger.h"

using namespace tally;
using json = nlohmann::json;

namespace {

void put(const std::string& path, const std::string& text) {
  std::string dir = path.substr(0, path.rfind('/'));
  for (std::size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0755);
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
  ::close(fd);
}

void cgroup(const std::string& root, const std::string& path, bool populated) {
  std::string d = root + path;
  put(d + "/cgroup.events", populated ? "populated 1\nfrozen 0\n" : "populated 0\nfrozen 0\n");
  put(d + "/memory.current", "104857600\n");
  put(d + "/memory.peak", "209715200\n");
  put(d + "/memory.max", "max\n");
  put(d + "/memory.high", "max\n");
  put(d + "/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
  put(d + "/memory.stat", "anon 1000\nfile 2000\n");
  put(d + "/cgroup.procs", "");
  put(d + "/cgroup.kill", "");
}

struct Outbox : daemon::Outbox {
  std::vector<std::string> lines;
  bool send(std::uint64_t, std::string line) override {
    // One JSON object per line, newline-terminated: what every client reads.
    if (line.empty() || line.back() != '\n' || line.find('\n') != line.size() - 1) std::abort();
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) std::abort();
    lines.push_back(std::move(line));
    return true;
  }
  bool turnWanted = false;
  void wantTurn() override { turnWanted = true; }
  std::size_t backlog(std::uint64_t) const override { return 0; }
};
struct Watches : daemon::Watches {
  Status watch(const std::string&, const std::string&) override { return Ok{}; }
  bool watchPid(const std::string&, pid_t) override { return true; }
  void unwatch(const std::string&) override {}
};
struct Units : daemon::Units {
  std::string root;
  Result<std::string> controlGroup(const std::string& unit) override {
    if (unit == "a.service") return std::string("/system.slice/a.service");
    return Error{0, "Unit " + unit + " not loaded."};
  }
  Status setMemoryMax(const std::string& unit, std::uint64_t bytes) override {
    if (unit == "a.service")
      put(root + "/system.slice/a.service/memory.max", std::to_string(bytes) + "\n");
    return Ok{};
  }
  Status killUnit(const std::string&, int) override { return Ok{}; }
  Status stopUnit(const std::string&) override { return Ok{}; }
  Result<daemon::UnitRun> run(const std::string& unit) override {
    if (unit == "a.service")
      return daemon::UnitRun{"active", "running", "0123456789abcdef0123456789abcdef",
                             "/system.slice/a.service", ""};
    return Error{0, "Unit " + unit + " not loaded."};
  }
  Status watchUnit(const std::string&) override { return Ok{}; }
};
struct Journal : journal::Journal {
  void note(int, const std::string&,
            const std::vector<std::pair<std::string, std::string>>&) override {}
};

struct World {
  std::string dir;
  std::optional<fs::Root> proc, sys, cg;
  std::optional<ledger::Ledger> ledger;
  Outbox outbox;
  Watches watches;
  Units units;
  Journal journal;
  config::Config cfg;

  World() {
    char tmpl[] = "/dev/shm/tally-request-fuzz.XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    dir = tmpl;
    put(dir + "/proc/meminfo", "MemTotal: 100000000 kB\nMemAvailable: 50000000 kB\n");
    put(dir + "/proc/1/cgroup", "0::/system.slice/a.service\n");
    ::mkdir((dir + "/sys").c_str(), 0755);
    cgroup(dir + "/cgroup", "/system.slice/a.service", true);
    cgroup(dir + "/cgroup", "/user.slice/mine.scope", true);
    if (::chown((dir + "/cgroup/user.slice/mine.scope").c_str(), 1000, 1000) != 0) std::abort();
    cgroup(dir + "/cgroup", "/empty.scope", false);
    units.root = dir + "/cgroup";
    proc.emplace(std::move(*fs::Root::open(dir + "/proc")));
    sys.emplace(std::move(*fs::Root::open(dir + "/sys")));
    cg.emplace(std::move(*fs::Root::open(dir + "/cgroup")));
    auto l = ledger::Ledger::open(dir + "/state");
    if (!l) std::abort();
    ledger.emplace(std::move(*l));
    cfg.daemon.clientGraceUs = 0;
    cfg.daemon.queueTimeoutUs = 0;
    cfg.pools = {config::Pool{"one", 1, std::nullopt, std::nullopt, {}},
                 config::Pool{"gpu", 4, 64ULL << 30, 96ULL << 30, {}}};
  }
  ~World() {
    ledger.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir,
                                ec);  // the synthetic host lives in /dev/shm: leave nothing behind
  }
};

World& world() {
  static World w;
  return w;
}

std::string substitute(const std::string& line, const std::vector<std::string>& leases,
                       const std::string& cgroupRoot) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    char kind = i + 2 < line.size() ? line[i + 1] : '\0';
    char digit = i + 2 < line.size() ? line[i + 2] : '\0';
    std::size_t k = static_cast<std::size_t>(digit - '0');
    if (line[i] != '@' || (kind != 'L' && kind != 'C' && kind != 'S') || digit < '0' ||
        digit > '9' || k >= leases.size()) {
      out += line[i];
      continue;
    }
    const std::string& id = leases[k];
    std::string slice = "/tally.slice/tally-" + id + ".slice";
    std::string scope = slice + "/tally-" + id + ".scope";
    if (kind != 'L' && ::access((cgroupRoot + scope).c_str(), F_OK) != 0) {
      cgroup(cgroupRoot, slice, true);
      cgroup(cgroupRoot, scope, true);
    }
    out += kind == 'L' ? id : kind == 'S' ? slice : scope;
    i += 2;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World& w = world();
  w.outbox.lines.clear();
  daemon::ServiceEnv env{*w.proc, *w.sys, &*w.cg, w.outbox, w.watches, &w.units, 4096, &w.journal};
  daemon::Service service(w.cfg, *w.ledger, env);
  daemon::Dispatcher dispatcher(service, w.outbox);
  rpc::LineReader reader(4096);
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::size_t cut = size ? data[0] % (size + 1) : 0;
  std::vector<std::string> leases;
  std::uint64_t conn = 1;
  daemon::Peer peer{4242, 0, 0};
  auto drain = [&] {
    while (auto line = reader.next()) {
      if (line->text == "!tick")
        service.tick();
      else if (line->text == "!sample")
        service.sample();
      else if (line->text == "!drop")
        service.disconnected(conn++);
      else if (line->text == "!peer")
        peer.uid = peer.uid == 0 ? 1000 : 0;
      else if (line->text == "!turn")  // the loop's turns of work in slices (a replay)
        for (int turns = 0; turns < 1000 && service.backgroundWork(); ++turns) {
        }
      else {
        if (!line->overflow)
          line->text = substitute(std::move(line->text), leases, w.dir + "/cgroup");
        std::size_t before = w.outbox.lines.size();
        dispatcher.line(conn, peer, *line);
        if (dispatcher.internalErrors() != 0) {
          std::fprintf(stderr, "internal error: %s\n", dispatcher.lastInternalError().c_str());
          std::abort();
        }
        for (std::size_t i = before; i < w.outbox.lines.size(); ++i) {
          json j = json::parse(w.outbox.lines[i]);
          if (j.value("ok", false) && j.contains("result") && j["result"].is_object() &&
              j["result"].contains("lease") && j["result"]["lease"].is_string() &&
              leases.size() < 10) {
            std::string id = j["result"]["lease"];
            if (std::find(leases.begin(), leases.end(), id) == leases.end()) leases.push_back(id);
          }
        }
      }
    }
  };
  reader.feed(bytes.substr(0, cut));
  drain();
  reader.feed(bytes.substr(cut));
  drain();
  if (w.outbox.lines.size() > 100000) std::abort();
  return 0;
}
