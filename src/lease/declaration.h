// What a lease declares: its name, its limits, its GPU bound's action and
// pace, its attributes. One passive struct, carried whole by every part that
// holds a lease (the RPC's acquire and attach, the config's [leases.*],
// admission, the daemon's lease, the ledger's granted row, tally run's spec),
// with each default written once, here, and one JSON encoding read by one
// decoder (the RPC's field checks, wherever a declaration is read back).
// What is not the lease's declaration (pools, priority, the queue wait, ids,
// where it runs, what the hand-over applies) stays on the types that carry it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "enforce/gpu_bound.h"
#include "enforce/plan.h"
#include "lease/attributes.h"
#include "util/json_fields.h"
#include "util/result.h"

namespace tally::lease {

inline constexpr unsigned kMaxOverSamples = 100;

struct Declaration {
  // 1-64 of [A-Za-z0-9._-] (validLeaseName); "" = none given: the daemon
  // names the lease by its kind, tally run by its command.
  std::string name;
  // Every limit is optional: tally applies exactly what is declared (doctrine 3).
  std::optional<std::uint64_t> memoryMax, gpuMemoryMax, gpuMemoryHigh;
  // The GPU bound (enforce/gpu_bound.h): GTT+VRAM over gpu_memory_max for
  // gpuOverSamples consecutive samples -> gpuAction; gpu_memory_high only
  // raises an event.
  enforce::Action gpuAction = enforce::kDefaultAction;
  unsigned gpuOverSamples = enforce::kDefaultConsecutive;  // 1..kMaxOverSamples
  Attributes attributes;  // operator-declared (--attr), recorded as declared

  bool gpuBounded() const { return gpuMemoryMax || gpuMemoryHigh; }
};

// What a declaration asks enforcement for (its GPU bound sampled every
// sampleIntervalUs): enforce::plan decides how it is enforced.
enforce::Bounds boundsOf(const Declaration& d, std::uint64_t sampleIntervalUs);

// The declaration as the RPC's params spell it ("name", "memory_max",
// "gpu_memory_max", "gpu_memory_high", "gpu_memory_action",
// "gpu_over_samples", "attributes"); an absent limit is left out. The
// ledger's granted row keeps the same object under "declared".
nlohmann::json declarationJson(const Declaration& d);
// Reads those fields of an object (others are the caller's: it reads them
// from the same Fields, and refuses the rest with unknown()). Each field is
// checked for type and range, the limits by lease::checkLimits, and an error
// names the field ("\"gpu_memory_action\" must be ...").
Status decodeDeclaration(jsonfields::Fields& f, Declaration& d);

}  // namespace tally::lease
