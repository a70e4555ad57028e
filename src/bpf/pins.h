// The kernel charge's pins under its bpffs directory: the maps an older
// tally pinned, the room a pinned map was made with, a link pinned in place
// of an earlier daemon's, and the programs the pinned links run.
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace tally::bpf {

// Maps an older tally pinned with another layout cannot be reused: libbpf
// would refuse the load and leave the old programs running. They go, with
// their pins; the charges start from zero (objects made before are seen by
// fdinfo until freed). Returns what it removed, for the journal.
std::vector<std::string> unpinOlderLayout(const std::string& pinDir);

// The room a pinned map was made with (0: none pinned).
std::uint32_t pinnedMaxEntries(const std::string& pinDir, const char* name);

// Pins `link` at `path`, replacing what an earlier daemon pinned there. The
// caller made the new programs the active ones first, so both being
// attached for a moment is harmless (only the active generation acts).
Status pinReplacing(bpf_link* link, const std::string& path);

// The id of the program a pinned link runs.
std::optional<std::uint32_t> linkedProgram(const std::string& pin);

// The tracing programs' link pins (their runs can be skipped: recursion misses).
inline constexpr const char* kTracingLinks[] = {"link_charge",         "link_uncharge",
                                                "link_ioctl_done",     "link_ioctl_done_compat",
                                                "link_ioctl_done_x32", "link_moved_in"};

}  // namespace tally::bpf
