// Reads whose cost grows with the box (listings, metrics) or with a lease's
// history (its rows and chart), per user: a count (a burst, then a steady
// rate) and the daemon's loop time they took (a burst, then a steady share
// of each second). The count alone does not see a query's cost: two users at
// 20 charts a second of a month-long lease asked for most of the loop. A
// request is refused while either is spent, for the cost of a reply; the
// time is charged after the request ran (a debt the refill pays off). Root
// is not counted. Passive: the caller passes the monotonic time and the
// time a request took.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace tally::daemon {

class QueryBudget {
 public:
  enum class Refusal { None, Count, Time };
  // `perSecond` 0: no count budget; `timeUsPerSecond` 0: no time budget.
  // Each may burst to twice its rate.
  explicit QueryBudget(std::uint64_t perSecond = 20, std::uint64_t timeUsPerSecond = 100'000)
      : perSecond_(perSecond), timeUsPerSecond_(timeUsPerSecond) {}

  // Whether `uid` may ask now; takes one from her count when she may.
  Refusal take(uid_t uid, std::uint64_t nowUs) {
    if (uid == 0 || (perSecond_ == 0 && timeUsPerSecond_ == 0)) return Refusal::None;
    if (accounts_.size() > 1024) prune(nowUs);
    auto [it, fresh] = accounts_.try_emplace(uid, Account{burstCount(), burstTime(), nowUs});
    Account& a = it->second;
    refill(a, nowUs);
    if (timeUsPerSecond_ && a.timeUs <= 0) return Refusal::Time;
    if (perSecond_ && a.count < 1.0) return Refusal::Count;
    a.count -= 1.0;
    return Refusal::None;
  }
  // The loop time `uid`'s request took, charged after it ran.
  void charge(uid_t uid, std::uint64_t tookUs, std::uint64_t nowUs) {
    if (uid == 0 || timeUsPerSecond_ == 0) return;
    auto it = accounts_.find(uid);
    if (it == accounts_.end()) return;
    refill(it->second, nowUs);
    it->second.timeUs -= static_cast<double>(tookUs);
  }
  // How long until `uid` may ask again after a time refusal (µs).
  std::uint64_t timeWaitUs(uid_t uid) const {
    auto it = accounts_.find(uid);
    if (it == accounts_.end() || it->second.timeUs > 0 || timeUsPerSecond_ == 0) return 0;
    return static_cast<std::uint64_t>(-it->second.timeUs * 1'000'000.0 /
                                      static_cast<double>(timeUsPerSecond_)) +
           1;
  }
  std::uint64_t perSecond() const { return perSecond_; }
  std::uint64_t timeUsPerSecond() const { return timeUsPerSecond_; }
  std::size_t accounts() const { return accounts_.size(); }

 private:
  struct Account {
    double count = 0;
    double timeUs = 0;  // may go below 0: a request's cost is known after it ran
    std::uint64_t atUs = 0;
  };
  double burstCount() const { return 2.0 * static_cast<double>(perSecond_); }
  double burstTime() const { return 2.0 * static_cast<double>(timeUsPerSecond_); }
  void refill(Account& a, std::uint64_t nowUs) const {
    if (nowUs <= a.atUs) return;
    const double s = static_cast<double>(nowUs - a.atUs) / 1'000'000.0;
    a.count = std::min(burstCount(), a.count + s * static_cast<double>(perSecond_));
    a.timeUs = std::min(burstTime(), a.timeUs + s * static_cast<double>(timeUsPerSecond_));
    a.atUs = nowUs;
  }
  // Full accounts are forgotten: the map holds only users who asked lately.
  void prune(std::uint64_t nowUs) {
    for (auto it = accounts_.begin(); it != accounts_.end();) {
      refill(it->second, nowUs);
      const bool full = it->second.count >= burstCount() && it->second.timeUs >= burstTime();
      it = full ? accounts_.erase(it) : ++it;
    }
  }
  std::uint64_t perSecond_, timeUsPerSecond_;
  std::unordered_map<uid_t, Account> accounts_;
};

}  // namespace tally::daemon
