// Ledger rows and bytes per user: one user's acquire/release loop must not
// grow the ledger without limit for everyone. Every row a user's lease
// writes is charged to its owner, as one row and its body's bytes (root is
// not counted); each budget refills at its rate a minute up to that rate.
// Rows are never refused once a lease exists (a start, a release, an outcome
// are facts and are kept); only a new lease waits while either of its
// owner's balances is spent, so what a user causes per minute stays near the
// budgets plus what her live leases still write. Passive: the caller passes
// the monotonic time.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>

namespace tally::daemon {

class RowBudget {
 public:
  explicit RowBudget(std::uint64_t rowsPerMinute = 600, std::uint64_t bytesPerMinute = 4u << 20)
      : rows_(rowsPerMinute), bytes_(bytesPerMinute) {}

  // One row of `bytes` written by `uid`'s lease.
  void charge(uid_t uid, std::uint64_t nowUs, std::uint64_t bytes) {
    if (uid == 0) return;
    rows_.charge(uid, nowUs, 1);
    bytes_.charge(uid, nowUs, bytes);
  }
  // Which budget keeps `uid` from starting a new lease, and for how long (µs);
  // nullopt: she may now.
  struct Wait {
    std::uint64_t us = 0;
    bool bytes = false;  // the bytes budget (else the rows one)
  };
  std::optional<Wait> wait(uid_t uid, std::uint64_t nowUs) {
    if (uid == 0) return std::nullopt;
    auto r = rows_.waitUs(uid, nowUs);
    auto b = bytes_.waitUs(uid, nowUs);
    if (!r && !b) return std::nullopt;
    if (b && (!r || *b > *r)) return Wait{*b, true};
    return Wait{*r, false};
  }
  std::uint64_t rowsPerMinute() const { return rows_.perMinute(); }
  std::uint64_t bytesPerMinute() const { return bytes_.perMinute(); }
  std::size_t accounts() const { return std::max(rows_.accounts(), bytes_.accounts()); }
  void prune(std::uint64_t nowUs) {
    rows_.prune(nowUs);
    bytes_.prune(nowUs);
  }

 private:
  // One balance per user, refilled at `perMinute` a minute up to `perMinute`.
  class PerMinute {
   public:
    explicit PerMinute(std::uint64_t perMinute) : perMinute_(perMinute) {}
    void charge(uid_t uid, std::uint64_t nowUs, std::uint64_t amount) {
      if (perMinute_ == 0) return;
      if (accounts_.size() > 256) prune(nowUs);
      refilled(uid, nowUs).balance -= static_cast<double>(amount);
    }
    // A spent balance waits until it is positive again.
    std::optional<std::uint64_t> waitUs(uid_t uid, std::uint64_t nowUs) {
      if (perMinute_ == 0) return std::nullopt;
      Account& a = refilled(uid, nowUs);
      if (a.balance >= 1.0) return std::nullopt;
      return static_cast<std::uint64_t>((1.0 - a.balance) * kMinuteUs /
                                        static_cast<double>(perMinute_)) +
             1;
    }
    std::uint64_t perMinute() const { return perMinute_; }
    std::size_t accounts() const { return accounts_.size(); }
    // Accounts back at their full balance are forgotten: the map holds only
    // users who wrote in the last minute.
    void prune(std::uint64_t nowUs) {
      for (auto it = accounts_.begin(); it != accounts_.end();) {
        refill(it->second, nowUs);
        it = it->second.balance >= static_cast<double>(perMinute_) ? accounts_.erase(it) : ++it;
      }
    }

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
  PerMinute rows_, bytes_;
};

}  // namespace tally::daemon
