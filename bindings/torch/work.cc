#include "work.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

namespace loom_torch {

std::exception_ptr loomError(const std::string& what) {
  try {
    C10_THROW_ERROR(DistBackendError, "loom: " + what);
  } catch (...) {
    return std::current_exception();
  }
}

LoomWork::LoomWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

int LoomWork::sourceRank() const {
  TORCH_CHECK(source_ != nullptr, "loom: source_rank() is known only for a receive from any source");
  TORCH_CHECK(*source_ >= 0, "loom: source_rank() is known once the receive has completed (wait() first)");
  return *source_;
}

void LoomWork::complete(std::exception_ptr error) {
  finish(error);
  if (error) future_->setError(error);
  else future_->markCompleted(c10::IValue(outputs_));
}

Completer::Completer() : thread_([this] { loop(); }) {}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> g(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  releaseFinished();
}

void Completer::releaseFinished() {
  std::vector<PendingCall> done;
  {
    std::lock_guard<std::mutex> g(mutex_);
    done.swap(finished_);
  }
  // `done` goes out of scope here, on the caller's thread.
}

void Completer::add(PendingCall call) {
  {
    std::lock_guard<std::mutex> g(mutex_);
    queue_.push_back(std::move(call));
  }
  cv_.notify_one();
}

void Completer::finish(PendingCall& call, loomResult_t result, const std::string& message) {
  std::exception_ptr error;
  if (result != loomSuccess) error = loomError(message);
  for (PendingCall& m : call.members) finish(m, result, message);  // they ran as part of this call
  if (!error && call.afterwards) {
    try {
      call.afterwards();
    } catch (...) {
      error = std::current_exception();
    }
  }
  call.keepAlive.clear();
  call.work->complete(error);
}

void Completer::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    PendingCall call = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    loomResult_t r = loomStreamSynchronize(call.stream);  // each call is bounded by the comm's timeout
    std::string message = r == loomSuccess ? std::string() : std::string(loomGetLastError(nullptr));
    loomStreamDestroy(call.stream);
    finish(call, r, message);
    lock.lock();
    finished_.push_back(std::move(call));  // released by a Python thread (see finished_)
  }
}

}  // namespace loom_torch
