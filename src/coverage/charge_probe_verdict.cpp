// The charge probe's judging and its JSON (charge_probe.h): pure, over what
// runChargeProbe (charge_probe.cpp) measured.
#include <fmt/format.h>

#include <algorithm>

#include "coverage/charge_probe.h"
#include "coverage/errno_words.h"

namespace tally::coverage {
namespace {

using json = nlohmann::ordered_json;

std::string figureWords(const char* name, const Figure& f) {
  if (f.bytes) {
    return f.source.empty() ? fmt::format("{} {}", name, *f.bytes)
                            : fmt::format("{} {} ({})", name, *f.bytes, f.source);
  }
  return fmt::format("{} absent ({})", name, f.absent.empty() ? "not read" : f.absent);
}

}  // namespace

const char* chargePathName(ChargePath p) {
  switch (p) {
    case ChargePath::AmdgpuGtt:
      return "amdgpu-gem-create-gtt";
    case ChargePath::AmdgpuVram:
      return "amdgpu-gem-create-vram";
    case ChargePath::KfdGtt:
      return "kfd-alloc-gtt";
    case ChargePath::KfdVram:
      return "kfd-alloc-vram";
    case ChargePath::Dumb:
      return "dumb";
    case ChargePath::Xe:
      return "xe-gem-create";
    case ChargePath::TestDrm:
      return "testdrm-create";
  }
  return "?";
}

const char* chargePathWords(ChargePath p) {
  switch (p) {
    case ChargePath::AmdgpuGtt:
      return "amdgpu GEM_CREATE (GTT)";
    case ChargePath::AmdgpuVram:
      return "amdgpu GEM_CREATE (VRAM)";
    case ChargePath::KfdGtt:
      return "KFD ALLOC_MEMORY_OF_GPU (GTT)";
    case ChargePath::KfdVram:
      return "KFD ALLOC_MEMORY_OF_GPU (VRAM)";
    case ChargePath::Dumb:
      return "MODE_CREATE_DUMB";
    case ChargePath::Xe:
      return "xe GEM_CREATE";
    case ChargePath::TestDrm:
      return "tally_testdrm CREATE";
  }
  return "?";
}

const char* chargeProbeOutcomeName(ChargeProbeOutcome o) {
  switch (o) {
    case ChargeProbeOutcome::Ran:
      return "ran";
    case ChargeProbeOutcome::Unavailable:
      return "unavailable";
    case ChargeProbeOutcome::Failed:
      return "failed";
  }
  return "failed";
}

ChargeVerdict judgeCharge(const PathResult& p) {
  ChargeVerdict v;
  if (!p.charge) {
    v.words = "the lease's charge could not be read";
    return v;
  }
  const std::int64_t charge = *p.charge;
  if (p.fdinfo.bytes) {
    v.compared = "fdinfo";
    v.against = *p.fdinfo.bytes;
  } else if (p.memInfo.bytes) {
    v.compared = "mem_info";
    v.against = *p.memInfo.bytes;
  } else {
    v.compared = "requested";
    v.against = static_cast<std::int64_t>(p.requestedBytes);
  }
  v.difference = charge - v.against;
  v.judgement = v.difference == 0 ? ChargeJudgement::Exact : ChargeJudgement::Differs;
  // mem_info is the device's, every client's: beside a per-client figure it
  // is shown, and said device-wide when it moved otherwise.
  std::string memInfo = figureWords("mem_info", p.memInfo);
  if (p.memInfo.bytes && *p.memInfo.bytes != charge && v.compared != "mem_info")
    memInfo += " (device-wide: other clients move it)";
  if (v.judgement == ChargeJudgement::Exact) {
    if (v.compared == "fdinfo") {
      v.words = fmt::format("charged exactly: charge {} = {}; {}", charge,
                            figureWords("fdinfo", p.fdinfo), memInfo);
    } else if (v.compared == "mem_info") {
      v.words = fmt::format("charged exactly: charge {} = {} (device-wide); {}", charge,
                            figureWords("mem_info", p.memInfo), figureWords("fdinfo", p.fdinfo));
    } else {
      v.words = fmt::format(
          "charged exactly: charge {} = the size asked, page-aligned (no driver figure: {}; {})",
          charge, figureWords("fdinfo", p.fdinfo), memInfo);
    }
  } else {
    const std::int64_t by = v.difference < 0 ? -v.difference : v.difference;
    v.words = fmt::format("differs by {} bytes (charge {}, {}, {}; held to {})", by, charge,
                          figureWords("fdinfo", p.fdinfo), memInfo,
                          v.compared == "requested" ? "the size asked, page-aligned" : v.compared);
  }
  return v;
}

RefusalVerdict judgeRefusal(const PathResult& p) {
  RefusalVerdict v;
  if (p.refusalNotTried) {
    v.words = fmt::format("refusal not tried: {}", *p.refusalNotTried);
    return v;
  }
  if (!p.tryRc) {
    v.words = "refusal not tried: the probe did not get that far";
    return v;
  }
  v.judgement = RefusalJudgement::NotRefused;
  const int rc = *p.tryRc;
  const std::uint64_t asked = p.requestedBytes;
  if (rc == 0) {
    v.words = fmt::format("not refused: the driver made it (charge {} + {} over bound {})",
                          p.chargeAtBound, asked, p.boundBytes);
  } else if (rc != -ENOMEM) {
    v.words = fmt::format("not refused: the driver answered {} (the bound was not what stopped it)",
                          errnoWords(-rc));
  } else if (p.refusedDelta == 0) {
    v.words =
        "not refused by the kernel charge: the driver answered ENOMEM itself (the lease's refusal "
        "count did not move)";
  } else if (p.failsafeDelta > 0) {
    v.words = fmt::format("not refused at the bound: refused failing closed ({})",
                          p.failsafeReason.empty() ? "its reason unread" : p.failsafeReason);
  } else if (p.chargeAfterTry != p.chargeAtBound) {
    v.words = fmt::format("refused, but the charge moved from {} to {}", p.chargeAtBound,
                          p.chargeAfterTry);
  } else {
    v.judgement = RefusalJudgement::Refused;
    v.words = fmt::format(
        "refused at the bound (ENOMEM: charge {} + {} over bound {}; the charge "
        "stayed {})",
        p.chargeAtBound, asked, p.boundBytes, p.chargeAfterTry);
  }
  return v;
}

std::string pathLine(const PathResult& p) {
  if (!p.present) return fmt::format("not present ({})", p.notPresent);
  if (p.failed) return fmt::format("could not be probed: {}", *p.failed);
  return fmt::format("{}; {}", judgeCharge(p).words, judgeRefusal(p).words);
}

bool pathFinding(const PathResult& p) {
  if (!p.present || p.failed) return false;
  return judgeCharge(p).judgement == ChargeJudgement::Differs ||
         judgeRefusal(p).judgement == RefusalJudgement::NotRefused;
}

bool ChargeProbeResult::anyFinding() const {
  return std::any_of(paths.begin(), paths.end(), pathFinding);
}

bool ChargeProbeResult::anyPathFailed() const {
  return std::any_of(paths.begin(), paths.end(),
                     [](const PathResult& p) { return p.present && p.failed; });
}

json pathJson(const PathResult& p) {
  json j;
  j["path"] = chargePathName(p.path);
  j["what"] = chargePathWords(p.path);
  j["present"] = p.present;
  if (!p.present) {
    j["not_present"] = p.notPresent;
    j["line"] = pathLine(p);
    return j;
  }
  j["device"] = p.device;
  j["node"] = p.node;
  j["requested_bytes"] = p.requestedBytes;
  if (p.failed) j["failed"] = *p.failed;
  auto figure = [&](const char* name, const Figure& f) {
    if (f.bytes) {
      j[fmt::format("{}_delta_bytes", name)] = *f.bytes;
      if (!f.source.empty()) j[fmt::format("{}_source", name)] = f.source;
    } else {
      j[fmt::format("{}_absent", name)] = f.absent.empty() ? "not read" : f.absent;
    }
  };
  if (p.charge)
    j["charge_delta_bytes"] = *p.charge;
  else
    j["charge_absent"] = "the lease's charge could not be read";
  figure("fdinfo", p.fdinfo);
  figure("mem_info", p.memInfo);
  if (!p.failed) {
    auto c = judgeCharge(p);
    j["charge"] = c.judgement == ChargeJudgement::Exact     ? "exact"
                  : c.judgement == ChargeJudgement::Differs ? "differs"
                                                            : "unknown";
    if (c.judgement != ChargeJudgement::Unknown) {
      j["compared_with"] = c.compared;
      j["difference_bytes"] = c.difference;
    }
    auto r = judgeRefusal(p);
    j["refusal"] = r.judgement == RefusalJudgement::Refused      ? "refused"
                   : r.judgement == RefusalJudgement::NotRefused ? "not-refused"
                                                                 : "not-tried";
    if (p.refusalNotTried) {
      j["refusal_not_tried"] = *p.refusalNotTried;
    } else if (p.tryRc) {
      j["bound_bytes"] = p.boundBytes;
      j["charge_at_bound_bytes"] = p.chargeAtBound;
      j["charge_after_try_bytes"] = p.chargeAfterTry;
      j["try_errno"] = *p.tryRc == 0 ? json(nullptr) : json(errnoName(-*p.tryRc));
      j["refused_count_delta"] = p.refusedDelta;
      j["refused_failsafe_delta"] = p.failsafeDelta;
      if (!p.failsafeReason.empty()) j["failsafe_reason"] = p.failsafeReason;
    }
  }
  j["line"] = pathLine(p);
  return j;
}

json chargeProbeJson(const ChargeProbeResult& r) {
  json j;
  j["outcome"] = chargeProbeOutcomeName(r.outcome);
  if (!r.detail.empty()) j["detail"] = r.detail;
  if (r.outcome == ChargeProbeOutcome::Unavailable) return j;
  if (!r.source.empty()) j["programs"] = r.source;
  j["refusing"] = r.refusing;
  if (!r.cgroup.empty()) {
    j["cgroup"] = r.cgroup;
    j["cgroup_id"] = r.cgroupId;
  }
  j["requested_bytes"] = r.bytes;
  json paths = json::array();
  for (const auto& p : r.paths) paths.push_back(pathJson(p));
  j["paths"] = paths;
  return j;
}

}  // namespace tally::coverage
