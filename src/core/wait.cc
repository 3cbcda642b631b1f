#include "core/wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/params.h"

namespace loom {

namespace {
std::atomic<int> gLocalRanks{1};
}

void setLocalRanksPerCore(int localRanks) {
  int cur = gLocalRanks.load();
  while (localRanks > cur && !gLocalRanks.compare_exchange_weak(cur, localRanks)) {
  }
}

int spinMicroseconds() {
  int64_t p = params().SPIN_US;
  if (p >= 0) return static_cast<int>(p);
  static const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  // With more ranks than cores a spinning waiter steals the very core its peer needs to answer.
  return gLocalRanks.load(std::memory_order_relaxed) > cores ? 0 : 50;
}

int yieldMicroseconds() {
  int64_t p = params().YIELD_US;
  return p >= 0 ? static_cast<int>(p) : 0;
}

void yieldCore() { sched_yield(); }

void futexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

loomResult_t waitSlowPath(const WaitContext& ctx) {
  if (ctx.abort != nullptr && ctx.abort->load(std::memory_order_relaxed))
    return setError(loomRemoteError, "%s: communicator aborted", ctx.what);
  if (ctx.probe != nullptr) LOOM_CHECK(ctx.probe(ctx.probeArg, ctx.peer));
  if (ctx.deadline.expired()) {
    std::string who = ctx.describePeer ? ctx.describePeer(ctx.probeArg, ctx.peer) : "rank " + std::to_string(ctx.peer);
    return setError(loomTimeout, "%s: no progress from %s within LOOM_TIMEOUT", ctx.what, who.c_str());
  }
  return loomSuccess;
}

}  // namespace loom
