#include "runtime/stream.h"

#include <set>

#include "base/error.h"

namespace loom {

void AsyncOp::execute() {
  // Failures of earlier operations do not stop this one: they belong to other calls (a failed
  // communicator refuses its own later calls by itself).
  for (const auto& op : after_) op->wait();
  after_.clear();  // no chains of finished operations kept alive through this one
  clearLastError();
  loomResult_t r = run_();
  finish(r, r == loomSuccess ? std::string() : std::string(lastError()));
  run_ = nullptr;  // releases what the call captured (scratch copies of its arguments)
}

void AsyncOp::cancel(loomResult_t code, const std::string& reason) {
  after_.clear();
  run_ = nullptr;
  finish(code, std::string(loomGetErrorString(code)) + ": " + reason);
}

void AsyncOp::finish(loomResult_t code, std::string message) {
  std::lock_guard<std::mutex> g(mutex_);
  result_ = code;
  message_ = std::move(message);
  done_ = true;
  cv_.notify_all();
}

bool AsyncOp::done() const {
  std::lock_guard<std::mutex> g(mutex_);
  return done_;
}

loomResult_t AsyncOp::wait() const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  if (result_ != loomSuccess) restoreLastError(message_);
  return result_;
}

std::vector<std::shared_ptr<AsyncOp>> Stream::tail() {
  std::lock_guard<std::mutex> g(mutex_);
  return tail_;
}

void Stream::append(const std::vector<std::shared_ptr<AsyncOp>>& ops) {
  std::lock_guard<std::mutex> g(mutex_);
  collectFinished();
  for (const auto& op : ops) pending_.push_back(op);
  tail_ = ops;
}

void Stream::collectFinished() {
  while (!pending_.empty() && pending_.front()->done()) {
    std::shared_ptr<AsyncOp> op = std::move(pending_.front());
    pending_.pop_front();
    std::string saved = lastError();
    loomResult_t r = op->wait();  // finished: returns at once, and puts its message in lastError()
    if (r != loomSuccess && error_ == loomSuccess) {
      error_ = r;
      errorMessage_ = lastError();
    }
    restoreLastError(saved);
  }
}

loomResult_t Stream::synchronize() {
  std::deque<std::shared_ptr<AsyncOp>> waitFor;
  {
    std::lock_guard<std::mutex> g(mutex_);
    waitFor = pending_;
  }
  for (const auto& op : waitFor) op->wait();
  std::lock_guard<std::mutex> g(mutex_);
  collectFinished();
  loomResult_t r = error_;
  if (r != loomSuccess) restoreLastError(errorMessage_);
  error_ = loomSuccess;
  errorMessage_.clear();
  return r;
}

loomResult_t Stream::query() {
  std::lock_guard<std::mutex> g(mutex_);
  collectFinished();
  if (!pending_.empty()) return loomInProgress;
  if (error_ != loomSuccess) restoreLastError(errorMessage_);
  return error_;
}

namespace {

std::mutex gStreamsMutex;
std::set<Stream*>& liveStreams() {
  static auto* streams = new std::set<Stream*>();  // reachable for the process's life
  return *streams;
}

}  // namespace

Stream* streamCreate() {
  auto* s = new Stream();
  std::lock_guard<std::mutex> g(gStreamsMutex);
  liveStreams().insert(s);
  return s;
}

Stream* findStream(loomStream_t handle) {
  std::lock_guard<std::mutex> g(gStreamsMutex);
  auto it = liveStreams().find(static_cast<Stream*>(handle));
  return it == liveStreams().end() ? nullptr : *it;
}

bool streamDestroy(loomStream_t handle) {
  Stream* s = nullptr;
  {
    std::lock_guard<std::mutex> g(gStreamsMutex);
    auto it = liveStreams().find(static_cast<Stream*>(handle));
    if (it == liveStreams().end()) return false;
    s = *it;
    liveStreams().erase(it);
  }
  std::string saved = lastError();
  s->synchronize();  // each operation is bounded by its communicator's timeout
  restoreLastError(saved);
  delete s;
  return true;
}

}  // namespace loom
