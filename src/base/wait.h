// Waiting without burning a core, in three bounded phases: spin for a short while (the peer usually
// answers within microseconds), then yield the core for a while (with more ranks than cores, the peer we
// wait for is often runnable on our own core, and a futex wake-up costs tens of microseconds, far more
// inside a VM), then sleep on a futex in slices of at most kWaitSliceMs.  Between slices the abort flag, the deadline
// and a liveness probe (is the peer process still there? did a rank announce a failure?) are checked, so no wait
// is unbounded.
//
// The words live in memory shared between processes, so the futex calls are not FUTEX_PRIVATE.
// Protocol (Dekker-style, all seq_cst): the waiter publishes `sleeping = 1` then re-reads the word;
// the poster writes the word then reads `sleeping` and wakes only when someone may sleep.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace loom {

// How long a sleeping waiter goes without looking at the abort flag, its peer's liveness and failure
// announcements.  A death reaches a rank that does not wait for the dead one in two slices (its
// neighbour notices in one and announces it; the rank sees the announcement at the end of its own), so
// the slice bounds how soon survivors can shrink.  20 ms: 100 ms slices made the survivors of a 4-rank
// job learn of a death 0.1-0.3 s after it (now 0.04-0.08 s), and the checks cost little: a rank blocked
// 10 s for its peer used 0.06 s of CPU (0.015 s with 100 ms slices; a busy-polling MPI uses 10 s).
constexpr int kWaitSliceMs = 20;

struct WaitContext {
  // Each wait may last this long without the awaited event (not the whole operation: a long call that
  // keeps making progress never times out).
  double timeoutSec = 300;
  const std::atomic<bool>* abort = nullptr;
  // Optional: called between sleeps; a non-empty answer says the peer is gone (and how), which ends the
  // wait with loomRemoteError unless the awaited data turns out to be there after all.
  std::string (*probe)(const void* arg, int peer) = nullptr;
  // Optional: names a peer in messages ("rank 3 (host h, pid 42)").
  std::string (*describePeer)(const void* arg, int peer) = nullptr;
  const void* probeArg = nullptr;
  const char* what = "wait";  // the operation, for messages
  int peer = -1;              // the rank being waited for; set before each wait
  size_t callBytes = 0;       // what this rank's call moves (0: unknown); kStreamCallBytes or more: a stream
};

// Who makes a wait end.  A peer rank runs on its own core when ranks do not outnumber cores, so a short
// spin catches its answer soonest.  A thread of this very process (a network queue's I/O thread) is
// different: it needs a core to make the data arrive, and a spinning waiter may hold the one it would
// get.  Such waits skip the spin and go straight to yielding, which returns at once when a core is idle
// and hands the core over when it is not (2 hosts x 1 rank on 2 cores, 8 MB allreduce over sockets:
// 0.79-0.92 -> 0.90-1.07 GB/s).
// A large call over sockets (kStream: the call moves kStreamCallBytes or more, and the wait's progress
// shows in poll()) is different again: the kernel moves the data while the rank sleeps in poll(), and
// a wake-up per socket buffer's worth costs little beside the copies.  Spinning and yielding there only
// take the core those copies need, so such waits sleep at once.  Measured on 2 hosts x 1 rank (ranks =
// cores, where spinning and yielding are on otherwise), medians of 5-6 alternating runs, time and CPU
// s/GB, spin 50 us + yield 1 ms -> sleep at once: broadcast 4 MB 1055 -> 975 us (0.50 -> 0.38), 64 MB
// 17.5 -> 15.5 ms (0.52 -> 0.42); alltoall 16 MB 6.36 -> 5.95 ms (0.74 -> 0.61); allgather 16 MB 4.93 ->
// 3.70 ms (0.59 -> 0.44); allreduce and reduce-scatter equal within the spread.  Below 4 MB it lost:
// broadcast 1 MB 329 -> 468 us (an idle vCPU's wake-up is slow, and a small call has few to hide it).
enum class Producer { kPeer, kOwnThread, kStream };
constexpr size_t kStreamCallBytes = 4u << 20;
// Who ends a wait whose progress shows in poll(): the kernel streaming a large call, or else `otherwise`.
inline Producer streamOr(const WaitContext& ctx, Producer otherwise) {
  return ctx.callBytes >= kStreamCallBytes ? Producer::kStream : otherwise;
}

// Microseconds to spin before sleeping, from LOOM_SPIN_US or, when it is -1, from who answers and how
// many ranks of this process's communicators share the host's cores (no spinning when they outnumber
// the cores, none for kStream).
void setLocalRanksPerCore(int localRanks);
int spinMicroseconds(Producer producer = Producer::kPeer);
// A communicator of this process has ranks on other hosts: its ranks wait on the network in poll(),
// which the data itself ends.  Yielding there only burns the core: a rank woken by a packet (or, beside
// ranks of its own host, by a futex) must get a core from whoever holds it, and a rank that yields in a
// loop keeps holding it, while the kernel's socket copies that make the data arrive need the same cores.
// Measured with more ranks than cores (2 cores):
// - 2 hosts x 2 ranks, 8-byte broadcast, median of 4 runs: 215 us with 1 ms of yielding, 30 us without
//   (perf sched: runnable ranks waited 1-1.5 ms on average in the slow runs); allreduce 0.5-32 MB 3-21%
//   faster without.
// - 4 hosts x 1 rank, 64 MB chain broadcast: sched_yield took 11% of all CPU samples (perf record -a),
//   almost all in receivers waiting for their parent.  Medians of 6 alternating runs, 1 ms of yielding
//   vs none, 64 MB: broadcast 72.3 vs 68.8 ms (CPU 1.99 vs 1.73 s/GB), allreduce 137 vs 130 ms (3.76 vs
//   3.45), alltoall 74.6 vs 73.1 ms (1.99 vs 1.95); 1-16 MB equal within the spread.
// So in such a process nobody yields when ranks outnumber the cores.  Where every rank waits on shared
// memory, all stay runnable while they yield and yielding pays: 4 ranks on one host, 8-byte broadcast
// 2-3 us yielding, 7-9 us sleeping.  With no more ranks than cores the yield stays (2 hosts x 1 rank,
// allreduce 16 MB: 6.8 ms yielding, 9.8 without).
void setNetworkPeers();
// Microseconds a waiting rank yields its core before it sleeps (LOOM_YIELD_US, -1: the rule above;
// none for kStream).
int yieldMicroseconds(Producer producer = Producer::kPeer);

void yieldCore();
void futexWake(std::atomic<uint32_t>* word);
// Sleeps while *word == expected, at most `ms` milliseconds.
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int ms);

// Between sleeps: the abort flag, the liveness probe, then the deadline of this wait.  Returns the code
// the wait would end with and its message, without recording it: the caller first looks once more for
// the awaited event, since a peer may post its last data and exit while we sleep.
loomResult_t checkWait(const WaitContext& ctx, const Deadline& deadline, std::string* message);
// Records it (setError), naming ctx.peer as the rank lost unless the communicator was aborted here.
loomResult_t failWait(const WaitContext& ctx, loomResult_t code, const std::string& message);

// Waits until ready() is true, in the three phases above; sleep(ms) is the third phase's sleep, at most
// `ms` milliseconds, ended early by whatever makes ready() true (a futex wake-up, data on a socket).
template <typename Ready, typename Sleep>
loomResult_t waitWith(Ready ready, Sleep sleep, const WaitContext& ctx, Producer producer = Producer::kPeer) {
  if (ready()) return loomSuccess;
  // Most waits end within the spin: they read no clock (the spin's end is fixed at its first check, 64
  // pauses in, and the wait's deadline once the spin is over, so a wait may last one spin longer than
  // the timeout).  Two clock reads cost ~5% of an 8-byte allreduce between 2 ranks.
  int spinUs = spinMicroseconds(producer);
  if (spinUs > 0) {
    Deadline::Clock::time_point until{};
    for (unsigned i = 1;; ++i) {
      __builtin_ia32_pause();
      if (ready()) return loomSuccess;
      if ((i & 63) == 0) {
        if (i == 64) until = Deadline::Clock::now() + std::chrono::microseconds(spinUs);
        else if (Deadline::Clock::now() >= until) break;
      }
    }
  }
  const Deadline deadline = Deadline::afterSeconds(ctx.timeoutSec);
  int yieldUs = yieldMicroseconds(producer);
  if (yieldUs > 0) {
    auto until = Deadline::Clock::now() + std::chrono::microseconds(yieldUs);
    do {
      yieldCore();
      if (ready()) return loomSuccess;
    } while (Deadline::Clock::now() < until);
  }
  for (;;) {
    sleep(deadline.remainingMs(kWaitSliceMs));
    if (ready()) return loomSuccess;
    std::string why;
    loomResult_t code = checkWait(ctx, deadline, &why);
    if (code != loomSuccess) return ready() ? loomSuccess : failWait(ctx, code, why);
  }
}

// Waits until ready() is true.  `word` is the shared counter whose change makes it true; `sleeping` is
// the flag this waiter raises before sleeping on it.
template <typename Ready>
loomResult_t waitUntil(Ready ready, std::atomic<uint32_t>* word, std::atomic<uint32_t>* sleeping,
                       const WaitContext& ctx, Producer producer = Producer::kPeer) {
  return waitWith(
      ready,
      [&](int ms) {
        sleeping->store(1, std::memory_order_seq_cst);
        const uint32_t seen = word->load(std::memory_order_seq_cst);
        if (!ready()) futexWait(word, seen, ms);
        sleeping->store(0, std::memory_order_relaxed);
      },
      ctx, producer);
}

// Waiting on several things at once (a group's transfers to many peers), where there is no single word
// to sleep on: the caller polls everything, and calls idle() after a pass that moved nothing.  idle()
// spins, then yields, then sleeps in steps growing to 1 ms, with the same bounds as waitUntil; a dead
// peer or the deadline ends the wait only when the pass after noticing it still moved nothing.  Given
// descriptors (sockets the awaited data arrives on), it sleeps in poll() on them instead, so that the
// data ends the sleep; when they show everything awaited (`complete`), the sleep lasts up to a slice,
// and in a large call (ctx.callBytes, Producer::kStream) it comes at once.
class Backoff {
 public:
  explicit Backoff(const WaitContext& ctx, Producer producer = Producer::kPeer)
      : ctx_(ctx), producer_(producer) {
    progressed();
  }

  void progressed() {
    idleSince_ = Deadline::Clock::now();
    sleepUs_ = 0;
    deadline_ = Deadline::afterSeconds(ctx_.timeoutSec);
    pending_ = loomSuccess;
  }
  loomResult_t idle(std::vector<pollfd>* fds = nullptr, bool complete = false);

 private:
  const WaitContext& ctx_;
  loomResult_t pending_ = loomSuccess;  // noticed at the last idle(), reported if nothing moved since
  std::string pendingWhy_;
  int pendingPeer_ = -1;  // whom it was about: the caller may watch another peer by the next idle()
  Deadline::Clock::time_point idleSince_;
  Deadline deadline_;
  int sleepUs_ = 0;
  Producer producer_;
};

// The poster's half: publish `value`, then wake a sleeper if there may be one.
inline void publishAndWake(std::atomic<uint32_t>* word, uint32_t value, std::atomic<uint32_t>* sleeping) {
  word->store(value, std::memory_order_seq_cst);
  if (sleeping->load(std::memory_order_seq_cst) != 0) futexWake(word);
}

}  // namespace loom
