// What libbpf said: its warnings (the verifier's log among them) are kept
// while the kernel charge loads, so an error can say why the kernel or
// libbpf refused instead of only an errno.
#pragma once

#include <string>

#include "util/result.h"

namespace tally::bpf {

// From now on this thread keeps libbpf's warnings (the last 2 KiB), starting
// from none.
void keepLibbpfWarnings();

// `what` and strerror(err), with libbpf's words on the failure when it said
// any: its first line that names what failed (a map, a program, an attach)
// and its last.
Error bpfError(int err, std::string what);

}  // namespace tally::bpf
