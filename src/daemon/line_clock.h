// request_timeout's clock for one connection: how long an unfinished request
// line has waited on its client. It runs only while the daemon reads from
// the connection; while the daemon itself holds off (lines of the client's
// still to handle, or replies the client has not taken past the pause), the
// wait is the daemon's, and the clock starts again when reading resumes.
// (Once it ran on, and a client the daemon had stopped reading was closed
// for a line the daemon never let it finish.) Passive; the caller passes
// monotonic µs.
#pragma once

#include <cstdint>

namespace tally::daemon {

class LineClock {
 public:
  // After bytes arrived: whether an unfinished line is left.
  void received(bool partialLeft, std::uint64_t nowUs) {
    if (!partialLeft)
      sinceUs_ = 0;
    else if (!sinceUs_)
      sinceUs_ = nowUs;
  }
  // Whether the daemon reads from the connection now.
  void reading(bool yes, std::uint64_t nowUs) {
    if (yes && !reading_ && sinceUs_) sinceUs_ = nowUs;
    reading_ = yes;
  }
  bool expired(std::uint64_t nowUs, std::uint64_t timeoutUs) const {
    return reading_ && sinceUs_ && nowUs - sinceUs_ > timeoutUs;
  }

 private:
  std::uint64_t sinceUs_ = 0;  // when the wait on the client began (0: no unfinished line)
  bool reading_ = true;
};

}  // namespace tally::daemon
