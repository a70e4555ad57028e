#include "bpf/pins.h"

#include <bpf/bpf.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>

#include "bpf/gpu_charge_abi.h"
#include "bpf/libbpf_log.h"
#include "util/unique_fd.h"

namespace tally::bpf {

namespace {

// The names every map is pinned under, and the link pins.
constexpr const char* kMapNames[] = {"tally_devices",  "tally_leases",  "tally_charges",
                                     "tally_objects",  "tally_totals",  "tally_state",
                                     "tally_inflight", "tally_refusals"};

}  // namespace

std::vector<std::string> unpinOlderLayout(const std::string& pinDir) {
  struct Want {
    const char* name;
    __u32 valueSize;
  };
  const Want want[] = {{"tally_inflight", 48},
                       {"tally_leases", sizeof(tally_lease)},
                       {"tally_charges", sizeof(tally_charge)},
                       {"tally_objects", sizeof(tally_object)},
                       {"tally_totals", sizeof(tally_totals)},
                       {"tally_state", sizeof(tally_state)}};
  bool any = false, same = true;
  for (const Want& w : want) {
    UniqueFd fd(bpf_obj_get(fmt::format("{}/{}", pinDir, w.name).c_str()));
    if (!fd.valid()) {
      same = false;
      continue;
    }
    any = true;
    bpf_map_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) != 0 || info.value_size != w.valueSize)
      same = false;
  }
  // An older layout's own maps (tally_bounds went in layout 2).
  bool older = ::access(fmt::format("{}/tally_bounds", pinDir).c_str(), F_OK) == 0;
  std::vector<std::string> removed;
  if ((!any || same) && !older) return removed;
  for (const char* name : kMapNames)
    if (::unlink(fmt::format("{}/{}", pinDir, name).c_str()) == 0) removed.emplace_back(name);
  for (const char* name : {"tally_bounds", "tally_uncounted"})
    if (::unlink(fmt::format("{}/{}", pinDir, name).c_str()) == 0) removed.emplace_back(name);
  return removed;
}

std::uint32_t pinnedMaxEntries(const std::string& pinDir, const char* name) {
  UniqueFd fd(bpf_obj_get(fmt::format("{}/{}", pinDir, name).c_str()));
  if (!fd.valid()) return 0;
  bpf_map_info info{};
  __u32 len = sizeof info;
  return bpf_obj_get_info_by_fd(fd.get(), &info, &len) == 0 ? info.max_entries : 0;
}

Status pinReplacing(bpf_link* link, const std::string& path) {
  bpf_link* old = bpf_link__open(path.c_str());
  if (old) ::unlink(path.c_str());
  int rc = bpf_link__pin(link, path.c_str());
  int err = errno;
  // Not pinned: the old link goes back where it was (still attached while
  // this process held it open), so the old programs stay.
  if (rc != 0 && old) (void)bpf_link__pin(old, path.c_str());
  if (old) bpf_link__destroy(old);
  if (rc != 0) return bpfError(err, fmt::format("cannot pin {}", path));
  return Ok{};
}

std::optional<std::uint32_t> linkedProgram(const std::string& pin) {
  UniqueFd link(bpf_obj_get(pin.c_str()));
  if (!link.valid()) return std::nullopt;
  bpf_link_info info{};
  __u32 len = sizeof info;
  if (bpf_obj_get_info_by_fd(link.get(), &info, &len) != 0) return std::nullopt;
  return info.prog_id;
}

}  // namespace tally::bpf
