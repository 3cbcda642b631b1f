#include "base/wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "base/params.h"

namespace loom {

namespace {
std::atomic<int> gLocalRanks{1};
std::atomic<bool> gNetworkPeers{false};

bool oversubscribed() {
  static const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return gLocalRanks.load(std::memory_order_relaxed) > cores;
}
}  // namespace

void setLocalRanksPerCore(int localRanks) {
  int cur = gLocalRanks.load();
  while (localRanks > cur && !gLocalRanks.compare_exchange_weak(cur, localRanks)) {
  }
}

int spinMicroseconds(Producer producer) {
  int64_t p = params().SPIN_US;
  if (p >= 0) return static_cast<int>(p);
  if (producer != Producer::kPeer) return 0;
  // With more ranks than cores a spinning waiter steals the very core its peer needs to answer.
  return oversubscribed() ? 0 : 50;
}

void setNetworkPeers() { gNetworkPeers.store(true, std::memory_order_relaxed); }

int yieldMicroseconds(Producer producer) {
  int64_t p = params().YIELD_US;
  if (p >= 0) return static_cast<int>(p);
  if (producer == Producer::kStream) return 0;
  return oversubscribed() && gNetworkPeers.load(std::memory_order_relaxed) ? 0 : 1000;
}

void yieldCore() { sched_yield(); }

void futexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

loomResult_t Backoff::idle(std::vector<pollfd>* fds, bool complete) {
  if (pending_ != loomSuccess) {
    WaitContext noticed = ctx_;
    noticed.peer = pendingPeer_;
    return failWait(noticed, pending_, pendingWhy_);
  }
  const bool viaPoll = complete && fds != nullptr && !fds->empty();
  const Producer producer = viaPoll ? streamOr(ctx_, producer_) : producer_;
  const int spinUs = spinMicroseconds(producer);
  auto idleUs = std::chrono::duration_cast<std::chrono::microseconds>(Deadline::Clock::now() - idleSince_).count();
  if (idleUs < spinUs) {
    for (int i = 0; i < 64; ++i) __builtin_ia32_pause();
    return loomSuccess;
  }
  if (idleUs < spinUs + yieldMicroseconds(producer)) {
    yieldCore();
    return loomSuccess;
  }
  sleepUs_ = sleepUs_ == 0 ? 10 : std::min(sleepUs_ * 2, 1000);
  if (fds != nullptr && !fds->empty()) {
    const int us = complete ? deadline_.remainingMs(kWaitSliceMs) * 1000 : sleepUs_;
    const timespec ts{us / 1000000, (us % 1000000) * 1000L};
    ::ppoll(fds->data(), fds->size(), &ts, nullptr);
  } else {
    usleep(static_cast<useconds_t>(sleepUs_));
  }
  pending_ = checkWait(ctx_, deadline_, &pendingWhy_);
  pendingPeer_ = ctx_.peer;
  return loomSuccess;
}

loomResult_t checkWait(const WaitContext& ctx, const Deadline& deadline, std::string* message) {
  if (ctx.abort != nullptr && ctx.abort->load(std::memory_order_relaxed)) {
    *message = std::string(ctx.what) + ": communicator aborted";
    return loomRemoteError;
  }
  if (ctx.probe != nullptr) {
    std::string gone = ctx.probe(ctx.probeArg, ctx.peer);
    if (!gone.empty()) {
      *message = std::string(ctx.what) + ": " + gone;
      return loomRemoteError;
    }
  }
  if (deadline.expired()) {
    std::string who = ctx.describePeer ? ctx.describePeer(ctx.probeArg, ctx.peer) : "rank " + std::to_string(ctx.peer);
    *message = std::string(ctx.what) + ": no progress from " + who + " within LOOM_TIMEOUT";
    return loomTimeout;
  }
  return loomSuccess;
}

loomResult_t failWait(const WaitContext& ctx, loomResult_t code, const std::string& message) {
  setError(code, "%s", message.c_str());
  if (ctx.abort == nullptr || !ctx.abort->load(std::memory_order_relaxed)) setLastErrorPeer(ctx.peer);
  return code;
}

}  // namespace loom
