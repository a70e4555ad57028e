#include "support/scenario.h"

namespace tally::testing {

// pid  comm          cgroup                                fds -> clients
// 100  llama-server  /system.slice/llama.service           3,4 -> amd#10 (4 GiB gtt, 512 MiB
//                                                          vram); 5 (card1) -> amd#11 (1 MiB gtt)
// 101  llama-worker  /system.slice/llama.service/worker    7 -> amd#10 (forked: same client,
//                                                          younger)
// 200  python        podman container (NSpid 200 1)        3 -> amd#20 (2 GiB gtt);
//                                                          4 -> xe#3 (192 KiB gtt, vram0 ...)
// 300  compositor    /user.slice/.../session-2.scope       9 -> amd#30 (8 MiB gtt)
// 301  logind        /system.slice/systemd-logind.service  20 -> amd#30 (older: owner; shared
//                                                          across cgroups)
// 400  old-app       /system.slice/legacy.service          3,4 -> 5.14 format, no client id
//                                                          (2 MiB gtt, 1 MiB vram each)
// 500  bash          /user.slice                           /dev/null, a file whose fdinfo
//                                                          *looks* like DRM: ignored
// 600  gone          -                                     vanished (no fd dir): dropped quietly
// 700  closing       /user.slice                           DRM fd whose fdinfo vanished: dropped
// 800  rocm          /system.slice/rocm.service            /dev/kfd; KFD vram_1234 = 1 GiB on
//                                                          0000:c6:00.0
void buildScenario(FakeHost& host, const std::string& xeFdinfo) {
  host.addDevice({kAmdBdf,
                  "amdgpu",
                  {1, 128},
                  {{"gtt_total", kGttTotal},
                   {"gtt_used", kGttUsed},
                   {"vram_total", kVramTotal},
                   {"vram_used", kVramUsed},
                   {"vis_vram_total", 256 * kMiB}},
                  true});
  host.addDevice({kXeBdf, "xe", {2, 129}, {}, true});
  host.setMemAvailable(kMemAvailable);
  host.setModuleParam("ttm", "pages_limit", "25165824");

  const std::string c10 = amdgpuFdinfo(10, kAmdBdf, 4 * 1024 * 1024, 512 * 1024);
  FakeProcess p100{100, "llama-server", "/system.slice/llama.service", "", 50, {}, 1000, {}, false};
  p100.fds = {{3, 128u, "", c10, false},
              {4, 128u, "", c10, false},
              {5, 1u, "", amdgpuFdinfo(11, kAmdBdf, 1024, 0), false}};
  host.addProcess(p100);

  FakeProcess p101{101, "llama-worker", "/system.slice/llama.service/worker", "", 60, {}, 1000,
                   {},  false};
  p101.fds = {{7, 128u, "", c10, false}};
  host.addProcess(p101);

  FakeProcess p200{200, "python", kPodCgroup, "", 70, {200, 1}, 0, {}, false};
  p200.fds = {{3, 128u, "", amdgpuFdinfo(20, kAmdBdf, 2 * 1024 * 1024, 0), false},
              {4, 129u, "", xeFdinfo, false}};
  host.addProcess(p200);

  const std::string c30 = amdgpuFdinfo(30, kAmdBdf, 8192, 0);
  FakeProcess p300{300,  "compositor", "/user.slice/user-1000.slice/session-2.scope",
                   "",   40,           {},
                   1000, {},           false};
  p300.fds = {{9, 128u, "", c30, false}};
  host.addProcess(p300);
  FakeProcess p301{301, "logind", "/system.slice/systemd-logind.service", "", 10, {}, 0, {}, false};
  p301.fds = {{20, 128u, "", c30, false}};
  host.addProcess(p301);

  const std::string legacy =
      "pos:\t0\nflags:\t02\nmnt_id:\t1\npdev:\t0000:c6:00.0\npasid:\t32769\n"
      "vram mem:\t1024 kB\ngtt mem:\t2048 kB\ncpu mem:\t0 kB\ngfx0:\t0.00%\n";
  FakeProcess p400{400, "old-app", "/system.slice/legacy.service", "", 80, {}, 0, {}, false};
  p400.fds = {{3, 128u, "", legacy, false}, {4, 128u, "", legacy, false}};
  host.addProcess(p400);

  FakeProcess p500{500, "bash", "/user.slice", "", 90, {}, 1000, {}, false};
  p500.fds = {{0, std::nullopt, "null", "", false},
              {6, std::nullopt, "file", amdgpuFdinfo(99, kAmdBdf, 999999, 0), false}};
  host.addProcess(p500);

  FakeProcess p600{600, "gone", "/", "", 1, {}, 0, {}, true};
  host.addProcess(p600);

  FakeProcess p700{700, "closing", "/user.slice", "", 1, {}, 0, {}, false};
  p700.fds = {{3, 128u, "", "", true}};
  host.addProcess(p700);

  // KFD: /dev/kfd is 240:0 here; the topology maps gpu_id 1234 to c6:00.0.
  writeFile(host.sysRoot() + "/class/kfd/kfd/dev", "240:0\n");
  writeFile(host.sysRoot() + "/class/kfd/kfd/proc/800/vram_1234", "1073741824\n");
  writeFile(host.sysRoot() + "/class/kfd/kfd/proc/800/pasid", "32780\n");
  writeFile(host.sysRoot() + "/class/kfd/kfd/topology/nodes/0/gpu_id", "0\n");
  writeFile(host.sysRoot() + "/class/kfd/kfd/topology/nodes/1/gpu_id", "1234\n");
  writeFile(
      host.sysRoot() + "/class/kfd/kfd/topology/nodes/1/properties",
      "cpu_cores_count 0\nsimd_count 80\nlocation_id 50688\ndomain 0\ndrm_render_minor 128\n");
  FakeProcess p800{800, "rocm", "/system.slice/rocm.service", "", 95, {}, 0, {}, false};
  p800.fds = {{3, std::nullopt, "char:240:0", "", false}};
  host.addProcess(p800);

  host.addCgroup("system.slice/llama.service", {100});
  host.addCgroup("system.slice/llama.service/worker", {101});
  host.addCgroup("system.slice/legacy.service", {400, 600});
  host.addCgroup("system.slice", {});
}

}  // namespace tally::testing
