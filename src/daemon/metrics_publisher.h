// Where the daemon's metrics go besides `tally metrics`: a node_exporter
// textfile, replaced atomically after every sample round, and GET /metrics
// on a loopback address, served by cpp-httplib on its own threads from the
// last published snapshot (the event loop never waits on an HTTP client, and
// no HTTP thread touches the service).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "util/result.h"

namespace httplib {
class Server;
}

namespace tally::daemon {

// Writes `text` to PATH.tmp, fsyncs it, renames it over PATH (mode 0644):
// a reader (node_exporter) sees the old file or the new one, never half.
Status writeTextfileAtomically(const std::string& path, const std::string& text);

struct ListenAddress {
  std::string host;  // "127.0.0.1", "::1"
  std::uint16_t port = 0;
};

// "127.0.0.1:9464", "[::1]:9464", "localhost:9464". Only loopback: the
// metrics name every lease and workload on the box, and tally has no
// authentication to put in front of them.
Result<ListenAddress> parseListenAddress(std::string_view text);

class MetricsHttp {
 public:
  // Binds (errors name the address and the fix) and starts serving.
  static Result<std::unique_ptr<MetricsHttp>> start(const ListenAddress& at);
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;
  void publish(std::string text);
  std::uint16_t port() const { return port_; }

 private:
  MetricsHttp();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::uint16_t port_ = 0;
  std::mutex mu_;
  std::string text_;
};

}  // namespace tally::daemon
