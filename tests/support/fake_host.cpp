#include "support/fake_host.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tally::testing {
namespace stdfs = std::filesystem;

namespace {
[[noreturn]] void fail(const std::string& what) {
  ADD_FAILURE() << what << ": " << std::strerror(errno);
  throw std::runtime_error(what);
}
std::string parentOf(const std::string& p) { return stdfs::path(p).parent_path().string(); }
}  // namespace

TempDir::TempDir() {
  std::string tmpl = (stdfs::temp_directory_path() / "tally-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp");
  ::chmod(tmpl.c_str(), 0755);  // readable by the unprivileged child of the EACCES tests
  path_ = tmpl;
}

FileSizeLimit::FileSizeLimit(std::uint64_t bytes) {
  struct rlimit r {};
  if (::getrlimit(RLIMIT_FSIZE, &r) != 0) throw std::runtime_error("getrlimit(RLIMIT_FSIZE)");
  savedCur_ = r.rlim_cur;
  savedMax_ = r.rlim_max;
  savedHandler_ = std::signal(SIGXFSZ, SIG_IGN);
  r.rlim_cur = bytes;
  if (::setrlimit(RLIMIT_FSIZE, &r) != 0) throw std::runtime_error("setrlimit(RLIMIT_FSIZE)");
}

FileSizeLimit::~FileSizeLimit() {
  struct rlimit r {};
  r.rlim_cur = savedCur_;
  r.rlim_max = savedMax_;
  (void)::setrlimit(RLIMIT_FSIZE, &r);
  std::signal(SIGXFSZ, savedHandler_);
}

TempDir::~TempDir() {
  std::error_code ec;
  stdfs::remove_all(path_, ec);
}

void makeDirs(const std::string& path) {
  std::error_code ec;
  stdfs::create_directories(path, ec);
  if (ec) fail("mkdir -p " + path);
}

void writeFile(const std::string& path, const std::string& content) {
  makeDirs(parentOf(path));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) fail("write " + path);
}

void makeSymlink(const std::string& target, const std::string& link) {
  makeDirs(parentOf(link));
  if (::symlink(target.c_str(), link.c_str()) != 0) fail("symlink " + link + " -> " + target);
}

void makeCharDevice(const std::string& path, unsigned major, unsigned minor) {
  makeDirs(parentOf(path));
  if (::access(path.c_str(), F_OK) == 0) return;
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(major, minor)) != 0)
    fail("mknod " + path + " (the scanner tests need root to create char devices)");
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

FakeHost::FakeHost() {
  makeDirs(procRoot());
  makeDirs(sysRoot());
  makeDirs(cgroupRoot());
  writeFile(procRoot() + "/meminfo", "MemTotal:       131072000 kB\nMemAvailable:   65536000 kB\n");
  // The kernel release decides which of KFD's limits apply (devices/gtt_ceiling.h).
  writeFile(procRoot() + "/sys/kernel/osrelease", "6.12.117+deb12-amd64\n");
}

std::string FakeHost::devNode(unsigned major, unsigned minor) {
  std::string p = fmt::format("{}/dev/char-{}-{}", dir_.path(), major, minor);
  makeCharDevice(p, major, minor);
  return p;
}

void FakeHost::addDevice(const FakeDevice& d) {
  const std::string sys = sysRoot();
  const std::string devRel = d.pci ? "devices/pci0000:00/" + d.bdf : "devices/platform/" + d.bdf;
  const std::string devDir = sys + "/" + devRel;
  const std::string bus = d.pci ? "pci" : "platform";
  makeDirs(sys + "/bus/" + bus + "/drivers/" + d.driver);
  const std::string up = d.pci ? "../../../" : "../../../";
  makeSymlink(up + "bus/" + bus + "/drivers/" + d.driver, devDir + "/driver");
  makeSymlink(up + "bus/" + bus, devDir + "/subsystem");
  for (const auto& [key, value] : d.memInfo)
    writeFile(devDir + "/mem_info_" + key, fmt::format("{}\n", value));
  for (unsigned minor : d.minors) {
    std::string name =
        minor >= 128 ? fmt::format("renderD{}", minor) : fmt::format("card{}", minor);
    std::string nodeDir = devDir + "/drm/" + name;
    writeFile(nodeDir + "/dev", fmt::format("226:{}\n", minor));
    makeSymlink("../../../" + d.bdf, nodeDir + "/device");
    // class/drm/<name> and dev/char/226:<minor> both lead to the node directory.
    makeSymlink("../../" + devRel + "/drm/" + name, sys + "/class/drm/" + name);
    makeSymlink("../../" + devRel + "/drm/" + name, sys + fmt::format("/dev/char/226:{}", minor));
    devNode(226, minor);
  }
  for (unsigned minor : d.accelMinors) {
    std::string name = fmt::format("accel{}", minor);
    std::string nodeDir = devDir + "/accel/" + name;
    writeFile(nodeDir + "/dev", fmt::format("261:{}\n", minor));
    makeSymlink("../../../" + d.bdf, nodeDir + "/device");
    makeSymlink("../../" + devRel + "/accel/" + name, sys + "/class/accel/" + name);
    makeSymlink("../../" + devRel + "/accel/" + name, sys + fmt::format("/dev/char/261:{}", minor));
    devNode(261, minor);
  }
}

void FakeHost::addProcess(const FakeProcess& p) {
  const std::string dir = fmt::format("{}/{}", procRoot(), p.pid);
  makeDirs(dir);
  if (!p.noFdDir) {
    makeDirs(dir + "/fd");
    makeDirs(dir + "/fdinfo");
  }
  writeFile(dir + "/stat",
            fmt::format("{} ({}) S 1 {} {} 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 {} 1000 10 "
                        "18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
                        p.pid, p.comm, p.pid, p.pid, p.startTime));
  std::string nspid;
  for (auto n :
       p.nspid.empty() ? std::vector<std::uint64_t>{static_cast<std::uint64_t>(p.pid)} : p.nspid)
    nspid += fmt::format("\t{}", n);
  writeFile(dir + "/status",
            fmt::format("Name:\t{}\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t{}\n"
                        "Uid:\t{}\t{}\t{}\t{}\nGid:\t0\t0\t0\t0\nNSpid:{}\n",
                        p.comm, p.pid, p.uid, p.uid, p.uid, p.uid, nspid));
  writeFile(dir + "/cgroup", p.cgroupFile.empty() ? "0::" + p.cgroup + "\n" : p.cgroupFile);
  if (p.noFdDir) return;
  auto addFds = [&](const std::string& table, const std::vector<FakeFd>& fds) {
    for (const auto& f : fds) {
      std::string target;
      if (f.drmMinor)
        target = devNode(226, *f.drmMinor);
      else if (f.other == "null")
        target = devNode(1, 3);
      else if (f.other.rfind("char:", 0) == 0) {
        unsigned maj = 0, min = 0;
        std::sscanf(f.other.c_str(), "char:%u:%u", &maj, &min);
        target = devNode(maj, min);
      } else {
        target = root() + "/regular-file";
        writeFile(target, "x");
      }
      makeSymlink(target, fmt::format("{}/fd/{}", table, f.fd));
      if (!f.fdinfoMissing)
        writeFile(fmt::format("{}/fdinfo/{}", table, f.fd),
                  f.fdinfo.empty() ? "pos:\t0\nflags:\t02\nmnt_id:\t24\nino:\t1\n" : f.fdinfo);
    }
  };
  addFds(dir, p.fds);
  for (const auto& [tid, fds] : p.threadFds) {
    std::string task = fmt::format("{}/task/{}", dir, tid);
    makeDirs(task + "/fd");
    makeDirs(task + "/fdinfo");
    addFds(task, fds);
  }
}

void FakeHost::setMemAvailable(std::uint64_t bytes) {
  writeFile(procRoot() + "/meminfo",
            fmt::format("MemTotal:       131072000 kB\nMemAvailable:   {} kB\n", bytes / 1024));
}

void FakeHost::setModuleParam(const std::string& module, const std::string& param,
                              const std::string& value) {
  writeFile(fmt::format("{}/module/{}/parameters/{}", sysRoot(), module, param), value + "\n");
}

void FakeHost::addModuleHolder(const std::string& module, const std::string& holder) {
  makeDirs(fmt::format("{}/module/{}", sysRoot(), holder));
  makeDirs(fmt::format("{}/module/{}/holders", sysRoot(), module));
  makeSymlink("../../" + holder, fmt::format("{}/module/{}/holders/{}", sysRoot(), module, holder));
}

void FakeHost::addCgroup(const std::string& path, const std::vector<pid_t>& pids) {
  std::string content;
  for (auto p : pids) content += fmt::format("{}\n", p);
  writeFile(cgroupRoot() + "/" + path + "/cgroup.procs", content);
}

void FakeHost::addKfd(pid_t pid, std::uint64_t gpuId, const std::string& bdf,
                      std::uint64_t vramBytes) {
  std::string kfd = sysRoot() + "/class/kfd/kfd";
  writeFile(kfd + "/dev", "240:0\n");
  writeFile(fmt::format("{}/proc/{}/vram_{}", kfd, pid, gpuId), fmt::format("{}\n", vramBytes));
  writeFile(kfd + "/topology/nodes/0/gpu_id", "0\n");  // the CPU node
  // location_id = bus << 8 | device << 3 | function, as the kernel prints it.
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::sscanf(bdf.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function);
  std::string node = fmt::format("{}/topology/nodes/{}", kfd, gpuId % 1000 + 1);
  writeFile(node + "/gpu_id", fmt::format("{}\n", gpuId));
  writeFile(node + "/properties",
            fmt::format("cpu_cores_count 0\nsimd_count 80\nlocation_id {}\ndomain {}\n",
                        bus << 8 | device << 3 | function, domain));
}

std::string amdgpuFdinfo(std::uint64_t clientId, const std::string& pdev, std::uint64_t gttKiB,
                         std::uint64_t vramKiB) {
  return fmt::format(
      "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1239\n"
      "drm-driver:\tamdgpu\ndrm-client-id:\t{0}\ndrm-pdev:\t{1}\npasid:\t32771\n"
      "drm-total-cpu:\t0\ndrm-shared-cpu:\t0\ndrm-resident-cpu:\t0\ndrm-purgeable-cpu:\t0\n"
      "drm-total-gtt:\t{2} KiB\ndrm-shared-gtt:\t0\ndrm-resident-gtt:\t{2} "
      "KiB\ndrm-purgeable-gtt:\t0\n"
      "drm-total-vram:\t{3} KiB\ndrm-shared-vram:\t0\ndrm-resident-vram:\t{3} "
      "KiB\ndrm-purgeable-vram:\t0\n"
      "drm-memory-vram:\t{3} KiB\ndrm-memory-gtt: \t{2} KiB\ndrm-memory-cpu: \t0 KiB\n"
      "amd-evicted-vram:\t0 KiB\namd-requested-vram:\t{3} KiB\namd-requested-gtt:\t{2} KiB\n"
      "drm-engine-gfx:\t1000 ns\n",
      clientId, pdev, gttKiB, vramKiB);
}

}  // namespace tally::testing
