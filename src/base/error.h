// Errors: every internal function returns loomResult_t; the place that detects a failure calls
// setError(), which records a one-line reason for loomGetLastError() and logs it at WARN.
#pragma once

#include <chrono>
#include <string>

#include "loom.h"

namespace loom {

loomResult_t setError(loomResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// The last message recorded by this thread, and the same without the result code's name in front.
const char* lastError();
const char* lastErrorDetail();
void clearLastError();
// Puts back a message saved from lastError() (after a best-effort step that may have set its own).
void restoreLastError(const std::string& saved);
// The rank whose loss or silence caused this thread's last error, or -1 (set by the waits and the
// network queues; cleared by every setError).
int lastErrorPeer();
void setLastErrorPeer(int rank);

// While one lives, this thread's setError() records without logging: for best-effort steps on an error
// path (failure notices to peers that may be gone), whose own failures are expected and not news.
class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;
};

// A point in time after which a wait gives up with loomTimeout.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  static Deadline afterSeconds(double s) {
    Deadline d;
    d.at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    return d;
  }
  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, clamped to [0, cap].
  int remainingMs(int cap) const {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (ms < 0) return 0;
    return ms > cap ? cap : static_cast<int>(ms);
  }

 private:
  Clock::time_point at_{};
};

}  // namespace loom

// Propagates a failure (whose message was already set) to the caller.
#define LOOM_CHECK(expr)                       \
  do {                                         \
    loomResult_t loom_r_ = (expr);             \
    if (loom_r_ != loomSuccess) return loom_r_; \
  } while (0)
