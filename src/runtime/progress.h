// A communicator's progress engine: one thread, started at the first asynchronous call, that runs the
// communicator's stream operations one at a time in issue order while the caller goes on.  It sleeps on
// a condition variable when there is nothing to do (ranks outnumber cores here; nothing spins).  Calls
// on the NULL stream run on the caller's thread after the engine has finished what was issued before
// them (drain()), so one communicator is never driven by two threads at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/stream.h"

namespace loom {

class ProgressEngine {
 public:
  explicit ProgressEngine(int rank) : rank_(rank) {}
  ~ProgressEngine();  // cancels what has not started and joins the thread (see shutdown)
  void enqueue(std::shared_ptr<AsyncOp> op);
  // Waits until everything enqueued so far has finished (each operation is bounded by the timeout).
  void drain();
  // Ends operations that have not started with (code, reason), then waits for the running one (which
  // sees the communicator's abort flag) and stops the thread.  Later enqueues are cancelled at once.
  void shutdown(loomResult_t code, const std::string& reason);
  bool busy();

 private:
  void loop();

  const int rank_;  // for log lines written on the engine's thread
  std::mutex mutex_;
  std::condition_variable wake_;  // work arrived, or stop
  std::condition_variable idle_;  // queue empty and nothing running
  std::deque<std::shared_ptr<AsyncOp>> queue_;
  bool running_ = false;
  std::atomic<int> unfinished_{0};  // queued or running ops: drain()'s check without the lock
  bool stopped_ = false;
  loomResult_t stopCode_ = loomSuccess;
  std::string stopReason_;
  std::thread thread_;
};

}  // namespace loom
