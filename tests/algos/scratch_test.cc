#include "algos/scratch.h"

#include <gtest/gtest.h>

#include <cstring>

namespace loom {
namespace {

TEST(Scratch, ALeaseReusesItsThreadsBufferAndKeepsWhatWasWritten) {
  char* first;
  {
    ScratchLease a(ScratchUse::kGathered, 1 << 20);
    first = a.data();
    std::memset(first, 7, 1 << 20);
  }
  ScratchLease b(ScratchUse::kGathered, 1000);  // smaller: the same memory, not a new allocation
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.data()[999], 7);
}

TEST(Scratch, TheSameUseTwiceAtOnceGetsTwoBuffers) {
  ScratchLease outer(ScratchUse::kReceived, 4096);
  ScratchLease inner(ScratchUse::kReceived, 4096);
  EXPECT_NE(outer.data(), inner.data());
  std::memset(outer.data(), 1, 4096);
  std::memset(inner.data(), 2, 4096);  // no overlap: writing one leaves the other as it was
  EXPECT_EQ(outer.data()[4095], 1);
}

TEST(Scratch, UsesDoNotShareAndAZeroByteLeaseIsUsable) {
  ScratchLease a(ScratchUse::kOutgoing, 64);
  ScratchLease b(ScratchUse::kOwnInput, 0);
  EXPECT_NE(a.data(), nullptr);
  EXPECT_NE(b.data(), nullptr);
  EXPECT_NE(a.data(), b.data());
}

}  // namespace
}  // namespace loom
