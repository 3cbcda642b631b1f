// Communicator life cycle across real ranks: InitAll, Split, LOOM_COMM_ID, and failures — timeouts,
// dead peers, mismatched calls and aborts — that must turn into errors naming the peer, never hangs.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm.h"
#include "base/params.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"

namespace {

using loom::testing::ScopedEnv;

using loom::testing::forkRanks;
using loom::testing::runRanks;
using loom::testing::secondsSince;
using loom::testing::timeBound;

TEST(Comm, InitAllDrivesOneThreadPerRank) {
  const int n = 4;
  loomComm_t comms[n];
  ASSERT_EQ(loomCommInitAll(comms, n, nullptr), loomSuccess) << loomGetLastError(nullptr);
  std::vector<std::thread> threads;
  std::vector<int> ok(n, 0);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<int32_t> v(10000, r + 1);
      if (loomAllReduce(v.data(), v.data(), v.size(), loomInt32, loomSum, comms[r], nullptr) != loomSuccess) return;
      ok[r] = v.front() == 10 && v.back() == 10;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ok[r], 1) << "rank " << r;
    int rank = -1;
    EXPECT_EQ(loomCommUserRank(comms[r], &rank), loomSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(loomCommDestroy(comms[r]), loomSuccess);
  }
  EXPECT_EQ(loomCommInitAll(nullptr, 2, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommInitAll(comms, 0, nullptr), loomInvalidArgument);
}

// Over the network transport, destroy meets the other ranks, except where they share this process:
// one thread destroying InitAll's comms one after another must not wait for the others.
TEST(Comm, InitAllOverSocketsDestroysOneAfterAnother) {
  ScopedEnv env;
  env.set("LOOM_SHM_DISABLE", "1");
  loom::paramsReloadForTesting();
  const int n = 2;
  loomComm_t comms[n];
  ASSERT_EQ(loomCommInitAll(comms, n, nullptr), loomSuccess) << loomGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::vector<int32_t> v(1000, 1);
      EXPECT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomInt32, loomSum, comms[r], nullptr), loomSuccess);
    });
  for (auto& t : threads) t.join();
  EXPECT_STREQ(comms[0]->connection(1, 0).transport->name(), "socket");
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < n; ++r) EXPECT_EQ(loomCommDestroy(comms[r]), loomSuccess);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), timeBound(5.0));
}

TEST(Comm, SplitByColorAndKey) {
  runRanks(5, [](int rank, loomComm_t comm) {
    // Colors: even / odd ranks; rank 4 opts out.  Keys reverse the order inside a color.
    int color = rank == 4 ? LOOM_SPLIT_NOCOLOR : rank % 2;
    loomComm_t sub = nullptr;
    ASSERT_EQ(loomCommSplit(comm, color, -rank, &sub, nullptr), loomSuccess) << loomGetLastError(comm);
    // The parent still works alongside the children, with every rank.
    int64_t w = 1;
    ASSERT_EQ(loomAllReduce(&w, &w, 1, loomInt64, loomSum, comm, nullptr), loomSuccess);
    EXPECT_EQ(w, 5);
    if (rank == 4) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    int n = 0, r = -1;
    loomCommCount(sub, &n);
    loomCommUserRank(sub, &r);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(r, rank < 2 ? 1 : 0) << "key -rank puts the higher old rank first";
    int64_t v = rank;
    ASSERT_EQ(loomAllReduce(&v, &v, 1, loomInt64, loomSum, sub, nullptr), loomSuccess) << loomGetLastError(sub);
    EXPECT_EQ(v, color == 0 ? 0 + 2 : 1 + 3);
    EXPECT_EQ(loomCommDestroy(sub), loomSuccess);
  });
}

// loomCommShrink without a failure: rank 3 stays out, the others make a communicator of their own and
// the old one keeps working beside it (rank 3 included).  The bad arguments first, each refused with a
// message and no communicator.
TEST(Comm, ShrinkLeavesTheExcludedRanksOut) {
  runRanks(4, [](int rank, loomComm_t comm) {
    const int three = 3, twice[2] = {1, 1}, outside = 4, me = rank;
    loomComm_t sub = reinterpret_cast<loomComm_t>(0x1);
    EXPECT_EQ(loomCommShrink(comm, &three, 1, nullptr, nullptr, 0), loomInvalidArgument);
    EXPECT_EQ(loomCommShrink(comm, &three, 1, &sub, nullptr, 7), loomInvalidArgument);
    EXPECT_EQ(sub, nullptr) << "a refused shrink leaves no communicator";
    EXPECT_EQ(loomCommShrink(comm, nullptr, 1, &sub, nullptr, 0), loomInvalidArgument);
    EXPECT_EQ(loomCommShrink(comm, &outside, 1, &sub, nullptr, 0), loomInvalidArgument);
    EXPECT_EQ(loomCommShrink(comm, twice, 2, &sub, nullptr, 0), loomInvalidArgument);
    EXPECT_EQ(loomCommShrink(comm, &three, 4, &sub, nullptr, 0), loomInvalidArgument);  // nobody would remain
    EXPECT_EQ(loomCommShrink(comm, &me, 1, &sub, nullptr, 0), loomInvalidUsage);  // excluded ranks do not call
    EXPECT_NE(std::string(loomGetLastError(comm)).find("excluded"), std::string::npos) << loomGetLastError(comm);
    if (rank != 3) {
      ASSERT_EQ(loomCommShrink(comm, &three, 1, &sub, nullptr, LOOM_SHRINK_DEFAULT), loomSuccess)
          << loomGetLastError(comm);
      int n = 0, r = -1;
      loomCommCount(sub, &n);
      loomCommUserRank(sub, &r);
      EXPECT_EQ(n, 3);
      EXPECT_EQ(r, rank);
      // It took its parent's host models and probed costs (nothing detected or measured again): the
      // same speeds, its three ranks placed as they were, one host, a ring of three.
      EXPECT_EQ(sub->costModel.probed, comm->costModel.probed);
      EXPECT_EQ(sub->costModel.memCopyGBs, comm->costModel.memCopyGBs);
      EXPECT_EQ(sub->costModel.cacheCopyGBs, comm->costModel.cacheCopyGBs);
      ASSERT_EQ(sub->cluster->nranks(), 3);
      EXPECT_EQ(sub->cluster->hosts.size(), 1u);
      EXPECT_EQ(sub->cluster->hosts[0], comm->cluster->hosts[0]);
      for (int i = 0; i < 3; ++i) EXPECT_EQ(sub->cluster->ranks[i].device, comm->cluster->ranks[i].device);
      EXPECT_EQ(sub->routes.rings[0].ranks.size(), 3u);
      std::vector<int64_t> v(1000, rank + 1);
      ASSERT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomInt64, loomSum, sub, nullptr), loomSuccess)
          << loomGetLastError(sub);
      for (int64_t x : v) ASSERT_EQ(x, 1 + 2 + 3);
      EXPECT_EQ(loomCommDestroy(sub), loomSuccess);
    }
    int64_t w = 1;
    ASSERT_EQ(loomAllReduce(&w, &w, 1, loomInt64, loomSum, comm, nullptr), loomSuccess) << loomGetLastError(comm);
    EXPECT_EQ(w, 4);
  });
}

// loomCommFinalize completes what was issued on a stream (no synchronize needed), meets the other ranks
// over sockets, and leaves only destroy: a later call is refused with a message.
TEST(Comm, FinalizeCompletesTheStreamsAndLeavesOnlyDestroy) {
  ScopedEnv env{{"LOOM_SHM_DISABLE", "1"}, {"LOOM_NET", "socket"}};
  runRanks(3, [](int rank, loomComm_t comm) {
    loomStream_t stream = nullptr;
    ASSERT_EQ(loomStreamCreate(&stream), loomSuccess);
    std::vector<float> v(1 << 18, static_cast<float>(rank + 1));
    ASSERT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, stream), loomSuccess);
    ASSERT_EQ(loomCommFinalize(comm), loomSuccess) << loomGetLastError(comm);
    for (float x : v) ASSERT_EQ(x, 6.0f);  // complete once finalize returned
    float w = 1;
    EXPECT_EQ(loomAllReduce(&w, &w, 1, loomFloat32, loomSum, comm, nullptr), loomInvalidUsage);
    EXPECT_NE(std::string(loomGetLastError(comm)).find("finalized"), std::string::npos) << loomGetLastError(comm);
    EXPECT_EQ(loomCommFinalize(comm), loomInvalidUsage);  // once
    EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  });  // runRanks destroys the communicator: it only frees now
}

// Polls loomCommGetAsyncError until the communicator's nonblocking work has ended (bounded).
loomResult_t waitNotInProgress(loomComm_t comm, double bound) {
  const auto t0 = std::chrono::steady_clock::now();
  loomResult_t state = loomInProgress;
  while (state == loomInProgress && secondsSince(t0) < bound) {
    if (loomCommGetAsyncError(comm, &state) != loomSuccess) return loomInternalError;
    if (state == loomInProgress) usleep(1000);
  }
  return state;
}

// config.blocking = 0: init, split, shrink and finalize return loomInProgress with the communicator set
// and finish in the background; calls in the meantime are loomInProgress; the results are exact.
TEST(Comm, NonblockingInitSplitShrinkAndFinalize) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  auto outcomes = forkRanks(3, [&](int rank) {
    loomConfig_t nb = LOOM_CONFIG_INITIALIZER;
    nb.blocking = 0;
    nb.timeoutSec = 20;
    if (rank == 2) usleep(300000);  // the others' init cannot end before rank 2 joins
    loomComm_t comm = nullptr;
    EXPECT_EQ(loomCommInitRankConfig(&comm, 3, id, rank, &nb), loomInProgress);
    if (comm == nullptr) return 2;
    float v = 1;
    if (rank == 0) {
      EXPECT_EQ(loomAllReduce(&v, &v, 1, loomFloat32, loomSum, comm, nullptr), loomInProgress);
      EXPECT_NE(std::string(loomGetLastError(comm)).find("still running"), std::string::npos);
      loomComm_t early = nullptr;
      EXPECT_EQ(loomCommShrink(comm, nullptr, 0, &early, nullptr, 0), loomInProgress);
      EXPECT_EQ(early, nullptr);
    }
    int n = 0;
    EXPECT_EQ(loomCommCount(comm, &n), loomSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(waitNotInProgress(comm, timeBound(15)), loomSuccess) << loomGetLastError(comm);
    std::vector<float> big(1 << 16, static_cast<float>(rank + 1));
    EXPECT_EQ(loomAllReduce(big.data(), big.data(), big.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess);
    for (float x : big) EXPECT_EQ(x, 6.0f);

    loomComm_t half = nullptr, two = nullptr;
    EXPECT_EQ(loomCommSplit(comm, rank % 2, rank, &half, &nb), loomInProgress);
    EXPECT_EQ(waitNotInProgress(half, timeBound(15)), loomSuccess) << loomGetLastError(half);
    v = static_cast<float>(rank);
    EXPECT_EQ(loomAllReduce(&v, &v, 1, loomFloat32, loomSum, half, nullptr), loomSuccess);
    EXPECT_EQ(v, rank % 2 == 0 ? 2.0f : 1.0f);
    const int out = 1;
    if (rank != 1) {
      EXPECT_EQ(loomCommShrink(comm, &out, 1, &two, &nb, LOOM_SHRINK_DEFAULT), loomInProgress);
      EXPECT_EQ(waitNotInProgress(two, timeBound(15)), loomSuccess) << loomGetLastError(two);
      v = 1;
      EXPECT_EQ(loomAllReduce(&v, &v, 1, loomFloat32, loomSum, two, nullptr), loomSuccess);
      EXPECT_EQ(v, 2.0f);
    }
    for (loomComm_t c : {comm, half, two}) {
      if (c == nullptr) continue;
      EXPECT_EQ(loomCommFinalize(c), loomInProgress);
      EXPECT_EQ(waitNotInProgress(c, timeBound(15)), loomSuccess) << loomGetLastError(c);
      EXPECT_EQ(loomAllReduce(&v, &v, 1, loomFloat32, loomSum, c, nullptr), loomInvalidUsage) << "finalized";
      EXPECT_EQ(loomCommDestroy(c), loomSuccess);
    }
    return ::testing::Test::HasFailure() ? 1 : 0;
  }, 60);
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// A nonblocking init that cannot finish (a rank never comes): loomCommAbort ends it at once, and one
// left alone fails at its timeout, reported by loomCommGetAsyncError with a message naming the wait.
TEST(Comm, NonblockingInitIsAbortableAndBounded) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  auto outcomes = forkRanks(2, [&](int rank) {
    loomConfig_t nb = LOOM_CONFIG_INITIALIZER;
    nb.blocking = 0;
    nb.timeoutSec = 2;
    loomComm_t comm = nullptr;
    EXPECT_EQ(loomCommInitRankConfig(&comm, 3, id, rank, &nb), loomInProgress);  // rank 2 never comes
    if (comm == nullptr) return 2;
    const auto t0 = std::chrono::steady_clock::now();
    if (rank == 0) {
      usleep(100000);
      EXPECT_EQ(loomCommAbort(comm), loomSuccess);
      EXPECT_LT(secondsSince(t0), timeBound(1.5)) << "the abort waited for the timeout";
      return ::testing::Test::HasFailure() ? 1 : 0;
    }
    const loomResult_t r = waitNotInProgress(comm, timeBound(10));
    EXPECT_TRUE(r == loomTimeout || r == loomRemoteError) << r;
    EXPECT_GE(secondsSince(t0), 0.1);
    EXPECT_NE(std::string(loomGetLastError(comm)), "") << "the message of the background failure";
    float v = 1;
    EXPECT_EQ(loomAllReduce(&v, &v, 1, loomFloat32, loomSum, comm, nullptr), r) << "stays failed";
    EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
    return ::testing::Test::HasFailure() ? 1 : 0;
  }, 60);
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

TEST(Comm, LaunchersCanUseCommId) {
  // LOOM_COMM_ID: every rank computes the same id itself; rank 0 runs the root at that address.
  int port = 20000 + getpid() % 20000;
  std::string addr = "127.0.0.1:" + std::to_string(port);
  auto outcomes = forkRanks(3, [&](int rank) {
    loom::testing::setInForkedRank("LOOM_COMM_ID", addr.c_str());
    loom::paramsReloadForTesting();
    loomUniqueId id;
    if (loomGetUniqueId(&id) != loomSuccess) return 2;
    loomComm_t comm;
    if (loomCommInitRank(&comm, 3, id, rank) != loomSuccess) {
      fprintf(stderr, "%s\n", loomGetLastError(nullptr));
      return 3;
    }
    int v = 1;
    int rc = loomAllReduce(&v, &v, 1, loomInt32, loomSum, comm, nullptr) == loomSuccess && v == 3 ? 0 : 4;
    // Communicators made from it get ids of their own (they once all took the job's, so two children of
    // a split met at the same root).
    loomComm_t sub = nullptr;
    if (rc == 0 && loomCommSplit(comm, rank == 0 ? 0 : 1, 0, &sub, nullptr) != loomSuccess) rc = 5;
    int w = 1;
    if (rc == 0 && (loomAllReduce(&w, &w, 1, loomInt32, loomSum, sub, nullptr) != loomSuccess || w != (rank == 0 ? 1 : 2)))
      rc = 6;
    if (rc != 0) fprintf(stderr, "rank %d: %s\n", rank, loomGetLastError(sub != nullptr ? sub : comm));
    if (sub != nullptr) loomCommDestroy(sub);
    loomCommDestroy(comm);
    return rc;
  }, 60);
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// One rank never joins the collective: the other gets loomTimeout naming it, within the timeout plus
// a little, and the communicator stays failed.
TEST(Comm, SilentPeerTimesOutNamingIt) {
  runRanks(2, [](int rank, loomComm_t comm) {
    if (rank == 1) {
      sleep(5);  // alive but silent
      return;
    }
    float v[4] = {};
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(loomAllReduce(v, v, 4, loomFloat32, loomSum, comm, nullptr), loomTimeout);
    double s = secondsSince(t0);
    EXPECT_GE(s, 1.9);
    EXPECT_LT(s, timeBound(4.0));
    EXPECT_NE(std::string(loomGetLastError(comm)).find("rank 1"), std::string::npos) << loomGetLastError(comm);
    loomResult_t async = loomSuccess;
    EXPECT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
    EXPECT_EQ(async, loomTimeout);
    EXPECT_EQ(loomAllReduce(v, v, 4, loomFloat32, loomSum, comm, nullptr), loomTimeout) << "stays failed";
  }, 60, /*commTimeoutSec=*/2);
}

// A peer killed mid-job: the survivor reports loomRemoteError naming it long before the timeout.
void deadPeerCase() {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  auto outcomes = forkRanks(3, [&](int rank) {
    loomComm_t comm;
    if (loomCommInitRank(&comm, 3, id, rank) != loomSuccess) return 2;
    std::vector<float> v(1 << 16, 1.0f);
    if (loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, nullptr) != loomSuccess) return 3;
    if (rank == 2) raise(SIGKILL);
    auto t0 = std::chrono::steady_clock::now();
    loomResult_t r = loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, nullptr);
    double s = secondsSince(t0);
    std::string msg = loomGetLastError(comm);
    loomCommDestroy(comm);
    // Whichever neighbour each survivor was waiting for, the message names the rank that died.
    bool good = r == loomRemoteError && s < timeBound(10) && msg.find("rank 2") != std::string::npos;
    if (!good) fprintf(stderr, "rank %d: result %d after %.2fs: %s\n", rank, r, s, msg.c_str());
    return good ? 0 : 1;
  }, 60);
  EXPECT_TRUE(outcomes[0].ok()) << outcomes[0].describe();
  EXPECT_TRUE(outcomes[1].ok()) << outcomes[1].describe();
  EXPECT_EQ(outcomes[2].signal, SIGKILL);
}

TEST(Comm, DeadPeerIsARemoteErrorNotAHang) { deadPeerCase(); }

// Over TCP the dead peer shows as a closed connection: the same error, naming the rank.
TEST(Comm, DeadPeerOverSocketsIsARemoteErrorNotAHang) {
  ScopedEnv env;
  env.set("LOOM_SHM_DISABLE", "1");
  deadPeerCase();
}

// Ranks that disagree on the count get loomInvalidUsage saying so, not a hang or garbage.
TEST(Comm, MismatchedCountsAreDetected) {
  runRanks(2, [](int rank, loomComm_t comm) {
    std::vector<int32_t> v(rank == 0 ? 100 : 200, 1);
    EXPECT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomInt32, loomSum, comm, nullptr), loomInvalidUsage);
    std::string msg = loomGetLastError(comm);
    EXPECT_NE(msg.find("mismatched calls"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count 100"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count 200"), std::string::npos) << msg;
  }, 60, /*commTimeoutSec=*/10);
}

// Different collectives, or different ops, meet: both ranks get loomInvalidUsage naming both calls.
TEST(Comm, MismatchedCollectivesAndOpsAreNamed) {
  runRanks(3, [](int rank, loomComm_t comm) {
    std::vector<float> v(1000, 1.0f);
    loomResult_t r = rank == 1 ? loomBroadcast(v.data(), v.data(), v.size(), loomFloat32, 0, comm, nullptr)
                               : loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, nullptr);
    std::string msg = loomGetLastError(comm);
    if (r == loomInvalidUsage) {
      EXPECT_NE(msg.find("broadcast(count 1000, float, root 0)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("allreduce(count 1000, float, sum)"), std::string::npos) << msg;
    } else {
      // A rank that only feeds data to the mismatched peer may instead see that peer stop answering.
      EXPECT_TRUE(r == loomTimeout || r == loomRemoteError) << r << ": " << msg;
    }
  }, 60, /*commTimeoutSec=*/3);
  runRanks(2, [](int rank, loomComm_t comm) {
    std::vector<int32_t> v(64, 1);
    EXPECT_EQ(loomAllReduce(v.data(), v.data(), v.size(), loomInt32, rank == 0 ? loomSum : loomMax, comm, nullptr),
              loomInvalidUsage);
    std::string msg = loomGetLastError(comm);
    EXPECT_NE(msg.find("int32, max"), std::string::npos) << msg;
  }, 60, /*commTimeoutSec=*/10);
}

// loomCommAbort from another thread ends a blocked call promptly.
TEST(Comm, AbortFromAnotherThreadUnblocksTheCall) {
  runRanks(2, [](int rank, loomComm_t comm) {
    if (rank == 1) {
      sleep(3);
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      loomCommAbort(comm);
    });
    float v[8] = {};
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(loomAllReduce(v, v, 8, loomFloat32, loomSum, comm, nullptr), loomRemoteError);
    EXPECT_LT(secondsSince(t0), timeBound(1.5));
    aborter.join();
  }, 60);
}

// The peers of a rank that aborts see it: they fail (not hang) naming that rank, while its process is
// still alive, long before their timeout.
void abortSeenByPeersCase() {
  runRanks(3, [](int rank, loomComm_t comm) {
    std::vector<float> v(1 << 16, 1.0f);
    if (rank == 0) {
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        loomCommAbort(comm);
      });
      EXPECT_NE(loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, nullptr), loomSuccess);
      aborter.join();
      sleep(4);  // alive: the peers must notice the abort itself, not this process exiting
      _exit(::testing::Test::HasFailure() ? 1 : 0);  // the comm is gone: runRanks must not destroy it
    }
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(600));  // joins after the abort
    // Rank 0 may have handed over all of its part of the first call before it aborted (then that call
    // completes, correctly); the next one cannot.
    loomResult_t r = loomSuccess;
    for (int call = 0; call < 3 && r == loomSuccess; ++call) {
      auto t0 = std::chrono::steady_clock::now();
      r = loomAllReduce(v.data(), v.data(), v.size(), loomFloat32, loomSum, comm, nullptr);
      if (r != loomSuccess) {
        EXPECT_LT(secondsSince(t0), timeBound(3.0)) << "peers must not wait for their timeout (10 s)";
      }
    }
    EXPECT_EQ(r, loomRemoteError) << loomGetLastError(comm);
    EXPECT_NE(std::string(loomGetLastError(comm)).find("rank 0"), std::string::npos) << loomGetLastError(comm);
  }, 60, /*commTimeoutSec=*/10);
}

TEST(Comm, AbortIsSeenByThePeers) { abortSeenByPeersCase(); }

TEST(Comm, AbortIsSeenByThePeersOverSockets) {
  ScopedEnv env;
  env.set("LOOM_SHM_DISABLE", "1");
  abortSeenByPeersCase();
}

}  // namespace

namespace {

// The communicator's topology view: every rank is placed on a host and a NUMA node of a model that all
// ranks agree on, and the planned ring covers every rank.
TEST(CommTopology, EveryRankIsPlaced) {
  runRanks(3, [](int rank, loomComm_t comm) {
    ASSERT_NE(comm->cluster, nullptr);
    const loom::Cluster& c = *comm->cluster;
    ASSERT_EQ(c.nranks(), 3);
    ASSERT_EQ(c.hosts.size(), 1u);  // one machine, one network namespace
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    EXPECT_NE(c.describe(rank).find(host), std::string::npos) << c.describe(rank);
    for (int a = 0; a < 3; ++a) {
      EXPECT_TRUE(c.sameHost(rank, a));
      EXPECT_EQ(c.sys(a).nodes[c.ranks[a].device].type, loom::NodeType::Cpu);
      if (a != rank) {
        EXPECT_EQ(loom::pairTransport(c, rank, a, comm->topoPolicy).choice, "shm");
      }
    }
    std::vector<int> ring = comm->routes.rings.at(0).ranks;
    std::sort(ring.begin(), ring.end());
    EXPECT_EQ(ring, (std::vector<int>{0, 1, 2}));
  });
}

TEST(CommTopology, BadTopologyFileIsAnInitErrorWithItsLine) {
  char path[] = "/tmp/loom_bad_topo_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char text[] = "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" link_width=\"5\"/>\n</cpu>\n</system>\n";
  ASSERT_EQ(write(fd, text, sizeof text - 1), static_cast<ssize_t>(sizeof text - 1));
  close(fd);
  const std::string expect = std::string(path) + ":3:";
  // The ranks need a shared id: make it in the parent, before forking.
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  auto outcomes = forkRanks(2, [&](int rank) {
    loom::testing::setInForkedRank("LOOM_TOPO_FILE", path);
    loom::paramsReloadForTesting();
    loomComm_t comm;
    loomResult_t r = loomCommInitRank(&comm, 2, id, rank);
    if (r != loomInvalidArgument) return 3;
    return std::string(loomGetLastError(nullptr)).find(expect) != std::string::npos ? 0 : 4;
  }, 60);
  unlink(path);
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

}  // namespace
