// The installed package against a real systemd 252: what `cmake --install`
// put in the staging root (build/stage, the tally_stage target) passes
// `systemd-analyze verify`, and the hardened tally.service, installed onto
// the VM's throw-away root, starts as Type=notify, serves, meters an attached
// unit through D-Bus and cgroupfs, and stops. VM harness only.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/fake_host.h"
#include "support/process.h"
#include "support/raw_client.h"

namespace tally {
namespace {

using json = nlohmann::json;
using namespace tally::testing;
using namespace std::chrono_literals;

const std::string kStage = TALLY_STAGE_DIR;
const std::string kWorkload = TALLY_VM_WORKLOAD;

ProgramResult sh(const std::string& cmd, std::vector<std::string> env = {}) {
  return runProgram({"sh", "-c", cmd}, std::move(env));
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class VmPackage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NE(std::getenv("TALLY_IN_VM"), nullptr)
        << "these tests need the VM harness: vm/run.sh -- tally_vm_tests";
    struct stat st {};
    ASSERT_EQ(::stat((kStage + "/usr/local/bin/tally").c_str(), &st), 0)
        << "no staging root at " << kStage
        << "; build the tally_stage target (cmake --build --preset default)";
    // The suite's own GPU: whichever suite runs first (or alone, with a filter).
    if (::access("/sys/module/tally_testdrm", F_OK) != 0) {
      const char* ko = std::getenv("TALLY_TESTDRM_KO");
      ASSERT_NE(ko, nullptr);
      ASSERT_EQ(sh(std::string("modprobe drm && insmod ") + ko).exitCode(), 0);
    }
  }
  // What the stage put on the VM's root goes, so a later suite (VmDeb) finds
  // only what it installs: systemd prefers /usr/local's tally.service to /usr's.
  static void TearDownTestSuite() {
    sh("systemctl disable --now tally.service 2>/dev/null; cd " + kStage +
       " && find . ! -type d -exec sh -c 'rm -f \"/$1\"' _ {} \\; ; systemctl daemon-reload");
  }
};

TEST_F(VmPackage, StagedUnitsPassSystemdAnalyzeVerify) {
  // The binary the units name must exist where they name it: install the
  // stage onto the VM's root (an overlay thrown away at power-off).
  ASSERT_EQ(sh("cp -a --remove-destination " + kStage + "/. /").exitCode(), 0);
  std::vector<std::string> env = {"MANPATH=" + kStage + "/usr/local/share/man"};
  auto system =
      sh("systemd-analyze verify " + kStage + "/usr/local/lib/systemd/system/tally.service", env);
  EXPECT_EQ(system.exitCode(), 0) << system.out << system.err;
  EXPECT_EQ(system.err, "") << "systemd-analyze warned";
  ASSERT_EQ(sh("mkdir -p /run/user/0 && chmod 0700 /run/user/0").exitCode(), 0);
  env.push_back("XDG_RUNTIME_DIR=/run/user/0");
  auto user = sh(
      "systemd-analyze --user verify " + kStage + "/usr/local/lib/systemd/user/tally.service", env);
  EXPECT_EQ(user.exitCode(), 0) << user.out << user.err;
  EXPECT_EQ(user.err, "") << "systemd-analyze warned";
  // The hardening is what the unit says, as systemd reads it.
  auto security = sh("systemd-analyze security --offline=yes --no-pager " + kStage +
                     "/usr/local/lib/systemd/system/tally.service");
  std::cout << "---- systemd-analyze security (the hardened unit) ----\n"
            << security.out.substr(
                   security.out.rfind("\n→ ") == std::string::npos ? 0 : security.out.rfind("\n→ "))
            << "\n";
  // A unit with a mistake is refused by the same check (the check can fail).
  ASSERT_EQ(sh("mkdir -p /tmp/broken && sed 's/^Type=notify/Type=notifyy/' " + kStage +
               "/usr/local/lib/systemd/system/tally.service > /tmp/broken/tally.service")
                .exitCode(),
            0);
  auto broken = sh("systemd-analyze verify /tmp/broken/tally.service", env);
  EXPECT_NE(broken.out + broken.err, "") << "a misspelt Type= went unnoticed";
}

TEST_F(VmPackage, TheHardenedServiceStartsServesAndMetersAnAttachedUnit) {
  ASSERT_EQ(sh("cp -a --remove-destination " + kStage + "/. /").exitCode(), 0);
  ASSERT_EQ(sh("mkdir -p /etc/tally && cat > /etc/tally/tally.toml "
               "<<'EOF'\n[daemon]\nsample_interval = \"200ms\"\n"
               "metrics_textfile = \"/var/lib/prometheus/node-exporter/tally.prom\"\n"
               "[pools.gpu]\ncapacity = 2\ngpu_memory_budget = \"4GiB\"\nEOF\n"
               "mkdir -p /var/lib/prometheus/node-exporter")
                .exitCode(),
            0);
  ASSERT_EQ(sh("systemctl daemon-reload && systemctl start tally.service").exitCode(), 0)
      << sh("journalctl -u tally --no-pager").out;
  EXPECT_EQ(trimmed(sh("systemctl is-active tally.service").out), "active");
  EXPECT_EQ(trimmed(sh("systemctl show -p Type --value tally.service").out), "notify");
  EXPECT_EQ(trimmed(sh("systemctl show -p ProtectSystem --value tally.service").out), "strict");
  EXPECT_EQ(trimmed(sh("systemctl show -p NoNewPrivileges --value tally.service").out), "yes");
  // The installed binary, the default socket: what an operator types.
  auto pools = sh("/usr/local/bin/tally pools --json");
  ASSERT_EQ(pools.exitCode(), 0) << pools.err << sh("journalctl -u tally --no-pager").out;
  EXPECT_EQ(json::parse(pools.out)[0]["pool"], "gpu");
  std::string server = "tally-pkg-server-" + std::to_string(::getpid()) + ".service";
  std::string readyFile = "/tmp/" + server + ".ready";
  ASSERT_EQ(sh("systemd-run --quiet --unit=" + server + " -p Type=exec " + kWorkload +
               " gpu gtt 16 1 60000 " + readyFile)
                .exitCode(),
            0);
  ASSERT_TRUE(eventually([&] { return ::access(readyFile.c_str(), F_OK) == 0; }, 30s));
  auto a = sh("/usr/local/bin/tally attach --unit " + server +
              " --pool gpu --memory-max 256M --gpu-memory-max 1G --attr model=test");
  ASSERT_EQ(a.exitCode(), 0) << a.err << sh("journalctl -u tally --no-pager").out;
  EXPECT_EQ(trimmed(sh("systemctl show -p MemoryMax --value " + server).out),
            "268435456");  // through D-Bus, under the sandbox
  // The barrier: the daemon has sampled the lease's GPU memory.
  json seats;
  eventually(
      [&] {
        seats = json::parse(sh("/usr/local/bin/tally seats --json").out, nullptr, false);
        return seats.is_object() && seats["seats"].size() == 1u &&
               seats["seats"][0]["gpu"]["regions"]["gtt"]["current_bytes"] == (16u << 20);
      },
      30s);
  ASSERT_TRUE(seats.is_object()) << sh("journalctl -u tally --no-pager").out;
  ASSERT_EQ(seats["seats"].size(), 1u);
  EXPECT_EQ(seats["seats"][0]["running"], true);
  EXPECT_EQ(seats["seats"][0]["gpu"]["regions"]["gtt"]["current_bytes"], 16u << 20)
      << seats.dump(2);  // every /proc readable
  // The textfile under the sandbox's one writable path outside its state.
  auto check = sh("promtool check metrics < /var/lib/prometheus/node-exporter/tally.prom");
  EXPECT_EQ(check.exitCode(), 0) << check.out << check.err;
  // The kernel charge runs under the hardening: two capabilities and bpf(2) added.
  std::string log = sh("journalctl -u tally --no-pager -o cat").out;
  EXPECT_NE(log.find("kernel charge: charging and refusing in the kernel (BPF)"), std::string::npos)
      << log;
  EXPECT_NE(readFile("/var/lib/prometheus/node-exporter/tally.prom")
                .find("tally_kernel_charge_active{mode=\"refusing\"} 1"),
            std::string::npos);
  sh("systemctl stop " + server);
  ASSERT_EQ(sh("systemctl stop tally.service").exitCode(), 0);
  EXPECT_EQ(trimmed(sh("systemctl show -p Result --value tally.service").out), "success");
  // A unit without those capabilities: the daemon serves on and says why.
  ASSERT_EQ(sh("mkdir -p /run/systemd/system/tally.service.d && printf '[Service]\\n"
               "CapabilityBoundingSet=~CAP_BPF CAP_PERFMON\\n' > "
               "/run/systemd/system/tally.service.d/nobpf.conf && systemctl daemon-reload && "
               "journalctl --rotate >/dev/null 2>&1; systemctl start tally.service")
                .exitCode(),
            0);
  EXPECT_EQ(sh("/usr/local/bin/tally pools --json").exitCode(), 0);
  std::string why;
  eventually(
      [&] {
        why = sh("journalctl -u tally --no-pager -o cat | grep 'kernel charge: ' | "
                 "tail -n 1")
                  .out;
        return why.find("lacks CAP_BPF") != std::string::npos;
      },
      10s);
  EXPECT_NE(why.find("off: the daemon lacks CAP_BPF and CAP_PERFMON: add CAP_BPF CAP_PERFMON to "
                     "the unit's CapabilityBoundingSet"),
            std::string::npos)
      << why;
  ASSERT_EQ(sh("systemctl stop tally.service").exitCode(), 0);
  sh("rm -rf /run/systemd/system/tally.service.d /sys/fs/bpf/tally && systemctl daemon-reload");
  sh("systemctl reset-failed " + server + " 2>/dev/null; rm -rf /etc/tally /run/tally");
}

// The guide cannot drift from the tool: every command block marked
// "```sh runnable" in docs/guide/ runs, as written, on the installed package in
// a real systemd (sudo is the identity here: the VM runs as root), and must
// succeed. Blocks run in file order; what they start is stopped afterwards.
TEST_F(VmPackage, TheGuidesRunnableBlocksRunAsWritten) {
  ASSERT_EQ(sh("cp -a --remove-destination " + kStage + "/. /").exitCode(), 0);
  std::vector<std::pair<std::string, std::string>> blocks;  // (where, text)
  for (const char* page : {"README.md", "concepts.md", "strix-halo.md", "observability.md",
                           "install.md", "troubleshooting.md"}) {
    std::string path = std::string(TALLY_SOURCE_DIR) + "/docs/guide/" + page;
    std::string text = readFile(path);
    std::size_t at = 0;
    while ((at = text.find("```sh runnable\n", at)) != std::string::npos) {
      std::size_t begin = at + 15, end = text.find("\n```", begin);
      ASSERT_NE(end, std::string::npos) << path << ": an unterminated block";
      auto line = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
      blocks.emplace_back(fmt::format("docs/guide/{}:{}", page, line + 2),
                          text.substr(begin, end - begin + 1));
      at = end;
    }
  }
  ASSERT_GE(blocks.size(), 3u) << "the guide marks its runnable blocks with ```sh runnable";
  for (const auto& [where, block] : blocks) {
    auto r = sh("set -e; sudo() { \"$@\"; }; " + block,
                {"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"});
    std::printf("[ guide %s ]\n%s%s[ exit %d ]\n", where.c_str(), r.out.c_str(), r.err.c_str(),
                r.exitCode());
    EXPECT_EQ(r.exitCode(), 0) << where << ":\n" << block << r.out << r.err;
  }
  sh("systemctl disable --now tally.service; rm -f /etc/tally/tally.toml");
}

}  // namespace
}  // namespace tally
