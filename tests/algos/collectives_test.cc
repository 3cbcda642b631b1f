// The correctness matrix of broadcast, reduce, allgather, reducescatter and alltoall on real forked ranks: every
// type x op (where the collective reduces) x {out-of-place, in-place} x counts of testing::matrixCounts
// x roots {0, last} (where it has one), for 2, 3, 4 and 8 ranks.  Copies must be bit-exact; reductions
// within the tolerance of tests/common/reference.h.  allreduce has its own matrix (allreduce_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "algos/channels.h"
#include "runtime/comm.h"
#include "base/datatypes.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"
#include "tests/common/reference.h"

namespace loom {
namespace {

using testing::ScopedEnv;

using testing::countWrongCopied;
using testing::countWrongReduced;
using testing::fillInput;
using testing::runRanks;

enum class Coll { Broadcast, Reduce, AllGather, ReduceScatter, AllToAll };
const char* name(Coll c) {
  switch (c) {
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllGather: return "allgather";
    case Coll::AllToAll: return "alltoall";
    default: return "reducescatter";
  }
}

// Buffers reused from call to call: fresh multi-megabyte allocations cost the 8-rank cases more in page
// faults than the calls themselves.  Under AddressSanitizer each call gets its own exact allocation, so
// that a write past the end is reported even where it skips the guard byte.
std::vector<char>& scratch(int which, size_t bytes) {
  static thread_local std::vector<char> buffers[2];
  std::vector<char>& b = buffers[which];
#if defined(__SANITIZE_ADDRESS__)
  b.clear();
  b.shrink_to_fit();
#endif
  if (b.size() < bytes) b.resize(bytes);
  return b;
}

// One call and its check.  `count` is the count argument of the call.
void runOne(Coll c, int rank, int n, loomComm_t comm, loomDataType_t type, loomRedOp_t op, size_t count, int root,
            bool inPlace) {
  const size_t es = typeSize(type);
  const size_t sendCount = c == Coll::ReduceScatter || c == Coll::AllToAll ? count * n : count;
  const size_t recvCount = c == Coll::AllGather || c == Coll::AllToAll ? count * n : count;
  // In place one allocation holds both buffers, else recvBuf is recvbuff alone; either way its last byte
  // is a guard just past the end of what the call may write.
  const size_t recvBytes = (inPlace ? std::max(recvCount, sendCount) : recvCount) * es;
  std::vector<char>& sendBuf = scratch(0, sendCount * es + 1);
  std::vector<char>& recvBuf = scratch(1, recvBytes + 1);
  std::memset(recvBuf.data(), 0x5a, recvBytes + 1);  // no result of an earlier call can pass for this one's
  char* recv = recvBuf.data();
  char* send = sendBuf.data();
  if (inPlace) {
    if (c == Coll::AllGather) send = recv + rank * count * es;
    else send = recv;  // reducescatter's in-place layout: recv is send + rank*count (checked below)
  }
  fillInput(type, op, rank, sendCount, send);
  char* out = (c == Coll::ReduceScatter && inPlace) ? send + rank * count * es : recv;
  recvBuf[recvBytes] = 0x77;
  loomResult_t r = loomSuccess;
  switch (c) {
    case Coll::Broadcast: r = loomBroadcast(send, recv, count, type, root, comm, nullptr); break;
    case Coll::Reduce: r = loomReduce(send, recv, count, type, op, root, comm, nullptr); break;
    case Coll::AllGather: r = loomAllGather(send, recv, count, type, comm, nullptr); break;
    case Coll::ReduceScatter: r = loomReduceScatter(send, out, count, type, op, comm, nullptr); break;
    case Coll::AllToAll: r = loomAllToAll(send, recv, count, type, comm, nullptr); break;
  }
  ASSERT_EQ(r, loomSuccess) << name(c) << ": " << loomGetLastError(comm);
  std::string what = std::string(name(c)) + " rank " + std::to_string(rank) + "/" + std::to_string(n) + " " +
                     typeName(type) + " " + opName(op) + " count " + std::to_string(count) + " root " +
                     std::to_string(root) + (inPlace ? " in-place" : " out-of-place");
  std::string first;
  size_t wrong = 0;
  switch (c) {
    case Coll::Broadcast: wrong = countWrongCopied(type, op, root, 0, count, recv, &first); break;
    case Coll::Reduce:
      if (rank == root) wrong = countWrongReduced(type, op, n, 0, count, recv, &first);
      break;
    case Coll::AllGather:
      for (int b = 0; b < n; ++b) wrong += countWrongCopied(type, op, b, 0, count, recv + b * count * es, &first);
      break;
    case Coll::ReduceScatter: wrong = countWrongReduced(type, op, n, rank * count, count, out, &first); break;
    case Coll::AllToAll:  // block p came from rank p's block for us
      for (int p = 0; p < n; ++p)
        wrong += countWrongCopied(type, op, p, rank * count, count, recv + p * count * es, &first);
      break;
  }
  EXPECT_EQ(wrong, 0u) << what << ": " << first;
  EXPECT_EQ(recvBuf[recvBytes], 0x77) << what << ": wrote past the end of recvbuff";
}

struct Case {
  Coll coll;
  int nranks;
  const char* net;  // "": shared memory; else LOOM_SHM_DISABLE=1 and this network transport (LOOM_NET)
};

class CollectiveMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(CollectiveMatrix, EveryTypeOpCountPlacementAndRoot) {
  ScopedEnv env;
  const Case k = GetParam();
  const bool reduces = k.coll == Coll::Reduce || k.coll == Coll::ReduceScatter;
  const bool rooted = k.coll == Coll::Broadcast || k.coll == Coll::Reduce;
  if (*k.net != 0) {
    env.set("LOOM_SHM_DISABLE", "1");
    env.set("LOOM_NET", k.net);
    env.set("UCX_TLS", "tcp");  // UCX between hosts here is tcp
  }
  runRanks(k.nranks, [&](int rank, loomComm_t comm) {
    for (int root : rooted ? std::vector<int>{0, k.nranks - 1} : std::vector<int>{-1}) {
      for (int t = 0; t < loomNumTypes; ++t) {
        for (int o = 0; o < (reduces ? loomNumOps : 1); ++o) {
          for (size_t count : testing::matrixCounts(k.nranks)) {
            for (bool inPlace : {false, true}) {
              runOne(k.coll, rank, k.nranks, comm, static_cast<loomDataType_t>(t), static_cast<loomRedOp_t>(o),
                     count, root, inPlace);
              if (::testing::Test::HasFatalFailure()) return;
            }
          }
        }
      }
    }
  }, 900);
}

std::vector<Case> allCases() {
  std::vector<Case> v;
  for (Coll c : {Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll}) {
    for (int n : {2, 3, 4, 8}) v.push_back({c, n, ""});
    for (const char* net : {LOOM_TEST_NETS}) v.push_back({c, 3, net});  // the same matrix over the network
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectiveMatrix, ::testing::ValuesIn(allCases()), [](const auto& p) {
  return std::string(name(p.param.coll)) + "_" + std::to_string(p.param.nranks) + "ranks" +
         (*p.param.net != 0 ? std::string("_") + p.param.net : std::string());
});

// The two ring collectives besides allreduce, on a few types, ops and counts (both placements).
void ringCalls(int rank, int n, loomComm_t comm) {
  for (Coll c : {Coll::AllGather, Coll::ReduceScatter}) {
    for (loomDataType_t type : {loomFloat32, loomInt32, loomFloat64}) {
      for (loomRedOp_t op : {loomSum, loomMax, loomAvg}) {
        if (c == Coll::AllGather && op != loomSum) continue;
        if (op == loomAvg && type == loomInt32) continue;
        for (size_t count : {size_t{1}, size_t{7}, size_t{5000}, size_t{100003}}) {
          for (bool inPlace : {false, true}) {
            runOne(c, rank, n, comm, type, op, count, -1, inPlace);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Allgather and reducescatter run around the topology's planned ring, not in rank order: with the plan
// 0 -> 2 -> 1 -> 3, ranks 0 and 2 become neighbours, which rank order never makes them.
TEST(RingCollectives, FollowThePlannedRing) {
  ScopedEnv env;
  env.set("LOOM_ALGO", "ring");  // allgather could also go flat, which connects every pair
  runRanks(4, [&](int rank, loomComm_t comm) {
    ASSERT_FALSE(comm->routes.rings.empty());
    comm->routes.rings.resize(1);
    comm->routes.rings[0].ranks = {0, 2, 1, 3};
    const bool before = rank == 0 || rank == 2 ? comm->connection(2 - rank, 0).connected() : false;
    ringCalls(rank, 4, comm);
    if (rank == 0 || rank == 2) {
      EXPECT_FALSE(before) << "connected before the calls: the test proves nothing";
      EXPECT_TRUE(comm->connection(2 - rank, 0).connected());
    }
  }, 600);
}

// LOOM_NCHANNELS splits large allgather and reducescatter calls: every channel's share of every block
// runs on its own connections, exact whatever the split (counts that divide neither by the channels
// nor by the ranks).
TEST(RingCollectives, ChannelsSplitTheRing) {
  ScopedEnv env;
  env.set("LOOM_ALGO", "ring");
  env.set("LOOM_NCHANNELS", "3");
  env.set("LOOM_SHM_SLOT_SIZE", "4K");  // 3 channels from 3 x 4 KB per block on
  runRanks(3, [&](int rank, loomComm_t comm) {
    ringCalls(rank, 3, comm);
    ASSERT_GE(comm->connections.size(), 3u);
    for (int c = 0; c < 3; ++c) EXPECT_TRUE(comm->connection((rank + 1) % 3, c).connected()) << "channel " << c;
  }, 600);
}

}  // namespace
}  // namespace loom
