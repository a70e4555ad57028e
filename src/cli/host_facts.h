#pragma once

#include <unistd.h>

#include "fs/root.h"
#include "report/gpu_report.h"

namespace tally::cli {

// MemAvailable and the GTT ceiling, read from the roots.
report::HostFacts readHostFacts(const fs::Root& proc, const fs::Root& sys);

}  // namespace tally::cli
