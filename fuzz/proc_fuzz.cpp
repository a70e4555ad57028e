// libFuzzer targets for the /proc, /sys and cgroup-path parsers; one binary
// per parser, chosen at compile time by TALLY_FUZZ_TARGET.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "attribution/container.h"
#include "attribution/container_inspect.h"
#include "bpf/gpu_ioctl.h"
#include "cgroup/inotify_events.h"
#include "ledger/head_witness.h"
#include "probes/cgroup_memory.h"
#include "probes/dmem.h"
#include "probes/kernel_release.h"
#include "probes/meminfo.h"
#include "probes/mountinfo.h"
#include "probes/proc_cgroup.h"
#include "probes/proc_stat.h"
#include "probes/proc_status.h"
#include "probes/sysfs_value.h"
#include "slurm/gres.h"
#include "slurm/job_record.h"
#include "slurm/node_text.h"
#include "slurm/plugin_version.h"
#include "util/clean_text.h"
#include "util/units.h"

using namespace tally;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
#if TALLY_FUZZ_TARGET == 1
  auto s = probes::parseProcStatus(text);
  if (s.nspid.size() > 33) std::abort();
#elif TALLY_FUZZ_TARGET == 2
  if (auto c = probes::parseProcCgroup(text)) {
    if (c->path.empty() || c->path.front() != '/') std::abort();
    if (c->path.find('\0') != std::string::npos) std::abort();
  }
  // /proc/cgroups: every controller parsed has a name without blanks.
  for (const auto& c : probes::parseProcCgroups(text))
    if (c.name.empty() || c.name.find_first_of(" \t\n") != std::string::npos) std::abort();
#elif TALLY_FUZZ_TARGET == 3
  (void)probes::parseProcStat(text);
#elif TALLY_FUZZ_TARGET == 4
  (void)probes::parseMemInfo(text);
#elif TALLY_FUZZ_TARGET == 5
  for (const auto& m : probes::parseMountinfo(text))
    if (m.fsType.empty()) std::abort();
#elif TALLY_FUZZ_TARGET == 6
  (void)probes::parseSysfsU64(text);
  (void)probes::parseSysfsI64(text);
  (void)probes::parseDevNumber(text);
  // /proc/sys/kernel/osrelease: a release parsed once parses the same again
  // from the text it kept.
  if (auto r = probes::parseKernelRelease(text)) {
    auto again = probes::parseKernelRelease(r->text);
    if (r->text.size() > 64 || !again || again->major != r->major || again->minor != r->minor)
      std::abort();
  }
#elif TALLY_FUZZ_TARGET == 7
  if (auto w = attribution::classifyCgroup(text))
    if (w->name.empty()) std::abort();
  // A container's whole cgroup is a leading part of the path it was found in.
  constexpr std::string_view kId =
      "3f2a9c0d1b2e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a";
  if (auto c = attribution::containerCgroup(text, kId)) {
    if (c->empty() || c->front() != '/' || c->find(kId) == std::string::npos) std::abort();
  }
  // What read() on the lease trees' inotify fd returns (cgroup/tree_watch.h):
  // every record decoded lies inside the bytes, names within their record.
  if (auto events = cgroup::decodeInotify(text)) {
    for (const auto& e : *events)
      if (e.name.data() < text.data() ||
          e.name.data() + e.name.size() > text.data() + text.size() ||
          e.name.find('\0') != std::string_view::npos)
        std::abort();
  } else if (events.error().message.empty()) {
    std::abort();
  }
#elif TALLY_FUZZ_TARGET == 8
  // memory.events / memory.stat / cgroup.events and the limit files.
  if (auto f = probes::parseFlatKeyed(text)) {
    for (const auto& [k, v] : f->entries) {
      if (k.empty() || k.find('\0') != std::string::npos || k.find(' ') != std::string::npos)
        std::abort();
      if (f->get(k) != v && f->get(k) < v) std::abort();  // first value of a key wins
    }
  }
  if (auto l = probes::parseMemoryLimit(text)) {
    if (l->unlimited && l->bytes != 0) std::abort();
  }
#elif TALLY_FUZZ_TARGET == 9
  // Operator input at the edge: sizes and durations.
  if (auto b = units::parseSize(text); !b && b.error().message.empty()) std::abort();
  if (auto d = units::parseDurationUs(text); !d && d.error().message.empty()) std::abort();
#elif TALLY_FUZZ_TARGET == 10
  // dmem.capacity / dmem.current: every region parsed has a name.
  if (auto r = probes::parseDmemCapacity(text)) {
    for (const auto& region : *r) {
      if (region.name.empty()) std::abort();
    }
  }
#elif TALLY_FUZZ_TARGET == 11
  // slurmctld's GRES/TRES strings: a count or a named error, and a count
  // found in one list is found again when another GRES is put before it.
  auto n = slurm::gresCount(text, "gpumem");
  if (!n && n.error().message.empty()) std::abort();
  if (n && *n && text.find_first_of(",;") == std::string_view::npos) {
    std::string longer = "gres:gpu:2," + std::string(text);
    auto again = slurm::gresCount(longer, "gpumem");
    if (!again || *again != *n) std::abort();
  }
  // The kept job record: a record or a named error; one that reads writes
  // back the same text.
  auto record = slurm::decodeJobRecord(text);
  if (!record && record.error().message.empty()) std::abort();
  if (record && slurm::encodeJobRecord(*record) != text) std::abort();
#elif TALLY_FUZZ_TARGET == 12
  // podman/docker container inspect: one running container, or a named error.
  for (std::string_view engine : {"podman", "docker"}) {
    auto c = attribution::decodeContainerInspect(text, engine);
    if (c && (c->id.size() != 64 || c->pid <= 0 || !attribution::validContainerName(c->name)))
      std::abort();
    if (!c && c.error().message.empty()) std::abort();
  }
#elif TALLY_FUZZ_TARGET == 13
  // The ledger's head witness: what decodes encodes back to the same bytes.
  if (auto h = ledger::decodeHead(text)) {
    if (ledger::encodeHead(*h) != text) std::abort();
  } else if (h.error().message.empty()) {
    std::abort();
  }
#elif TALLY_FUZZ_TARGET == 14
  // Text others read: whatever comes in, what is shown is clean text and
  // stays so when shown again; clean text is shown as it is.
  std::string shown = text::printable(text);
  if (text::cleanTextProblem(shown) || text::printable(shown) != shown) std::abort();
  if (!text::cleanTextProblem(text) && shown != text) std::abort();
#elif TALLY_FUZZ_TARGET == 15
  // The kernel charge's ioctl decoder: kind, cmd, then the argument bytes.
  if (size < 8) return 0;
  __u32 kind = 0, cmd = 0;
  std::memcpy(&kind, data, 4);
  std::memcpy(&cmd, data + 4, 4);
  kind %= 6;
  __u64 bytes = 1;
  auto op = tally_ioctl_decode(kind, cmd, data + 8, static_cast<__u32>(size - 8), &bytes);
  if (op == TALLY_IOCTL_ALLOC && bytes % 4096 != 0) std::abort();
  if (op != TALLY_IOCTL_ALLOC && bytes != 0) std::abort();
  if (op == TALLY_IOCTL_ALLOC && size - 8 < tally_ioctl_arg_size(kind, cmd)) std::abort();
  // Unreadable only when fewer bytes than the struct came; undecodable only
  // for an allocation the driver would size.
  if (op == TALLY_IOCTL_UNREADABLE && size - 8 >= tally_ioctl_arg_size(kind, cmd)) std::abort();
  if (op == TALLY_IOCTL_UNDECODABLE && tally_ioctl_arg_size(kind, cmd) == 0) std::abort();
  // The hook's first test lets through every command a decoder knows.
  if (op != TALLY_IOCTL_PASS && !tally_ioctl_decodable(cmd)) std::abort();
  if (tally_ioctl_user_bytes(kind, cmd) > tally_ioctl_arg_size(kind, cmd) ||
      tally_ioctl_arg_size(kind, cmd) > TALLY_IOCTL_MAX_ARG)
    std::abort();
#elif TALLY_FUZZ_TARGET == 16
  // A node's own words (plugstack.conf, slurmd -V, scontrol show node): a
  // tally line has a path naming tally_spank; a version is digits.digits; a
  // GRES count comes from a Gres= field naming it, or is a named error.
  auto p = slurm::parsePlugstack(text);
  if (p.tally && p.tally->path.find("tally_spank") == std::string::npos) std::abort();
  if (auto v = slurm::releaseOfSlurmd(text)) {
    auto dot = v->find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == v->size()) std::abort();
  }
  auto g = slurm::gresOfScontrol(text, "tallymem");
  if (!g && g.error().message.empty()) std::abort();
  if (g && *g &&
      (text.find("Gres=") == std::string_view::npos ||
       text.find("tallymem") == std::string_view::npos))
    std::abort();
  if (auto m = slurm::realMemoryOfScontrol(text); m && *m % (1ULL << 20) != 0) std::abort();
  if (auto n = slurm::cpusOfScontrol(text); n && text.find("CPUTot=") == std::string_view::npos)
    std::abort();
  if (auto c = slurm::containOfScontrolConfig(text);
      (c && *c && text.find("Contain") == std::string_view::npos) ||
      (c && text.find("PrologFlags") == std::string_view::npos))
    std::abort();
  if (slurm::pamAdoptsIntoJobs(text) && text.find("pam_slurm_adopt") == std::string_view::npos)
    std::abort();
#elif TALLY_FUZZ_TARGET == 17
  // A plugin file: a version or a named error, never a read past the image
  // (ASan's job here).
  auto v = slurm::elfExportedU32(text, "plugin_version");
  if (!v && v.error().message.empty()) std::abort();
#else
#error "TALLY_FUZZ_TARGET must name a parser"
#endif
  return 0;
}
