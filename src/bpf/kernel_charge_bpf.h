// The kernel charge over libbpf: loads gpu_charge.bpf.c (its skeleton is
// generated at build time), attaches it, and pins its maps and links under
// a bpffs directory so the charges and the bound outlive the daemon: a
// kill -9 or a restart leaves every lease charged and bounded, and the next
// daemon reuses the same maps. The maps' interface is bpf_charge.h's, the
// pins' pins.h's; what it registers and sizes by, the host's (host.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bpf/availability.h"
#include "bpf/host.h"
#include "bpf/kernel_charge.h"
#include "bpf/sizing.h"
#include "fs/root.h"

namespace tally::bpf {

struct LoadOptions {
  std::string pinDir = "/sys/fs/bpf/tally";
  bool refuse = true;  // load the LSM programs (only where the BPF LSM is active)
  std::vector<DeviceRule> devices;
  // The maps' room (bpf/sizing.h). Maps already pinned keep the room they
  // were made with (their charges are reused as they are).
  Sizing sizing = sizeMaps(std::nullopt, 0, 0);
};

// Loads, attaches and pins (replacing the links an earlier daemon pinned;
// the maps it pinned are reused, their charges kept). The error says what
// the kernel or libbpf refused.
Result<std::unique_ptr<KernelCharge>> loadKernelCharge(const LoadOptions& o);

// The maps of programs another process loaded and pinned under `pinDir` (the
// unit's privileged ExecStartPre, `tally daemon load-kernel-charge`): a
// hardened daemon uses them with CAP_BPF alone.
Result<std::unique_ptr<KernelCharge>> openPinnedKernelCharge(const std::string& pinDir);

// What the daemon does at start: judge the host, load what it allows (or use
// what was loaded for it), and say what came of it (the verdict's why when
// something is off).
struct Started {
  std::unique_ptr<KernelCharge> charge;  // null: off
  Verdict verdict;
};
// `loadOnly`: load and pin, never fall back to pins (the ExecStartPre).
Started startKernelCharge(const fs::Root& sys, LoadOptions o, bool loadOnly = false);

}  // namespace tally::bpf
