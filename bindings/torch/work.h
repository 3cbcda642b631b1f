// What the loom backend returns for each call: a c10d::Work whose wait(), isCompleted() and future are
// real, and the thread that completes them in the order the calls were issued.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loom.h"

namespace loom_torch {

// A loom failure as the exception torch shows in Python (torch.distributed.DistBackendError).
std::exception_ptr loomError(const std::string& what);

class LoomWork : public c10d::Work {
 public:
  LoomWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // A receive from any source: where loom writes the sender's rank, read by sourceRank() once complete.
  void setSource(std::shared_ptr<int> source) { source_ = std::move(source); }
  int sourceRank() const override;
  // Once, when the call ended: wakes wait(), then completes the future (running its callbacks here).
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<int> source_;
};

// A call issued on its own loom stream, to be completed when the stream has finished it.
struct PendingCall {
  c10::intrusive_ptr<LoomWork> work;
  loomStream_t stream = nullptr;
  std::function<void()> afterwards;  // copies out of staging buffers; runs only on success
  std::vector<at::Tensor> keepAlive;  // every buffer loom reads or writes until the stream is done
  std::vector<PendingCall> members;   // coalesced calls: each finishes (afterwards, Work) with this one
};

// Runs the tail of each call: waits for its stream (asleep, not spinning), copies results out, and
// completes its Work.  Calls of one communicator finish in issue order, so one thread in that order
// never waits behind a call that could finish later.
class Completer {
 public:
  Completer();
  ~Completer();  // finishes what is queued, then stops
  void add(PendingCall call);
  // Releases the calls this thread finished (their Works and tensors) on the calling thread, which
  // holds the GIL: launch() calls it, and the destructor.
  void releaseFinished();
  // Ends a call now (one that ran on the caller's thread, or failed to issue).
  static void finish(PendingCall& call, loomResult_t result, const std::string& message);

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<PendingCall> queue_;
  // Calls this thread finished, kept until a Python thread releases them: the last reference to a
  // Work or a tensor may drop a Python object, which needs the GIL, and a thread that takes the GIL
  // while the interpreter shuts down is ended by Python (pthread_exit through C++ frames: terminate).
  // A script that returns right after its last collective did exactly that, one run in four.
  std::vector<PendingCall> finished_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace loom_torch
