// The kernel's answer to one inet_diag query (NETLINK_SOCK_DIAG), decoded:
// the uid that owns the socket it names, or the kernel's error. Pure, and
// fuzzed with the other decoders (fuzz/daemon_fuzz.cpp).
#pragma once

#include <sys/types.h>

#include <string_view>

#include "util/result.h"

namespace tally::metrics {

Result<uid_t> decodeSockDiagUid(std::string_view reply);

}  // namespace tally::metrics
