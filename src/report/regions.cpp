#include "report/regions.h"

namespace tally::report {

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

RegionMap clientRegions(const scanner::Scan& scan, const scanner::Client& c) {
  std::string_view driver = c.info.driver;
  if (driver.empty() && c.device) driver = scan.devices.devices[*c.device].driver;
  RegionMap out;
  for (const auto& [name, r] : c.info.regions) {
    RegionSums s;
    s.cls = devices::classifyRegion(driver, name);
    auto res = probes::residentOf(r);
    s.resident.add(res ? std::optional<std::uint64_t>(res->bytes) : std::nullopt);
    s.total.add(r.total);
    s.shared.add(r.shared);
    out.emplace(name, s);
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

std::optional<std::uint64_t> kfdVramBytes(const scanner::Process& p) {
  if (p.kfdVram.empty()) return std::nullopt;
  std::uint64_t sum = 0;
  for (const auto& k : p.kfdVram) sum += k.bytes;
  return sum;
}

}  // namespace tally::report
