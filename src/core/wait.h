// Waiting without burning a core, in three bounded phases: spin for a short while (the peer usually
// answers within microseconds), then yield the core for a while (with more ranks than cores, the peer we
// wait for is often runnable on our own core, and a futex wake-up costs tens of microseconds, far more
// inside a VM), then sleep on a futex in slices of at most 100 ms.  Between slices the abort flag, the deadline and a
// liveness probe (is the peer process still there?) are checked, so no wait is unbounded.
//
// The words live in memory shared between processes, so the futex calls are not FUTEX_PRIVATE.
// Protocol (Dekker-style, all seq_cst): the waiter publishes `sleeping = 1` then re-reads the word;
// the poster writes the word then reads `sleeping` and wakes only when someone may sleep.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace loom {

struct WaitContext {
  Deadline deadline;
  const std::atomic<bool>* abort = nullptr;
  // Optional: called between sleeps; a non-success result (the peer died) ends the wait with it.
  loomResult_t (*probe)(const void* arg, int peer) = nullptr;
  // Optional: names a peer in messages ("rank 3 (host h, pid 42)").
  std::string (*describePeer)(const void* arg, int peer) = nullptr;
  const void* probeArg = nullptr;
  const char* what = "wait";  // the operation, for messages
  int peer = -1;              // the rank being waited for; set before each wait
};

// Microseconds to spin before sleeping, from LOOM_SPIN_US or, when it is -1, from how many ranks of
// this process's communicators share the host's cores (no spinning when they outnumber the cores).
void setLocalRanksPerCore(int localRanks);
int spinMicroseconds();
// Microseconds a waiting rank yields its core before it sleeps (LOOM_YIELD_US).
int yieldMicroseconds();

void yieldCore();
void futexWake(std::atomic<uint32_t>* word);
// Sleeps while *word == expected, at most `ms` milliseconds.
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int ms);

loomResult_t waitSlowPath(const WaitContext& ctx);  // abort / deadline / probe check between sleeps

// Waits until ready() is true.  `word` is the shared counter whose change makes it true; `sleeping` is
// the flag this waiter raises before sleeping.
template <typename Ready>
loomResult_t waitUntil(Ready ready, std::atomic<uint32_t>* word, std::atomic<uint32_t>* sleeping,
                       const WaitContext& ctx) {
  if (ready()) return loomSuccess;
  int spinUs = spinMicroseconds();
  if (spinUs > 0) {
    auto until = Deadline::Clock::now() + std::chrono::microseconds(spinUs);
    for (unsigned i = 1;; ++i) {
      __builtin_ia32_pause();
      if (ready()) return loomSuccess;
      if ((i & 63) == 0 && Deadline::Clock::now() >= until) break;
    }
  }
  int yieldUs = yieldMicroseconds();
  if (yieldUs > 0) {
    auto until = Deadline::Clock::now() + std::chrono::microseconds(yieldUs);
    do {
      yieldCore();
      if (ready()) return loomSuccess;
    } while (Deadline::Clock::now() < until);
  }
  for (;;) {
    sleeping->store(1, std::memory_order_seq_cst);
    uint32_t seen = word->load(std::memory_order_seq_cst);
    if (ready()) {
      sleeping->store(0, std::memory_order_relaxed);
      return loomSuccess;
    }
    futexWait(word, seen, ctx.deadline.remainingMs(100));
    sleeping->store(0, std::memory_order_relaxed);
    if (ready()) return loomSuccess;
    LOOM_CHECK(waitSlowPath(ctx));
  }
}

// The poster's half: publish `value`, then wake a sleeper if there may be one.
inline void publishAndWake(std::atomic<uint32_t>* word, uint32_t value, std::atomic<uint32_t>* sleeping) {
  word->store(value, std::memory_order_seq_cst);
  if (sleeping->load(std::memory_order_seq_cst) != 0) futexWake(word);
}

}  // namespace loom
