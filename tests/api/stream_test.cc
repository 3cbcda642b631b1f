// Asynchronous host streams: calls return at once and run in issue order on the communicator's progress
// thread; NULL-stream calls wait for them; communicators progress independently; groups on a stream;
// failures reach loomStreamSynchronize, loomStreamQuery and loomCommGetAsyncError; bad handles are errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "loom.h"
#include "tests/common/multiprocess.h"

namespace {

using loom::testing::forkRanks;
using loom::testing::runRanks;
using loom::testing::secondsSince;
using loom::testing::timeBound;

// Rank 1 joins a second late: rank 0's calls return at once, the stream says in progress, and the
// twenty in-place sums, run in issue order, give nranks^20 times the input.
TEST(Stream, CallsReturnAtOnceAndRunInIssueOrder) {
  runRanks(3, [](int rank, loomComm_t comm) {
    loomStream_t s = nullptr;
    ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
    if (rank == 1) sleep(1);
    std::vector<double> v(4099, 1.0 + rank);  // sum over ranks: 6, then x3 per call
    std::vector<int32_t> tag(5, rank);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i)
      ASSERT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomFloat64, loomSum, comm, s), loomSuccess);
    ASSERT_EQ(loomAllReduce(tag.data(), tag.data(), tag.size(), loomInt32, loomMax, comm, s), loomSuccess);
    if (rank == 0) {
      EXPECT_LT(secondsSince(t0), timeBound(0.5)) << "issuing must not wait for the peers";
      EXPECT_EQ(loomStreamQuery(s), loomInProgress);
    }
    ASSERT_EQ(loomStreamSynchronize(s), loomSuccess) << loomGetLastError(comm);
    EXPECT_EQ(loomStreamQuery(s), loomSuccess);
    const double want = 6.0 * std::pow(3.0, 19);
    EXPECT_EQ(v.front(), want);
    EXPECT_EQ(v.back(), want);
    EXPECT_EQ(tag[4], 2);
    EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
  }, 120);
}

// A NULL-stream call starts after what was issued on streams before it: issued the other way round, the
// two calls (of different counts) would meet as mismatched calls.
TEST(Stream, NullStreamCallsWaitForEarlierStreamCalls) {
  runRanks(2, [](int rank, loomComm_t comm) {
    loomStream_t s = nullptr;
    ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
    if (rank == 0) usleep(300 * 1000);
    std::vector<float> a(1 << 20, 1.0f), b(100, 2.0f);
    ASSERT_EQ(loomAllReduce(a.data(), a.data(), a.size(), loomFloat32, loomSum, comm, s), loomSuccess);
    ASSERT_EQ(loomAllReduce(b.data(), b.data(), b.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess)
        << loomGetLastError(comm);
    EXPECT_EQ(b[99], 4.0f);
    EXPECT_EQ(loomStreamQuery(s), loomSuccess) << "the NULL-stream call returned after the stream's call";
    EXPECT_EQ(a[12345], 2.0f);
    EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
  }, 120);
}

// Two communicators each have their own progress thread.  Rank 0 issues on A then B; rank 1 finishes
// on B before it issues on A.  With one engine for both, rank 0's B would wait behind A forever.
TEST(Stream, CommunicatorsProgressIndependently) {
  runRanks(2, [](int rank, loomComm_t commA) {
    loomComm_t commB = nullptr;
    ASSERT_EQ(loomCommSplit(commA, 0, rank, &commB, nullptr), loomSuccess);
    loomStream_t sa = nullptr, sb = nullptr;
    ASSERT_EQ(loomStreamCreate(&sa), loomSuccess);
    ASSERT_EQ(loomStreamCreate(&sb), loomSuccess);
    std::vector<int64_t> a(1000, rank + 1), b(1000, 10 * (rank + 1));
    if (rank == 0) {
      ASSERT_EQ(loomAllReduce(a.data(), a.data(), a.size(), loomInt64, loomSum, commA, sa), loomSuccess);
      ASSERT_EQ(loomAllReduce(b.data(), b.data(), b.size(), loomInt64, loomSum, commB, sb), loomSuccess);
    } else {
      ASSERT_EQ(loomAllReduce(b.data(), b.data(), b.size(), loomInt64, loomSum, commB, sb), loomSuccess);
      ASSERT_EQ(loomStreamSynchronize(sb), loomSuccess) << loomGetLastError(commB);
      ASSERT_EQ(loomAllReduce(a.data(), a.data(), a.size(), loomInt64, loomSum, commA, sa), loomSuccess);
    }
    EXPECT_EQ(loomStreamSynchronize(sa), loomSuccess) << loomGetLastError(commA);
    EXPECT_EQ(loomStreamSynchronize(sb), loomSuccess) << loomGetLastError(commB);
    EXPECT_EQ(a[999], 3);
    EXPECT_EQ(b[999], 30);
    EXPECT_EQ(loomStreamDestroy(sa), loomSuccess);
    EXPECT_EQ(loomStreamDestroy(sb), loomSuccess);
    EXPECT_EQ(loomCommDestroy(commB), loomSuccess);
  }, 120);
}

// One thread drives both ranks of an InitAll pair: a group of sends and receives on a stream is one
// operation per communicator, run by both progress threads at once (one after the other would deadlock).
// The stream's next call waits for the group.
TEST(Stream, GroupOnAStreamDrivesSeveralCommunicators) {
  loomComm_t comms[2];
  ASSERT_EQ(loomCommInitAll(comms, 2, nullptr), loomSuccess) << loomGetLastError(nullptr);
  loomStream_t s = nullptr;
  ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
  const size_t n = 300000;
  std::vector<int32_t> out0(n, 7), out1(n, 9), in0(n, 0), in1(n, 0);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  ASSERT_EQ(loomRecv(in0.data(), n, loomInt32, 1, comms[0], s), loomSuccess);
  ASSERT_EQ(loomSend(out0.data(), n, loomInt32, 1, comms[0], s), loomSuccess);
  ASSERT_EQ(loomSend(out1.data(), n, loomInt32, 0, comms[1], s), loomSuccess);
  ASSERT_EQ(loomRecv(in1.data(), n, loomInt32, 0, comms[1], s), loomSuccess);
  ASSERT_EQ(loomGroupEnd(), loomSuccess);
  ASSERT_EQ(loomStreamSynchronize(s), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(in0[n - 1], 9);
  EXPECT_EQ(in1[n - 1], 7);
  // A group whose calls name different streams runs nothing and says why.
  loomStream_t other = nullptr;
  ASSERT_EQ(loomStreamCreate(&other), loomSuccess);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  ASSERT_EQ(loomSend(out0.data(), n, loomInt32, 1, comms[0], s), loomSuccess);
  ASSERT_EQ(loomRecv(in1.data(), n, loomInt32, 0, comms[1], other), loomSuccess);
  EXPECT_EQ(loomGroupEnd(), loomInvalidUsage);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("same stream"), std::string::npos) << loomGetLastError(nullptr);
  EXPECT_EQ(loomStreamDestroy(other), loomSuccess);
  EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
  for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

// A PreMulSum op may be destroyed as soon as the call (or the group) that uses it has returned: the
// stream operation kept its scalar.
TEST(Stream, PreMulSumOpMayBeDestroyedOnceIssued) {
  runRanks(2, [](int rank, loomComm_t comm) {
    loomStream_t s = nullptr;
    ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
    float scalar = rank == 0 ? 2.0f : 3.0f;
    loomRedOp_t op;
    ASSERT_EQ(loomRedOpCreatePreMulSum(&op, &scalar, loomFloat32, loomScalarHostImmediate, comm), loomSuccess);
    if (rank == 1) usleep(200 * 1000);
    std::vector<float> v(1000, 1.0f);
    ASSERT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, op, comm, s), loomSuccess);
    ASSERT_EQ(loomRedOpDestroy(op, comm), loomSuccess);
    ASSERT_EQ(loomStreamSynchronize(s), loomSuccess) << loomGetLastError(comm);
    EXPECT_EQ(v[999], 5.0f);
    // The same through a group on the stream: the group's calls keep the scalar too.
    scalar = rank == 0 ? 4.0f : 6.0f;
    ASSERT_EQ(loomRedOpCreatePreMulSum(&op, &scalar, loomFloat32, loomScalarHostImmediate, comm), loomSuccess);
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, op, comm, s), loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess);
    ASSERT_EQ(loomRedOpDestroy(op, comm), loomSuccess);
    ASSERT_EQ(loomStreamSynchronize(s), loomSuccess) << loomGetLastError(comm);
    EXPECT_EQ(v[999], 50.0f);
    EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
  }, 120);
}

// A peer that dies: the stream's synchronize reports loomRemoteError naming it, the communicator's
// async error says the same, and the calls queued behind the failed one fail with it too.
TEST(Stream, DeadPeerReachesSynchronizeAndAsyncError) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  auto outcomes = forkRanks(2, [&](int rank) {
    loomComm_t comm;
    if (loomCommInitRank(&comm, 2, id, rank) != loomSuccess) return 2;
    if (rank == 1) raise(SIGKILL);
    loomStream_t s = nullptr;
    if (loomStreamCreate(&s) != loomSuccess) return 3;
    std::vector<float> v(1 << 16, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i)
      if (loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, s) != loomSuccess) return 4;
    loomResult_t r = loomStreamSynchronize(s);
    std::string msg = loomGetLastError(comm);
    loomResult_t async = loomSuccess;
    loomCommGetAsyncError(comm, &async);
    const bool good = r == loomRemoteError && async == loomRemoteError && secondsSince(t0) < timeBound(10) &&
                      msg.find("rank 1") != std::string::npos;
    if (!good) fprintf(stderr, "result %d, async %d after %.2fs: %s\n", r, async, secondsSince(t0), msg.c_str());
    // The failure was reported once; the stream is usable again and says so.
    const bool cleared = loomStreamQuery(s) == loomSuccess;
    loomStreamDestroy(s);
    loomCommDestroy(comm);
    return good && cleared ? 0 : 1;
  }, 60);
  EXPECT_TRUE(outcomes[0].ok()) << outcomes[0].describe();
  EXPECT_EQ(outcomes[1].signal, SIGKILL);
}

// Abort with calls queued: the running one ends promptly, those not started end with loomInvalidUsage.
TEST(Stream, AbortEndsQueuedCalls) {
  runRanks(2, [](int rank, loomComm_t comm) {
    if (rank == 1) {
      sleep(2);  // never joins the calls; its own destroy then meets nobody
      return;
    }
    loomStream_t s = nullptr;
    ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
    std::vector<float> v(1000, 1.0f);
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, s), loomSuccess);
    usleep(200 * 1000);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(loomCommAbort(comm), loomSuccess);
    EXPECT_LT(secondsSince(t0), timeBound(2.0));
    loomResult_t r = loomStreamSynchronize(s);
    EXPECT_TRUE(r == loomRemoteError || r == loomInvalidUsage) << r << ": " << loomGetLastError(nullptr);
    EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
  }, 120, /*commTimeoutSec=*/30);
}

TEST(Stream, BadHandlesAreErrors) {
  EXPECT_EQ(loomStreamCreate(nullptr), loomInvalidArgument);
  int notAStream = 0;
  EXPECT_EQ(loomStreamSynchronize(&notAStream), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("not a live stream"), std::string::npos);
  EXPECT_EQ(loomStreamQuery(nullptr), loomInvalidArgument);
  EXPECT_EQ(loomStreamDestroy(&notAStream), loomInvalidArgument);
  loomStream_t s = nullptr;
  ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
  EXPECT_EQ(loomStreamQuery(s), loomSuccess) << "an empty stream is complete";
  EXPECT_EQ(loomStreamSynchronize(s), loomSuccess);
  EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
  EXPECT_EQ(loomStreamDestroy(s), loomInvalidArgument) << "destroyed twice";
}

}  // namespace
