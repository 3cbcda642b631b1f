// Asynchronous host streams.  A stream is an ordering and completion record, not a thread: each
// operation issued on it is handed to its communicator's progress engine (runtime/progress.h), which runs
// that communicator's operations one at a time in the order they were issued; an operation also waits
// for the stream's previous operation (which may belong to another communicator).  Both orders follow
// the order in which this process issued the calls, so together they can never wait in a circle.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom.h"

namespace loom {

// One operation handed to a progress engine: what to run, what it waits for, and how it ended.
class AsyncOp {
 public:
  AsyncOp(std::function<loomResult_t()> run, std::vector<std::shared_ptr<AsyncOp>> after)
      : run_(std::move(run)), after_(std::move(after)) {}
  // On the progress thread: waits for the stream's earlier operations, runs, records the outcome.
  void execute();
  // Ends it without running (its communicator was aborted or destroyed first) with code and reason.
  void cancel(loomResult_t code, const std::string& reason);
  bool done() const;
  // Blocks (no spinning) until it ended; returns its result and sets this thread's last error to its message.
  loomResult_t wait() const;

 private:
  void finish(loomResult_t code, std::string message);

  std::function<loomResult_t()> run_;
  std::vector<std::shared_ptr<AsyncOp>> after_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  loomResult_t result_ = loomSuccess;
  std::string message_;
};

class Stream {
 public:
  // What an operation issued now must wait for (the stream's last operation, or the last group's).
  std::vector<std::shared_ptr<AsyncOp>> tail();
  // Records operations issued together (one group's, one per communicator) as the stream's newest.
  void append(const std::vector<std::shared_ptr<AsyncOp>>& ops);
  // Waits for everything issued so far; returns the first failure since the last synchronize (and
  // forgets it, so that the stream can be used again), else loomSuccess.
  loomResult_t synchronize();
  // loomInProgress while something is unfinished, else what synchronize() would return (not forgotten).
  loomResult_t query();

 private:
  void collectFinished();  // with mutex_ held: moves finished operations' failures into error_

  std::mutex mutex_;
  std::deque<std::shared_ptr<AsyncOp>> pending_;
  std::vector<std::shared_ptr<AsyncOp>> tail_;
  loomResult_t error_ = loomSuccess;
  std::string errorMessage_;
};

// Live streams, so that a handle that is not one (freed, or never made) is an error, not a crash.
Stream* streamCreate();
// nullptr when `handle` is not a live stream.
Stream* findStream(loomStream_t handle);
// Unregisters, waits for its operations, frees; false when `handle` is not a live stream.
bool streamDestroy(loomStream_t handle);

}  // namespace loom
