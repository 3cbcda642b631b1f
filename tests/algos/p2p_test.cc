// Sends, receives and groups on real ranks: any order inside a group completes, pairs match in order,
// mismatches are named, and groups also drive several communicators from one thread.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"
#include "tests/common/reference.h"

namespace loom {
namespace {

using testing::ScopedEnv;

using testing::countWrongCopied;
using testing::fillInput;
using testing::runRanks;

// Elements of v that differ from first, first + 1, ... (every element checked).
template <typename T>
size_t wrongFrom(const std::vector<T>& v, T first) {
  size_t wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != static_cast<T>(first + static_cast<T>(i));
  return wrong;
}

// Elements of the n at p that differ from value.
template <typename T>
size_t wrongIn(const T* p, size_t n, T value) {
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += p[i] != value;
  return wrong;
}

// Every rank sends a large message to every other rank and receives one from each, posting its sends
// and receives in an order that would deadlock without the group (all sends first, in reverse).  Run
// with single-copy reads of the sender's memory (the default for large messages) and without.
class GroupOfAllPairs : public ::testing::TestWithParam<const char*> {};

TEST_P(GroupOfAllPairs, InAnyOrderCompletes) {
  ScopedEnv env;
  env.set("LOOM_SHM_DIRECT_MIN", GetParam());
  const int n = 4;
  const size_t count = 300000;  // several slots per message
  runRanks(n, [&](int rank, loomComm_t comm) {
    std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count)), out(n, std::vector<int32_t>(count, -1));
    for (int p = 0; p < n; ++p) std::iota(in[p].begin(), in[p].end(), rank * 1000000 + p * 10000);
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    for (int p = n - 1; p >= 0; --p) {
      if (p == rank) continue;
      ASSERT_EQ(loomSend(in[p].data(), count, loomInt32, p, comm, nullptr), loomSuccess);
    }
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      ASSERT_EQ(loomRecv(out[p].data(), count, loomInt32, p, comm, nullptr), loomSuccess);
    }
    ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comm);
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      EXPECT_EQ(wrongFrom(out[p], p * 1000000 + rank * 10000), 0u) << "from rank " << p;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(DirectMin, GroupOfAllPairs, ::testing::Values("64K", "0"),
                         [](const auto& p) { return std::string(p.param[0] == '0' ? "copyThroughSlots" : "singleCopy"); });

// Outside groups: a ring shift where even ranks send first and odd ranks receive first; several
// messages between one pair match in order; a rank may send to itself inside a group.
TEST(PointToPoint, BlockingSendRecvAndSelf) {
  runRanks(3, [&](int rank, loomComm_t comm) {
    const int n = 3, next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (int m = 0; m < 5; ++m) {
      std::vector<float> a(1000 + m, static_cast<float>(rank * 10 + m)), b(1000 + m, -1.0f);
      ASSERT_EQ(loomGroupStart(), loomSuccess);
      ASSERT_EQ(loomSend(a.data(), a.size(), loomFloat32, next, comm, nullptr), loomSuccess);
      ASSERT_EQ(loomRecv(b.data(), b.size(), loomFloat32, prev, comm, nullptr), loomSuccess);
      ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comm);
      EXPECT_EQ(wrongIn(b.data(), b.size(), static_cast<float>(prev * 10 + m)), 0u) << "message " << m;
    }
    // Small messages outside any group: the FIFO absorbs a send before its receive is posted.
    int64_t token = rank, got = -1;
    if (rank % 2 == 0) {
      ASSERT_EQ(loomSend(&token, 1, loomInt64, next, comm, nullptr), loomSuccess);
      ASSERT_EQ(loomRecv(&got, 1, loomInt64, prev, comm, nullptr), loomSuccess);
    } else {
      ASSERT_EQ(loomRecv(&got, 1, loomInt64, prev, comm, nullptr), loomSuccess);
      ASSERT_EQ(loomSend(&token, 1, loomInt64, next, comm, nullptr), loomSuccess);
    }
    EXPECT_EQ(got, prev);
    int self[4] = {1, 2, 3, 4}, back[4] = {};
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomRecv(back, 4, loomInt32, rank, comm, nullptr), loomSuccess);
    ASSERT_EQ(loomSend(self, 4, loomInt32, rank, comm, nullptr), loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comm);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], self[i]) << i;
  });
}

TEST(PointToPoint, GroupsNestAndCheckUsage) {
  EXPECT_EQ(loomGroupEnd(), loomInvalidUsage) << "GroupEnd without GroupStart";
  runRanks(2, [&](int rank, loomComm_t comm) {
    // The inner group holds a whole exchange, which would complete if its GroupEnd ran it.
    int v = rank, w = -1;
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomSend(&v, 1, loomInt32, 1 - rank, comm, nullptr), loomSuccess);
    ASSERT_EQ(loomRecv(&w, 1, loomInt32, 1 - rank, comm, nullptr), loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess);
    EXPECT_EQ(w, -1) << "nothing runs before the outermost GroupEnd";
    ASSERT_EQ(loomGroupEnd(), loomSuccess);
    EXPECT_EQ(w, 1 - rank);
    EXPECT_EQ(loomSend(&v, 1, loomInt32, 2, comm, nullptr), loomInvalidArgument) << "peer out of range";
    EXPECT_EQ(loomRecv(nullptr, 1, loomInt32, 0, comm, nullptr), loomInvalidArgument);
  });
}

TEST(PointToPoint, MismatchedSizesAreNamed) {
  runRanks(2, [&](int rank, loomComm_t comm) {
    std::vector<int32_t> v(rank == 0 ? 100 : 50, 1);
    loomResult_t r = rank == 0 ? loomSend(v.data(), v.size(), loomInt32, 1, comm, nullptr)
                               : loomRecv(v.data(), v.size(), loomInt32, 0, comm, nullptr);
    if (rank == 1) {
      EXPECT_EQ(r, loomInvalidUsage);
      std::string msg = loomGetLastError(comm);
      EXPECT_NE(msg.find("send/recv(count 50, int32)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("send/recv(count 100, int32)"), std::string::npos) << msg;
    } else {
      // The sender's bytes may have left before the receiver refused them (success), or the refusal
      // reaches it as the receiver's failure: either way it returns, with no other code.
      EXPECT_TRUE(r == loomSuccess || r == loomRemoteError || r == loomInvalidUsage)
          << loomGetErrorString(r) << ": " << loomGetLastError(comm);
    }
  }, 60, /*commTimeoutSec=*/3);
}

// A receive from any source whose senders each send once and leave (destroy the communicator and
// exit), one after another: every receive completes, each from another sender, every element checked.
// Rank 0 watches the senders in turn while it waits, so it sees the first ones gone before the last one
// sends: a rank that left is no failure of a receive that others can still satisfy.
class AnySourceSendersLeave : public ::testing::TestWithParam<const char*> {};

TEST_P(AnySourceSendersLeave, EveryReceiveCompletes) {
  ScopedEnv env;
  if (std::string(GetParam()) == "socket") env.set("LOOM_SHM_DISABLE", "1");
  constexpr int kRanks = 4, kCount = 1000;
  runRanks(kRanks, [&](int rank, loomComm_t comm) {
    std::vector<int32_t> v(kCount);
    if (rank != 0) {
      usleep(static_cast<useconds_t>(150000 * (rank - 1)));
      std::iota(v.begin(), v.end(), rank * 100000);
      EXPECT_EQ(loomSend(v.data(), kCount, loomInt32, 0, comm, nullptr), loomSuccess) << loomGetLastError(comm);
      return;
    }
    int mask = 0;
    for (int k = 0; k < kRanks - 1; ++k) {
      std::fill(v.begin(), v.end(), -1);
      int source = -1;
      ASSERT_EQ(loomRecvAnySource(v.data(), kCount, loomInt32, &source, comm, nullptr), loomSuccess)
          << "receive " << k << ": " << loomGetLastError(comm);
      ASSERT_TRUE(source >= 1 && source < kRanks) << source;
      mask |= 1 << source;
      EXPECT_EQ(wrongFrom(v, source * 100000), 0u) << "from rank " << source;
    }
    EXPECT_EQ(mask, 0xe);
  }, 120, /*commTimeoutSec=*/30);
}

INSTANTIATE_TEST_SUITE_P(Transports, AnySourceSendersLeave, ::testing::Values("shm", "socket"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// Once every rank that could send has left, the receive fails at once (not at the timeout), naming one.
TEST(PointToPoint, AnySourceFailsWhenEverySenderLeft) {
  runRanks(3, [&](int rank, loomComm_t comm) {
    if (rank != 0) return;
    int32_t v[8];
    int source = -1;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(loomRecvAnySource(v, 8, loomInt32, &source, comm, nullptr), loomRemoteError);
    EXPECT_LT(testing::secondsSince(t0), testing::timeBound(10));
    const std::string msg = loomGetLastError(comm);
    EXPECT_NE(msg.find("the last rank that could send"), std::string::npos) << msg;
    EXPECT_EQ(source, -1);
  }, 120, /*commTimeoutSec=*/60);
}

// One thread drives all ranks of a loomCommInitAll through one group.
TEST(PointToPoint, OneThreadDrivesSeveralCommunicatorsInAGroup) {
  const int n = 3;
  loomComm_t comms[n];
  ASSERT_EQ(loomCommInitAll(comms, n, nullptr), loomSuccess);
  std::vector<std::vector<float>> bufs(n, std::vector<float>(50000));
  for (int r = 0; r < n; ++r) fillInput(loomFloat32, loomSum, r, bufs[r].size(), bufs[r].data());
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(loomAllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), loomFloat32, loomSum, comms[r], nullptr),
              loomSuccess);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    std::string first;
    EXPECT_EQ(testing::countWrong(loomFloat32, loomSum, n, bufs[r].size(), bufs[r].data(), &first), 0u) << first;
  }
  // A ring shift of large messages between threads of this process (single copy within one address space).
  std::vector<std::vector<int64_t>> in(n, std::vector<int64_t>(200000)), out(n, std::vector<int64_t>(200000, -1));
  for (int r = 0; r < n; ++r) std::iota(in[r].begin(), in[r].end(), r * 1000000);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(loomSend(in[r].data(), in[r].size(), loomInt64, (r + 1) % n, comms[r], nullptr), loomSuccess);
    ASSERT_EQ(loomRecv(out[r].data(), out[r].size(), loomInt64, (r + n - 1) % n, comms[r], nullptr), loomSuccess);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(wrongFrom(out[r], int64_t{(r + n - 1) % n} * 1000000), 0u) << "rank " << r;
    EXPECT_EQ(loomCommDestroy(comms[r]), loomSuccess);
  }
}

// PreMulSum: each rank scales its input by its own scalar; both residences; ops are per communicator.
TEST(PreMulSum, SumsScaledInputs) {
  runRanks(3, [&](int rank, loomComm_t comm) {
    double scalar = rank + 1.5;  // read through the pointer at each call
    loomRedOp_t op;
    ASSERT_EQ(loomRedOpCreatePreMulSum(&op, &scalar, loomFloat64, loomScalarDevice, comm), loomSuccess);
    std::vector<double> v(1000, 2.0), out(1000);
    ASSERT_EQ(loomAllReduce(v.data(), out.data(), v.size(), loomFloat64, op, comm, nullptr), loomSuccess)
        << loomGetLastError(comm);
    EXPECT_EQ(wrongIn(out.data(), out.size(), 2.0 * (1.5 + 2.5 + 3.5)), 0u);  // exact in binary
    scalar = 1;
    ASSERT_EQ(loomReduceScatter(v.data(), out.data(), 300, loomFloat64, op, comm, nullptr), loomSuccess);
    EXPECT_EQ(wrongIn(out.data(), 300, 6.0), 0u);
    EXPECT_EQ(loomAllReduce(v.data(), out.data(), v.size(), loomFloat32, op, comm, nullptr), loomInvalidArgument)
        << "an op is for the type it was made with";
    ASSERT_EQ(loomRedOpDestroy(op, comm), loomSuccess);
    EXPECT_EQ(loomRedOpDestroy(op, comm), loomInvalidArgument);
    EXPECT_EQ(loomAllReduce(v.data(), out.data(), v.size(), loomFloat64, op, comm, nullptr), loomInvalidArgument);

    int32_t k = rank + 2;  // copied now
    loomRedOp_t iop;
    ASSERT_EQ(loomRedOpCreatePreMulSum(&iop, &k, loomInt32, loomScalarHostImmediate, comm), loomSuccess);
    k = 1000;
    int32_t x[2] = {10, -1}, y[2] = {};
    ASSERT_EQ(loomReduce(x, y, 2, loomInt32, iop, 0, comm, nullptr), loomSuccess);
    if (rank == 0) {
      EXPECT_EQ(y[0], 10 * (2 + 3 + 4));
      EXPECT_EQ(y[1], -(2 + 3 + 4));
    }
    ASSERT_EQ(loomRedOpDestroy(iop, comm), loomSuccess);
  });
}

// A split communicator runs every collective.
TEST(Split, EveryCallWorksOnASplitCommunicator) {
  runRanks(4, [&](int rank, loomComm_t comm) {
    loomComm_t sub = nullptr;
    ASSERT_EQ(loomCommSplit(comm, rank % 2, rank, &sub, nullptr), loomSuccess);
    const int me = rank / 2;
    std::vector<int64_t> a(10, rank), b(20, -1);
    // The sub-communicator's ranks are {rank % 2, rank % 2 + 2}: members m0 = rank % 2 and m1 = m0 + 2.
    const int64_t m0 = rank % 2, m1 = m0 + 2;
    ASSERT_EQ(loomAllReduce(a.data(), b.data(), 10, loomInt64, loomSum, sub, nullptr), loomSuccess);
    EXPECT_EQ(wrongIn(b.data(), 10, m0 + m1), 0u) << "allreduce";
    ASSERT_EQ(loomBroadcast(a.data(), b.data(), 10, loomInt64, 1, sub, nullptr), loomSuccess);
    EXPECT_EQ(wrongIn(b.data(), 10, m1), 0u) << "broadcast";
    ASSERT_EQ(loomReduce(a.data(), b.data(), 10, loomInt64, loomMax, 0, sub, nullptr), loomSuccess);
    if (me == 0) {
      EXPECT_EQ(wrongIn(b.data(), 10, m1), 0u) << "reduce";
    }
    ASSERT_EQ(loomAllGather(a.data(), b.data(), 10, loomInt64, sub, nullptr), loomSuccess);
    EXPECT_EQ(wrongIn(b.data(), 10, m0), 0u) << "allgather, block 0";
    EXPECT_EQ(wrongIn(b.data() + 10, 10, m1), 0u) << "allgather, block 1";
    // b = [m0 x 10, m1 x 10]: each member's block of the sum is m0 + m1.
    ASSERT_EQ(loomReduceScatter(b.data(), a.data(), 10, loomInt64, loomSum, sub, nullptr), loomSuccess);
    EXPECT_EQ(wrongIn(a.data(), 10, 2 * (me == 0 ? m0 : m1)), 0u) << "reducescatter";
    // Member `me` gets block `me` (5 elements) of every member's b: b[me*5 .. me*5+4], all m0.
    ASSERT_EQ(loomAllToAll(b.data(), a.data(), 5, loomInt64, sub, nullptr), loomSuccess);
    EXPECT_EQ(wrongIn(a.data(), 10, m0), 0u) << "alltoall";
    int64_t token = rank, got = -1;
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomSend(&token, 1, loomInt64, 1 - me, sub, nullptr), loomSuccess);
    ASSERT_EQ(loomRecv(&got, 1, loomInt64, 1 - me, sub, nullptr), loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess);
    EXPECT_EQ(got, me == 0 ? rank + 2 : rank - 2);
    EXPECT_EQ(loomCommDestroy(sub), loomSuccess);
  });
}

}  // namespace
}  // namespace loom
