// The kernel's inet_diag answer, decoded: the peer socket's owner, the
// kernel's own error, and hostile bytes (cut short at every byte, lengths
// that lie) as errors, never a uid made up.
#include "metrics/sock_diag.h"

#include <gtest/gtest.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tally::metrics {
namespace {

template <typename Payload>
std::string message(std::uint16_t type, const Payload& payload) {
  nlmsghdr h{};
  h.nlmsg_len = static_cast<std::uint32_t>(sizeof h + sizeof payload);
  h.nlmsg_type = type;
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out.append(reinterpret_cast<const char*>(&payload), sizeof payload);
  return out;
}

TEST(SockDiag, TheSocketsOwnerIsTheUidTheKernelNames) {
  inet_diag_msg m{};
  m.idiag_family = AF_INET;
  m.idiag_uid = 65534;
  auto uid = decodeSockDiagUid(message(SOCK_DIAG_BY_FAMILY, m));
  ASSERT_TRUE(uid) << uid.error().message;
  EXPECT_EQ(*uid, 65534u);
  m.idiag_uid = 0;
  EXPECT_EQ(*decodeSockDiagUid(message(SOCK_DIAG_BY_FAMILY, m)), 0u);
}

TEST(SockDiag, TheKernelsErrorIsAnErrorNamingIt) {
  nlmsgerr e{};
  e.error = -ENOENT;
  auto uid = decodeSockDiagUid(message(NLMSG_ERROR, e));
  ASSERT_FALSE(uid);
  EXPECT_EQ(uid.error().code, ENOENT);
  EXPECT_NE(uid.error().message.find("does not know the metrics peer's socket"), std::string::npos);
  EXPECT_EQ(decodeSockDiagUid("").error().code, ENOENT);
  nlmsghdr done{};
  done.nlmsg_len = sizeof done;
  done.nlmsg_type = NLMSG_DONE;
  EXPECT_EQ(decodeSockDiagUid(std::string(reinterpret_cast<const char*>(&done), sizeof done))
                .error()
                .code,
            ENOENT);
}

TEST(SockDiag, HostileBytesAreErrorsNeverAUid) {
  inet_diag_msg m{};
  m.idiag_uid = 1000;
  std::string whole = message(SOCK_DIAG_BY_FAMILY, m);
  for (std::size_t cut = 0; cut < whole.size(); ++cut)
    EXPECT_FALSE(decodeSockDiagUid(whole.substr(0, cut))) << cut;
  // A header whose length claims more than there is, or less than itself.
  std::string lying = whole;
  std::uint32_t len = 1u << 30;
  std::memcpy(lying.data(), &len, sizeof len);
  EXPECT_EQ(decodeSockDiagUid(lying).error().code, EPROTO);
  len = 3;
  std::memcpy(lying.data(), &len, sizeof len);
  EXPECT_EQ(decodeSockDiagUid(lying).error().code, EPROTO);
  // Another message type first is skipped, aligned.
  nlmsghdr other{};
  other.nlmsg_len = sizeof other + 3;
  other.nlmsg_type = 0x42;
  std::string two(reinterpret_cast<const char*>(&other), sizeof other);
  two.append(4, '\0');  // 3 bytes of payload, padded to 4
  two += whole;
  EXPECT_EQ(*decodeSockDiagUid(two), 1000u);
}

}  // namespace
}  // namespace tally::metrics
