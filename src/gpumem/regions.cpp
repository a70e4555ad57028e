#include "gpumem/regions.h"

#include <algorithm>

#include "devices/gtt_ceiling.h"

namespace tally::gpumem {

void Sum::add(const std::optional<std::uint64_t>& v) {
  any = true;
  if (!v) {
    complete = false;
    return;
  }
  if (__builtin_add_overflow(value, *v, &value)) complete = false;
}

std::optional<std::uint64_t> Sum::get() const {
  if (!any || !complete) return std::nullopt;
  return value;
}

ClientRegions clientRegions(const scanner::Scan& scan, const scanner::Client& c) {
  ClientRegions out;
  out.driver = c.info.driver;
  if (out.driver.empty() && c.device) out.driver = scan.devices.devices[*c.device].driver;
  // i915 prints every region of its device: a local* region beside system0
  // says the part is discrete, where system0 is host-mixed.
  const bool withDeviceRegions =
      std::any_of(c.info.regions.begin(), c.info.regions.end(), [&](const auto& r) {
        return devices::classifyRegion(out.driver, r.first) == devices::MemoryClass::Device;
      });
  for (const auto& [name, r] : c.info.regions) {
    RegionSums s;
    s.cls = devices::classifyRegion(out.driver, name, withDeviceRegions);
    auto res = probes::residentOf(r);
    s.resident.add(res ? std::optional<std::uint64_t>(res->bytes) : std::nullopt);
    s.total.add(r.total);
    s.shared.add(r.shared);
    out.regions.emplace(name, s);
  }
  return out;
}

void addInto(RegionMap& into, const RegionMap& from) {
  for (const auto& [name, s] : from) {
    auto [it, inserted] = into.try_emplace(name);
    RegionSums& d = it->second;
    if (inserted)
      d.cls = s.cls;
    else if (d.cls != s.cls)
      d.cls = devices::MemoryClass::Unknown;
    for (auto [dst, src] : {std::pair{&d.resident, &s.resident}, std::pair{&d.total, &s.total},
                            std::pair{&d.shared, &s.shared}}) {
      dst->add(src->get());
    }
  }
}

std::optional<KfdFigure> kfdFigure(const scanner::Process& p, const devices::DeviceMap& devices,
                                   const std::optional<probes::KernelRelease>& kernel) {
  if (p.kfdVram.empty()) return std::nullopt;
  KfdFigure f;
  for (const auto& k : p.kfdVram) {
    f.bytes += k.bytes;
    const devices::DrmDevice* d = k.pdev ? devices.byKey(*k.pdev) : nullptr;
    if (d && devices::rocmPlacement(*d, kernel).where == devices::RocmPlacement::Where::Gtt)
      f.inGttBytes += k.bytes;
  }
  return f;
}

void addInto(std::optional<KfdFigure>& into, const std::optional<KfdFigure>& from) {
  if (!from) return;
  if (!into) into = KfdFigure{};
  into->bytes += from->bytes;
  into->inGttBytes += from->inGttBytes;
}

}  // namespace tally::gpumem
