#include "daemon/metrics_publisher.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <httplib.h>

#include "util/unique_fd.h"

namespace tally::daemon {

Status writeTextfileAtomically(const std::string& path, const std::string& text) {
  // node_exporter reads only *.prom: the temporary name is never collected.
  std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return errnoError(errno, fmt::format("cannot write the metrics textfile {}", tmp));
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      return errnoError(e, fmt::format("cannot write the metrics textfile {}", tmp));
    }
    off += static_cast<std::size_t>(n);
  }
  // A crash after the rename must not leave an empty file under the real name.
  if (::fsync(fd.get()) != 0 || ::fchmod(fd.get(), 0644) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return errnoError(e, fmt::format("cannot sync the metrics textfile {}", tmp));
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return errnoError(e, fmt::format("cannot replace the metrics textfile {}", path));
  }
  return Ok{};
}

Result<ListenAddress> parseListenAddress(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Error{0, fmt::format("--metrics-listen '{}': {} (e.g. 127.0.0.1:9464 or [::1]:9464)", text.substr(0, 80), why)};
  };
  std::string host;
  std::string_view portText;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find("]:");
    if (close == std::string_view::npos) return bad("an IPv6 address goes in brackets, then ':PORT'");
    host = std::string(text.substr(1, close - 1));
    portText = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("needs HOST:PORT");
    host = std::string(text.substr(0, colon));
    portText = text.substr(colon + 1);
  }
  unsigned long port = 0;
  if (portText.empty() || portText.size() > 5 || portText.find_first_not_of("0123456789") != std::string_view::npos ||
      (port = std::stoul(std::string(portText))) > 65535) {
    return bad("the port must be 0..65535");
  }
  if (host == "localhost") host = "127.0.0.1";
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    if ((ntohl(v4.s_addr) >> 24) != 127) {
      return bad("tally serves metrics on loopback only (they name every lease and workload, with no authentication); "
                 "use 127.0.0.1 and a reverse proxy, or --metrics-textfile with node_exporter");
    }
  } else if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (!IN6_IS_ADDR_LOOPBACK(&v6)) return bad("tally serves metrics on loopback only; use [::1]");
  } else {
    return bad("the host must be a loopback IP address (127.0.0.1, ::1) or localhost");
  }
  return ListenAddress{host, static_cast<std::uint16_t>(port)};
}

MetricsHttp::MetricsHttp() : server_(std::make_unique<httplib::Server>()) {}

MetricsHttp::~MetricsHttp() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

Result<std::unique_ptr<MetricsHttp>> MetricsHttp::start(const ListenAddress& at) {
  std::unique_ptr<MetricsHttp> m(new MetricsHttp());
  MetricsHttp* self = m.get();
  m->server_->set_read_timeout(5, 0);
  m->server_->set_write_timeout(5, 0);
  m->server_->set_keep_alive_max_count(10);
  m->server_->Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    std::string body;
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      body = self->text_;
    }
    if (body.empty()) {
      res.status = 503;
      res.set_content("tally: no sample round has finished yet; retry in a second\n", "text/plain");
      return;
    }
    res.set_content(body, "text/plain; version=0.0.4; charset=utf-8");
  });
  m->server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("tally daemon: metrics at /metrics\n", "text/plain");
  });
  int port = at.port == 0 ? m->server_->bind_to_any_port(at.host) : (m->server_->bind_to_port(at.host, at.port) ? at.port : -1);
  if (port <= 0) {
    return Error{0, fmt::format("cannot listen for metrics on {}:{} (in use, or not an address of this host); "
                                "pick another port with --metrics-listen",
                                at.host, at.port)};
  }
  m->port_ = static_cast<std::uint16_t>(port);
  m->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  return m;
}

void MetricsHttp::publish(std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  text_ = std::move(text);
}

}  // namespace tally::daemon
