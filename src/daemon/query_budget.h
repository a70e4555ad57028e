// Reads whose cost grows with the box (listings, metrics) or with a lease's
// history (its rows and chart), per user: a burst, then a steady rate.
// 1,024 pipelined `lease` requests for a lease with a month of samples once
// held the loop 20 s; past the budget a request is answered "rate-limited"
// at once, for the cost of a reply. Root is not counted. Passive: the caller
// passes the monotonic time.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace tally::daemon {

class QueryBudget {
 public:
  // `perSecond` 0: no budget.
  explicit QueryBudget(std::uint64_t perSecond = 20, std::uint64_t burst = 40)
      : perSecond_(perSecond), burst_(std::max(burst, perSecond)) {}

  bool take(uid_t uid, std::uint64_t nowUs) {
    if (uid == 0 || perSecond_ == 0) return true;
    if (accounts_.size() > 1024) prune(nowUs);
    auto [it, fresh] = accounts_.try_emplace(uid, Account{static_cast<double>(burst_), nowUs});
    Account& a = it->second;
    refill(a, nowUs);
    if (a.tokens < 1.0) return false;
    a.tokens -= 1.0;
    return true;
  }
  std::uint64_t perSecond() const { return perSecond_; }
  std::size_t accounts() const { return accounts_.size(); }

 private:
  struct Account {
    double tokens = 0;
    std::uint64_t atUs = 0;
  };
  void refill(Account& a, std::uint64_t nowUs) const {
    if (nowUs <= a.atUs) return;
    a.tokens = std::min(static_cast<double>(burst_),
                        a.tokens + static_cast<double>(nowUs - a.atUs) *
                                       static_cast<double>(perSecond_) / 1'000'000.0);
    a.atUs = nowUs;
  }
  // Full accounts are forgotten: the map holds only users who asked lately.
  void prune(std::uint64_t nowUs) {
    for (auto it = accounts_.begin(); it != accounts_.end();) {
      refill(it->second, nowUs);
      it = it->second.tokens >= static_cast<double>(burst_) ? accounts_.erase(it) : ++it;
    }
  }
  std::uint64_t perSecond_, burst_;
  std::unordered_map<uid_t, Account> accounts_;
};

}  // namespace tally::daemon
