#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/wait.h"

namespace loom {
namespace {

// A network queue's I/O thread needs a core to make a wait end: waiting on it never pause-spins,
// whatever the core count, unless the user asked for spinning by LOOM_SPIN_US.
TEST(Wait, NoSpinningOnOurOwnIoThreadUnlessAsked) {
  const char* set = std::getenv("LOOM_SPIN_US");
  if (set != nullptr && std::atoi(set) >= 0) {
    EXPECT_EQ(spinMicroseconds(Producer::kOwnThread), std::atoi(set));
    EXPECT_EQ(spinMicroseconds(Producer::kPeer), std::atoi(set));
    return;
  }
  EXPECT_EQ(spinMicroseconds(Producer::kOwnThread), 0);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  setLocalRanksPerCore(1);
  if (cores > 1) {
    EXPECT_GT(spinMicroseconds(Producer::kPeer), 0);  // core_test makes no communicator that raised it
  }
  setLocalRanksPerCore(static_cast<int>(cores) + 1);  // more ranks than cores: nobody spins
  EXPECT_EQ(spinMicroseconds(Producer::kPeer), 0);
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
