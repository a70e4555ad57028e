#include "config/listen_address.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>

#include "util/text.h"

namespace tally::config {

bool isLoopback(const ListenAddress& at) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, at.host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, at.host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

Result<ListenAddress> parseListenAddress(std::string_view text, bool beyondLoopback) {
  auto bad = [&](const std::string& why) {
    return Error{0, fmt::format("'{}': {} (e.g. 127.0.0.1:9464 or [::1]:9464)",
                                text::truncateUtf8(text, 80), why)};
  };
  std::string host;
  std::string_view portText;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find("]:");
    if (close == std::string_view::npos)
      return bad("an IPv6 address goes in brackets, then ':PORT'");
    host = std::string(text.substr(1, close - 1));
    portText = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("needs HOST:PORT");
    host = std::string(text.substr(0, colon));
    portText = text.substr(colon + 1);
  }
  unsigned long port = 0;
  if (portText.empty() || portText.size() > 5 ||
      portText.find_first_not_of("0123456789") != std::string_view::npos ||
      (port = std::stoul(std::string(portText))) > 65535) {
    return bad("the port must be 0..65535");
  }
  if (host == "localhost") host = "127.0.0.1";
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) != 1 && inet_pton(AF_INET6, host.c_str(), &v6) != 1) {
    return bad(beyondLoopback ? "the host must be an IP address or localhost (no names: no DNS "
                                "at start)"
                              : "the host must be a loopback IP address (127.0.0.1, ::1) or "
                                "localhost");
  }
  ListenAddress at{host, static_cast<std::uint16_t>(port)};
  if (!beyondLoopback && !isLoopback(at)) {
    return bad(
        "tally serves metrics on loopback unless daemon.metrics_beyond_loopback = true (they "
        "name every lease and workload, with no authentication); use 127.0.0.1 with a reverse "
        "proxy or metrics_textfile with node_exporter, or set it and firewall the port to your "
        "Prometheus");
  }
  return at;
}

}  // namespace tally::config
