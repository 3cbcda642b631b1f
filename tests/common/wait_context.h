// A WaitContext for the transport tests that drive queues directly, without a communicator.
#pragma once

#include <atomic>

#include "base/wait.h"

namespace loom::testing {

// Gives up after `seconds`, or as soon as *abort (if given) is set.
inline WaitContext waitUpTo(double seconds, const std::atomic<bool>* abort = nullptr) {
  WaitContext c;
  c.timeoutSec = seconds;
  c.abort = abort;
  return c;
}

}  // namespace loom::testing
