// What the daemon benchmarks share: a client to a daemon they just started.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "rpc/client.h"

namespace tally::bench {

// Connects once the daemon's socket answers (10 s at most), else exits.
inline rpc::Client connectRetry(const std::string& sock) {
  for (int i = 0; i < 200; ++i) {
    if (auto c = rpc::Client::connect(sock)) return std::move(*c);
    ::usleep(50'000);
  }
  std::fprintf(stderr, "daemon did not come up\n");
  std::exit(1);
}

}  // namespace tally::bench
