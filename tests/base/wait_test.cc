#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "base/params.h"
#include "base/wait.h"
#include "tests/common/scoped_env.h"

namespace loom {
namespace {

// A network queue's I/O thread needs a core to make a wait end: waiting on it never pause-spins,
// whatever the core count, unless the user asked for spinning by LOOM_SPIN_US.
TEST(Wait, NoSpinningOnOurOwnIoThreadUnlessAsked) {
  {
    testing::ScopedEnv env{{"LOOM_SPIN_US", nullptr}};
    paramsReloadForTesting();
    EXPECT_EQ(spinMicroseconds(Producer::kOwnThread), 0);
    // No communicator of this process counted its ranks yet (the count only ever rises): with more
    // than one core a peer rank is worth a short spin.
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1) {
      EXPECT_GT(spinMicroseconds(Producer::kPeer), 0);
    }
    setLocalRanksPerCore(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) + 1);  // more ranks than cores
    EXPECT_EQ(spinMicroseconds(Producer::kPeer), 0) << "nobody spins when ranks outnumber the cores";
  }
  testing::ScopedEnv env{{"LOOM_SPIN_US", "7"}};
  paramsReloadForTesting();
  EXPECT_EQ(spinMicroseconds(Producer::kOwnThread), 7) << "asked for";
  EXPECT_EQ(spinMicroseconds(Producer::kPeer), 7);
}

// Woken ranks wait behind yielding ones (base/wait.h): with more ranks than cores and a communicator
// with ranks on other hosts, nobody yields, unless LOOM_YIELD_US asks for it.
TEST(Wait, NoYieldingWhenOversubscribedWithNetworkPeers) {
  {
    testing::ScopedEnv env{{"LOOM_YIELD_US", nullptr}};
    paramsReloadForTesting();
    setLocalRanksPerCore(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) + 1);  // more ranks than cores
    EXPECT_EQ(yieldMicroseconds(), 1000) << "ranks of one host yield to each other";
    setNetworkPeers();
    EXPECT_EQ(yieldMicroseconds(), 0) << "a rank woken by the network must not wait behind yielders";
  }
  testing::ScopedEnv env{{"LOOM_YIELD_US", "7"}};
  paramsReloadForTesting();
  EXPECT_EQ(yieldMicroseconds(), 7) << "asked for";
}

// A large call over sockets streams (base/wait.h, kStream): its waits neither spin nor yield, whatever
// the cores and the communicators, unless LOOM_SPIN_US / LOOM_YIELD_US ask for it.
TEST(Wait, StreamsNeitherSpinNorYieldUnlessAsked) {
  {
    testing::ScopedEnv env{{"LOOM_SPIN_US", nullptr}, {"LOOM_YIELD_US", nullptr}};
    paramsReloadForTesting();
    EXPECT_EQ(spinMicroseconds(Producer::kStream), 0);
    EXPECT_EQ(yieldMicroseconds(Producer::kStream), 0);
  }
  testing::ScopedEnv env{{"LOOM_SPIN_US", "7"}, {"LOOM_YIELD_US", "9"}};
  paramsReloadForTesting();
  EXPECT_EQ(spinMicroseconds(Producer::kStream), 7) << "asked for";
  EXPECT_EQ(yieldMicroseconds(Producer::kStream), 9) << "asked for";
}

// Backoff::idle in a large call, given sockets that show everything awaited, sleeps in poll() at once
// (a whole slice when nothing arrives); in a small call it spins first (forced to a second here, so
// that the first idle() returns at once whatever the cores).
TEST(Wait, BackoffOfALargeCallSleepsInPollAtOnce) {
  testing::ScopedEnv env{{"LOOM_SPIN_US", nullptr}, {"LOOM_YIELD_US", nullptr}};
  paramsReloadForTesting();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  auto firstIdleMs = [&](size_t callBytes, const char* spinUs) {
    testing::ScopedEnv spin{{"LOOM_SPIN_US", spinUs}};
    paramsReloadForTesting();
    WaitContext ctx;
    ctx.timeoutSec = 10;
    ctx.callBytes = callBytes;
    Backoff backoff(ctx);
    std::vector<pollfd> pfds{{fds[0], POLLIN, 0}};  // never written: only the timeout ends a poll
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(backoff.idle(&pfds, true), loomSuccess);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  EXPECT_GE(firstIdleMs(kStreamCallBytes, nullptr), kWaitSliceMs * 0.75) << "a stream sleeps at once";
  EXPECT_LT(firstIdleMs(kStreamCallBytes - 1, "1000000"), 500) << "a small call spins first";
  close(fds[0]);
  close(fds[1]);
}

// A wait on a thread of ours ends when the thread publishes, through the yield or the futex phase.
TEST(Wait, OwnThreadWaitEndsWhenThePosterPublishes) {
  std::atomic<uint32_t> word{0}, sleeping{0};
  WaitContext ctx;
  ctx.timeoutSec = 10;
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the yield phase: a futex wake
    publishAndWake(&word, 1, &sleeping);
  });
  EXPECT_EQ(waitUntil([&] { return word.load() == 1; }, &word, &sleeping, ctx, Producer::kOwnThread), loomSuccess);
  poster.join();
  EXPECT_EQ(word.load(), 1u);
}

}  // namespace
}  // namespace loom
