// Ledger rows per user: one user's acquire/release loop must not grow the
// ledger without limit for everyone. Every row a user's lease writes is
// charged to its owner (root is not counted); the budget refills at
// `perMinute` rows a minute up to `perMinute`. Rows are never refused once a
// lease exists (a start, a release, an outcome are facts and are kept);
// only a new lease waits while its owner's balance is spent, so the rows a
// user causes per minute stay near `perMinute` plus what her live leases
// still write. Passive: the caller passes the monotonic time.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>

namespace tally::daemon {

class RowBudget {
 public:
  explicit RowBudget(std::uint64_t perMinute = 600) : perMinute_(perMinute) {}

  void charge(uid_t uid, std::uint64_t nowUs, unsigned rows = 1) {
    if (uid == 0 || perMinute_ == 0) return;
    if (accounts_.size() > 256) prune(nowUs);
    Account& a = refilled(uid, nowUs);
    a.balance -= static_cast<double>(rows);
  }
  // How long (µs) until `uid` may start a new lease; nullopt: now. A spent
  // balance waits until it is positive again.
  std::optional<std::uint64_t> waitUs(uid_t uid, std::uint64_t nowUs) {
    if (uid == 0 || perMinute_ == 0) return std::nullopt;
    Account& a = refilled(uid, nowUs);
    if (a.balance >= 1.0) return std::nullopt;
    return static_cast<std::uint64_t>((1.0 - a.balance) * kMinuteUs /
                                      static_cast<double>(perMinute_)) +
           1;
  }
  std::uint64_t perMinute() const { return perMinute_; }
  // Accounts back at their full balance are forgotten: the map holds only
  // users who wrote in the last minute.
  void prune(std::uint64_t nowUs) {
    for (auto it = accounts_.begin(); it != accounts_.end();) {
      refill(it->second, nowUs);
      it = it->second.balance >= static_cast<double>(perMinute_) ? accounts_.erase(it) : ++it;
    }
  }
  std::size_t accounts() const { return accounts_.size(); }

 private:
  static constexpr double kMinuteUs = 60'000'000.0;
  struct Account {
    double balance = 0;
    std::uint64_t atUs = 0;
  };
  void refill(Account& a, std::uint64_t nowUs) const {
    if (nowUs > a.atUs) {
      a.balance = std::min(static_cast<double>(perMinute_),
                           a.balance + static_cast<double>(nowUs - a.atUs) *
                                           static_cast<double>(perMinute_) / kMinuteUs);
      a.atUs = nowUs;
    }
  }
  Account& refilled(uid_t uid, std::uint64_t nowUs) {
    auto [it, fresh] = accounts_.try_emplace(uid);
    if (fresh) it->second = {static_cast<double>(perMinute_), nowUs};
    refill(it->second, nowUs);
    return it->second;
  }

  std::uint64_t perMinute_;
  std::unordered_map<uid_t, Account> accounts_;
};

}  // namespace tally::daemon
