#include "bpf/kernel_charge_bpf.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "bpf/bpf_charge.h"
#include "bpf/gpu_charge_abi.h"
#include "bpf/libbpf_log.h"
#include "bpf/pins.h"
#include "bpf/sizing.h"
#include "gpu_charge.skel.h"
#include "util/text.h"
#include "util/unique_fd.h"

namespace tally::bpf {

Result<std::unique_ptr<KernelCharge>> loadKernelCharge(const LoadOptions& o) {
  keepLibbpfWarnings();
  if (::mkdir(o.pinDir.c_str(), 0700) != 0 && errno != EEXIST)
    return errnoError(errno, fmt::format("cannot make {}", o.pinDir));
  if (auto gone = unpinOlderLayout(o.pinDir); !gone.empty()) {
    fmt::print(stderr,
               "tally: the BPF maps pinned under {} had an older tally's layout and were removed "
               "({}): the kernel charges start from zero; buffers made before show in DRM "
               "fdinfo until freed\n",
               o.pinDir, fmt::join(gone, ", "));
  }
  // Spelled out: LIBBPF_OPTS is a GNU statement expression, which -Wpedantic refuses.
  bpf_object_open_opts opts{};
  opts.sz = sizeof opts;
  opts.pin_root_path = o.pinDir.c_str();
  tally_gpu_charge* skel = tally_gpu_charge__open_opts(&opts);
  if (!skel) return bpfError(errno, "cannot open the kernel charge's BPF object");
  auto fail = [&](Error e) -> Result<std::unique_ptr<KernelCharge>> {
    tally_gpu_charge__destroy(skel);
    return e;
  };
  // The room: pinned maps keep theirs (libbpf reuses a pinned map only when
  // it matches), new ones get the host's.
  Sizing room = o.sizing;
  if (auto n = pinnedMaxEntries(o.pinDir, "tally_objects")) room.objects = n;
  if (auto n = pinnedMaxEntries(o.pinDir, "tally_leases")) room.leases = n;
  room.objectsPerLease = std::min(room.objectsPerLease, room.objects);
  bpf_map__set_max_entries(skel->maps.tally_objects, static_cast<__u32>(room.objects));
  bpf_map__set_max_entries(skel->maps.tally_leases, static_cast<__u32>(room.leases));
  bpf_map__set_max_entries(skel->maps.tally_charges, static_cast<__u32>(room.leases));
  skel->rodata->tally_objects_capacity = room.objects;
  // This load's generation: nonzero, and another load's never (the clock moves).
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const std::uint64_t generation = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL +
                                   static_cast<std::uint64_t>(now.tv_nsec) + 1;
  skel->rodata->tally_generation = generation;
  if (!o.refuse) {
    bpf_program__set_autoload(skel->progs.tally_refuse_crossing, false);
    bpf_program__set_autoload(skel->progs.tally_refuse_crossing_compat, false);
  }
  // The compat hook and the compat syscall, where the kernel has them (else
  // 32-bit ioctls reach file_ioctl, and there is no 32-bit syscall to end).
  if (libbpf_find_vmlinux_btf_id("file_ioctl_compat", BPF_LSM_MAC) < 0)
    bpf_program__set_autoload(skel->progs.tally_refuse_crossing_compat, false);
  if (libbpf_find_vmlinux_btf_id("__ia32_compat_sys_ioctl", BPF_TRACE_FEXIT) < 0)
    bpf_program__set_autoload(skel->progs.tally_ioctl_done_compat, false);
  if (libbpf_find_vmlinux_btf_id("__x64_compat_sys_ioctl", BPF_TRACE_FEXIT) < 0)
    bpf_program__set_autoload(skel->progs.tally_ioctl_done_x32, false);
  if (tally_gpu_charge__load(skel) != 0)
    return fail(bpfError(errno, "the kernel did not load the kernel charge"));
  for (const DeviceRule& d : o.devices) {
    std::uint32_t key = kernelDev(d.major, d.minor);
    tally_device v{d.kind, d.charged ? 1u : 0u};
    if (bpf_map__update_elem(skel->maps.tally_devices, &key, sizeof key, &v, sizeof v, BPF_ANY) !=
        0)
      return fail(errnoError(errno, fmt::format("cannot register device {}:{}", d.major, d.minor)));
  }
  struct Attach {
    bpf_program* prog;
    bpf_link** link;
    const char* pin;
  };
  Attach attach[] = {
      {skel->progs.tally_charge_object, &skel->links.tally_charge_object, "link_charge"},
      {skel->progs.tally_uncharge_object, &skel->links.tally_uncharge_object, "link_uncharge"},
      {skel->progs.tally_ioctl_done, &skel->links.tally_ioctl_done, "link_ioctl_done"},
      {skel->progs.tally_ioctl_done_compat, &skel->links.tally_ioctl_done_compat,
       "link_ioctl_done_compat"},
      {skel->progs.tally_ioctl_done_x32, &skel->links.tally_ioctl_done_x32, "link_ioctl_done_x32"},
      {skel->progs.tally_moved_in, &skel->links.tally_moved_in, "link_moved_in"},
      {skel->progs.tally_refuse_crossing, &skel->links.tally_refuse_crossing, "link_refuse"},
      {skel->progs.tally_refuse_crossing_compat, &skel->links.tally_refuse_crossing_compat,
       "link_refuse_compat"},
  };
  // Attached first, inactive: the programs an earlier daemon attached act
  // until the generation below turns, then these do; never both, never none.
  for (Attach& a : attach) {
    if (!bpf_program__autoload(a.prog)) continue;
    *a.link = bpf_program__attach(a.prog);
    if (!*a.link)
      return fail(bpfError(errno, fmt::format("cannot attach {}", bpf_program__name(a.prog))));
  }
  std::uint32_t zero = 0;
  tally_state before{};
  (void)bpf_map__lookup_elem(skel->maps.tally_state, &zero, sizeof zero, &before, sizeof before, 0);
  tally_state state{generation};
  if (bpf_map__update_elem(skel->maps.tally_state, &zero, sizeof zero, &state, sizeof state,
                           BPF_ANY) != 0)
    return fail(errnoError(errno, "cannot make the new programs active"));
  // A pin that fails leaves the old programs pinned and attached: they act
  // again (this load's links go with it).
  auto failActive = [&](Error e) {
    (void)bpf_map__update_elem(skel->maps.tally_state, &zero, sizeof zero, &before, sizeof before,
                               BPF_ANY);
    return fail(std::move(e));
  };
  for (Attach& a : attach) {
    std::string pin = fmt::format("{}/{}", o.pinDir, a.pin);
    if (!bpf_program__autoload(a.prog)) {
      if (bpf_link* old = bpf_link__open(pin.c_str())) {
        ::unlink(pin.c_str());  // refusing (or the compat hook) was on before and is not now
        bpf_link__destroy(old);
      }
      continue;
    }
    if (auto s = pinReplacing(*a.link, pin); !s) return failActive(s.error());
  }
  ChargeMaps maps{bpf_map__fd(skel->maps.tally_leases),
                  bpf_map__fd(skel->maps.tally_charges),
                  bpf_map__fd(skel->maps.tally_totals),
                  bpf_map__fd(skel->maps.tally_state),
                  bpf_map__fd(skel->maps.tally_devices),
                  bpf_map__fd(skel->maps.tally_refusals),
                  {}};
  for (const char* link : kTracingLinks)
    if (auto id = linkedProgram(fmt::format("{}/{}", o.pinDir, link)))
      maps.tracingProgs.push_back(*id);
  return chargeOverMaps(skel, std::move(maps), {}, Capabilities{true, o.refuse}, room);
}

Result<std::unique_ptr<KernelCharge>> openPinnedKernelCharge(const std::string& pinDir) {
  auto link = fmt::format("{}/link_charge", pinDir);
  if (::access(link.c_str(), F_OK) != 0)
    return Error{ENOENT, fmt::format("no programs are attached ({} is absent)", link)};
  if (::access(fmt::format("{}/tally_bounds", pinDir).c_str(), F_OK) == 0)
    return Error{ENOENT, fmt::format("the programs under {} are an older tally's: load this "
                                     "one's (tally daemon load-kernel-charge)",
                                     pinDir)};
  std::vector<UniqueFd> fds;
  auto open = [&](const char* name) -> int {
    int fd = bpf_obj_get(fmt::format("{}/{}", pinDir, name).c_str());
    if (fd >= 0) fds.emplace_back(fd);
    return fd;
  };
  ChargeMaps maps{open("tally_leases"),
                  open("tally_charges"),
                  open("tally_totals"),
                  open("tally_state"),
                  open("tally_devices"),
                  open("tally_refusals"),
                  {}};
  if (maps.leases < 0 || maps.charges < 0 || maps.totals < 0 || maps.state < 0 ||
      maps.devices < 0 || maps.refusals < 0)
    return errnoError(errno, fmt::format("cannot open the maps pinned under {}", pinDir));
  for (const char* l : kTracingLinks)
    if (auto id = linkedProgram(fmt::format("{}/{}", pinDir, l))) maps.tracingProgs.push_back(*id);
  Sizing room;
  room.objects = pinnedMaxEntries(pinDir, "tally_objects");
  room.leases = pinnedMaxEntries(pinDir, "tally_leases");
  room.objectsPerLease = std::min<std::uint64_t>(kDefaultObjectsPerLease, room.objects);
  bool refusing = ::access(fmt::format("{}/link_refuse", pinDir).c_str(), F_OK) == 0;
  return chargeOverMaps(nullptr, std::move(maps), std::move(fds), Capabilities{true, refusing},
                        room);
}

Started startKernelCharge(const fs::Root& sys, LoadOptions o, bool loadOnly) {
  Started st;
  HostFacts facts = readHostFacts(sys);
  st.verdict = assess(facts);
  // Programs another process attached for this daemon (the hardened unit's
  // privileged ExecStartPre, `tally daemon load-kernel-charge`): their
  // maps need CAP_BPF alone. Loading here needs CAP_SYS_ADMIN besides
  // (libbpf lists the kernel's module BTF to attach to drm's functions).
  auto usePinned = [&]() -> bool {
    if (loadOnly || !facts.capBpf || !facts.btf || !facts.bpffs) return false;
    auto pinned = openPinnedKernelCharge(o.pinDir);
    if (!pinned) return false;
    st.charge = std::move(*pinned);
    st.verdict.can = st.charge->capabilities();
    st.verdict.why = st.verdict.can.refusing
                         ? ""
                         : "refusing off: the programs attached for this daemon do not refuse (" +
                               (facts.lsmList && !lsmListHasBpf(*facts.lsmList)
                                    ? std::string("the BPF LSM is not active: add lsm=") +
                                          std::string(text::trim(*facts.lsmList)) +
                                          ",bpf to the kernel command line)"
                                    : std::string("see the journal of its ExecStartPre)"));
    return true;
  };
  if (!st.verdict.can.charging) {
    usePinned();
    return st;
  }
  // Loaded with no GPU device too: one that appears later (an eGPU, a
  // driver loaded late) is registered by the daemon's rescan, and the
  // programs cost an ioctl of another device one lookup of its number.
  o.refuse = st.verdict.can.refusing;
  auto loaded = loadKernelCharge(o);
  if (loaded) {
    st.charge = std::move(*loaded);
    return st;
  }
  if (usePinned()) return st;
  facts.loadError = loaded.error().message;
  st.verdict = assess(facts);
  return st;
}

}  // namespace tally::bpf
