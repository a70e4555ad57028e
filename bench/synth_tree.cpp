// Builds a synthetic host for the benchmark: DIR/{proc,sys,cgroup} with N
// processes of M fds each; every K-th process holds two DRM clients on one
// amdgpu device (the rest hold a 1:3 char node). DIR/cgroup/lease.scope lists
// the first 20 processes, the size of a typical lease.
// Usage: tally_bench_synth DIR N M K   (root: it mknods char devices)
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace stdfs = std::filesystem;

static void put(const std::string& path, const std::string& text) {
  stdfs::create_directories(stdfs::path(path).parent_path());
  std::ofstream(path) << text;
}

static void link(const std::string& target, const std::string& at) {
  stdfs::create_directories(stdfs::path(at).parent_path());
  stdfs::create_symlink(target, at);
}

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DIR PROCESSES FDS DRM_EVERY\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int n = std::atoi(argv[2]), m = std::atoi(argv[3]), every = std::atoi(argv[4]);
  stdfs::create_directories(dir + "/dev");
  const std::string drmNode = dir + "/dev/renderD128",
                    nullNode = dir + "/dev/null";  // proc/<pid>/fd/../../../dev
  if (::mknod(drmNode.c_str(), S_IFCHR | 0666, makedev(226, 128)) != 0 ||
      ::mknod(nullNode.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    std::perror("mknod (needs root)");
    return 1;
  }
  const std::string devRel = "devices/pci0000:00/0000:c6:00.0";
  const std::string sys = dir + "/sys";
  put(sys + "/" + devRel + "/drm/renderD128/dev", "226:128\n");
  link("../../../0000:c6:00.0", sys + "/" + devRel + "/drm/renderD128/device");
  stdfs::create_directories(sys + "/bus/pci/drivers/amdgpu");
  link("../../../bus/pci/drivers/amdgpu", sys + "/" + devRel + "/driver");
  link("../../../bus/pci", sys + "/" + devRel + "/subsystem");
  put(sys + "/" + devRel + "/mem_info_gtt_total", "103079215104\n");
  put(sys + "/" + devRel + "/mem_info_gtt_used", "42949672960\n");
  link("../../" + devRel + "/drm/renderD128", sys + "/class/drm/renderD128");
  link("../../" + devRel + "/drm/renderD128", sys + "/dev/char/226:128");

  const std::string generic = "pos:\t0\nflags:\t02\nmnt_id:\t24\nino:\t1\n";
  std::string lease;
  for (int i = 0; i < n; ++i) {
    const int pid = 1000 + i;
    const std::string p = fmt::format("{}/proc/{}", dir, pid);
    stdfs::create_directories(p + "/fd");
    stdfs::create_directories(p + "/fdinfo");
    const bool drm = every > 0 && i % every == 0;
    for (int fd = 0; fd < m; ++fd) {
      const bool isDrm = drm && (fd == 3 || fd == 4);
      // Relative links, like short device paths: resolving them is part of every fstatat.
      link(isDrm ? "../../../dev/renderD128" : "../../../dev/null", fmt::format("{}/fd/{}", p, fd));
      std::string info = generic;
      if (isDrm)
        info += fmt::format(
            "drm-driver:\tamdgpu\ndrm-client-id:\t{}\ndrm-pdev:\t0000:c6:00.0\npasid:\t32771\n"
            "drm-total-cpu:\t0\ndrm-shared-cpu:\t0\ndrm-resident-cpu:\t0\ndrm-purgeable-cpu:\t0\n"
            "drm-total-gtt:\t1048576 KiB\ndrm-shared-gtt:\t0\ndrm-resident-gtt:\t1048576 KiB\n"
            "drm-purgeable-gtt:\t0\ndrm-total-vram:\t4096 KiB\ndrm-shared-vram:\t0\n"
            "drm-resident-vram:\t4096 KiB\ndrm-purgeable-vram:\t0\ndrm-memory-vram:\t4096 KiB\n"
            "drm-memory-gtt: \t1048576 KiB\ndrm-memory-cpu: \t0 KiB\namd-evicted-vram:\t0 KiB\n"
            "amd-requested-vram:\t4096 KiB\namd-requested-gtt:\t1048576 KiB\ndrm-engine-gfx:\t1000 "
            "ns\n",
            pid * 2 + fd);
      put(fmt::format("{}/fdinfo/{}", p, fd), info);
    }
    put(p + "/stat",
        fmt::format("{} (worker) S 1 {} {} 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 {} 1000 10 0\n",
                    pid, pid, pid, 100 + i));
    put(p + "/status", fmt::format("Name:\tworker\nUid:\t0\t0\t0\t0\nNSpid:\t{}\n", pid));
    put(p + "/cgroup", fmt::format("0::/bench.slice/w{}.scope\n", pid));
    if (i < 20) lease += fmt::format("{}\n", pid);
  }
  put(dir + "/proc/meminfo", "MemTotal:       131072000 kB\nMemAvailable:   65536000 kB\n");
  put(dir + "/cgroup/lease.scope/cgroup.procs", lease);
  std::printf("synthetic host in %s: %d processes x %d fds, DRM every %d\n", dir.c_str(), n, m,
              every);
  return 0;
}
