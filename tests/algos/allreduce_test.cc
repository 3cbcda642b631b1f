// The allreduce correctness matrix on real forked ranks: every type x op x {out-of-place, in-place} x
// counts of testing::matrixCounts for 2, 3, 4 and 8 ranks (more ranks than this machine has cores).
// Integers must match bit for bit; floats within the tolerance stated in tests/common/reference.h.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "algos/channels.h"
#include "kernels/reduce_kernels.h"
#include "algos/selector.h"
#include "runtime/comm.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"
#include "tests/common/reference.h"

namespace loom {
namespace {

using testing::ScopedEnv;

using testing::countWrong;
using testing::fillInput;
using testing::runRanks;

void matrix(int rank, loomComm_t comm, int nranks, const std::vector<loomDataType_t>& types) {
  for (loomDataType_t type : types) {
    for (int o = 0; o < loomNumOps; ++o) {
      auto op = static_cast<loomRedOp_t>(o);
      for (size_t count : testing::matrixCounts(nranks)) {
        size_t bytes = count * typeSize(type);
        std::vector<char> send(bytes + 1), recv(bytes + 1, 0x5a);
        for (bool inPlace : {false, true}) {
          fillInput(type, op, rank, count, send.data());
          char* out = inPlace ? send.data() : recv.data();
          out[bytes] = 0x77;  // guard byte: nothing may be written past the buffer
          ASSERT_EQ(loomAllReduce(send.data(), out, count, type, op, comm, nullptr), loomSuccess)
              << loomGetLastError(comm);
          std::string first;
          size_t wrong = countWrong(type, op, nranks, count, out, &first);
          EXPECT_EQ(wrong, 0u) << "rank " << rank << "/" << nranks << " " << typeName(type) << " " << opName(op)
                               << " count " << count << (inPlace ? " in-place" : " out-of-place") << ": " << first;
          EXPECT_EQ(out[bytes], 0x77) << "wrote past the end of the buffer";
          if (!inPlace && count > 0) {  // the input of an out-of-place call is untouched
            std::vector<char> again(bytes);
            fillInput(type, op, rank, count, again.data());
            EXPECT_EQ(std::memcmp(again.data(), send.data(), bytes), 0) << "sendbuff was modified";
          }
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

std::vector<loomDataType_t> allTypes() {
  std::vector<loomDataType_t> v;
  for (int t = 0; t < loomNumTypes; ++t) v.push_back(static_cast<loomDataType_t>(t));
  return v;
}

class AllReduceMatrix : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceMatrix, EveryTypeOpCountAndPlacement) {
  const int n = GetParam();
  runRanks(n, [&](int rank, loomComm_t comm) { matrix(rank, comm, n, allTypes()); }, 600);
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllReduceMatrix, ::testing::Values(2, 3, 4, 8),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

// The same matrix over each network transport (shared memory disabled), every algorithm.  UCX is held
// to its tcp transport, the one this machine has between hosts.
class AllReduceOverNetwork : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(AllReduceOverNetwork, EveryTypeOpCountAndPlacement) {
  ScopedEnv env;
  const char* net = std::get<0>(GetParam());
  env.set("LOOM_SHM_DISABLE", "1");
  env.set("LOOM_NET", net);
  env.set("UCX_TLS", "tcp");
  env.set("LOOM_ALGO", std::get<1>(GetParam()));
  runRanks(3, [&](int rank, loomComm_t comm) {
    matrix(rank, comm, 3, allTypes());
    EXPECT_STREQ(comm->connection((rank + 1) % 3, 0).transport->name(), net);
  }, 600);
}

INSTANTIATE_TEST_SUITE_P(Network, AllReduceOverNetwork,
                         ::testing::Combine(::testing::Values(LOOM_TEST_NETS),
                                            ::testing::Values("ring", "tree", "rhd", "oneshot", "hier")),
                         [](const auto& p) { return std::string(std::get<0>(p.param)) + "_" + std::get<1>(p.param); });

// Every algorithm, forced with LOOM_ALGO, through the same matrix.
class AllReduceAlgorithm : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(AllReduceAlgorithm, EveryTypeOpCountAndPlacement) {
  ScopedEnv env;
  const char* algo = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  env.set("LOOM_ALGO", algo);
  runRanks(n, [&](int rank, loomComm_t comm) {
    // The call really ran the forced algorithm.
    CollArgs probe{};
    probe.coll = CollType::AllReduce;
    probe.count = 1000;
    probe.type = loomFloat32;
    probe.op = loomSum;
    ASSERT_STREQ(algoName(rankCandidates(comm, probe).at(0).algo), algo);
    matrix(rank, comm, n, allTypes());
  }, 600);
}

INSTANTIATE_TEST_SUITE_P(Forced, AllReduceAlgorithm,
                         ::testing::Combine(::testing::Values("ring", "tree", "rhd", "oneshot", "hier"),
                                            ::testing::Values(2, 3, 4, 8)),
                         [](const auto& p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) + "ranks";
                         });

// Slots much smaller than the messages: many pipelined slices and FIFO wrap-arounds per call.
TEST(AllReduce, SmallSlotsManySlices) {
  ScopedEnv env;
  env.set("LOOM_SHM_SLOT_SIZE", "4K");
  env.set("LOOM_SHM_NSLOTS", "2");
  runRanks(3, [&](int rank, loomComm_t comm) {
    for (size_t count : {size_t{5000}, size_t{100003}}) {
      std::vector<float> buf(count);
      fillInput(loomFloat32, loomSum, rank, count, buf.data());
      ASSERT_EQ(loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, comm, nullptr), loomSuccess);
      std::string first;
      EXPECT_EQ(countWrong(loomFloat32, loomSum, 3, count, buf.data(), &first), 0u) << first;
    }
  });
}

// Many back-to-back calls: consecutive collectives must not bleed into each other.
TEST(AllReduce, ManyConsecutiveCalls) {
  runRanks(4, [&](int rank, loomComm_t comm) {
    for (int it = 0; it < 300; ++it) {
      int64_t v[3] = {rank + it, rank * it, 1};
      ASSERT_EQ(loomAllReduce(v, v, 3, loomInt64, loomSum, comm, nullptr), loomSuccess);
      EXPECT_EQ(v[0], 6 + 4 * it);
      EXPECT_EQ(v[1], 6 * it);
      EXPECT_EQ(v[2], 4);
    }
  });
}

// A few types, ops and counts: enough to cover splitting and ring order, quick enough to run often.
void smallMatrix(int rank, loomComm_t comm, int nranks) {
  for (loomDataType_t type : {loomFloat32, loomInt32, loomFloat64}) {
    for (loomRedOp_t op : {loomSum, loomMax, loomAvg}) {
      if (op == loomAvg && type == loomInt32) continue;
      for (size_t count : {size_t{0}, size_t{7}, size_t{5000}, size_t{100003}}) {
        std::vector<char> send(count * typeSize(type)), recv(count * typeSize(type));
        for (bool inPlace : {false, true}) {
          fillInput(type, op, rank, count, send.data());
          char* out = inPlace ? send.data() : recv.data();
          ASSERT_EQ(loomAllReduce(send.data(), out, count, type, op, comm, nullptr), loomSuccess)
              << loomGetLastError(comm);
          std::string first;
          EXPECT_EQ(countWrong(type, op, nranks, count, out, &first), 0u)
              << typeName(type) << " " << opName(op) << " count " << count << (inPlace ? " in place" : "") << ": "
              << first;
        }
      }
    }
  }
}

// LOOM_NCHANNELS splits a large ring allreduce: each channel's share runs on its own connections, and
// the results are exact whatever the split (counts that do not divide by the channels, nor by the ranks).
void channelsSplitTheRing(const char* net) {
  ScopedEnv env;
  env.set("LOOM_ALGO", "ring");
  env.set("LOOM_NCHANNELS", "3");
  env.set("LOOM_SHM_SLOT_SIZE", "4K");  // 3 channels from 3 x 3 ranks x 4 KB = 36 KB on
  env.set("LOOM_NET_SLOT_SIZE", "4K");
  if (net != nullptr) {
    env.set("LOOM_SHM_DISABLE", "1");
    env.set("LOOM_NET", net);
  }
  runRanks(3, [&](int rank, loomComm_t comm) {
    EXPECT_EQ(ringChannels(comm, 400000, 4096), 3);
    EXPECT_EQ(ringChannels(comm, 4000, 4096), 1) << "a small call stays on one channel";
    smallMatrix(rank, comm, 3);
    ASSERT_GE(comm->connections.size(), 3u);
    for (int c = 0; c < 3; ++c) EXPECT_TRUE(comm->connection((rank + 1) % 3, c).connected()) << "channel " << c;
  }, 600);
}

TEST(AllReduce, ChannelsSplitTheRing) { channelsSplitTheRing(nullptr); }
TEST(AllReduce, ChannelsSplitTheRingOverSockets) { channelsSplitTheRing("socket"); }

// The ring runs in the order the topology planned (comm->routes), not in rank order: with the plan
// 0 -> 2 -> 1 -> 3 rank 0 connects to rank 2, which rank order never makes it do.  A plan that does not
// hold every rank once is not followed.
TEST(AllReduce, TheRingFollowsThePlannedOrder) {
  ScopedEnv env;
  env.set("LOOM_ALGO", "ring");
  runRanks(4, [&](int rank, loomComm_t comm) {
    ASSERT_FALSE(comm->routes.rings.empty());
    comm->routes.rings.resize(1);
    comm->routes.rings[0].ranks = {0, 0, 1, 2};
    EXPECT_EQ(planRingOrder(comm, 0), (std::vector<int>{0, 1, 2, 3}));
    comm->routes.rings[0].ranks = {0, 2, 1, 3};
    EXPECT_EQ(planRingOrder(comm, 0), (std::vector<int>{0, 2, 1, 3}));
    EXPECT_EQ(planRingOrder(comm, 5), (std::vector<int>{0, 2, 1, 3})) << "channels beyond the plan reuse it";
    const bool before = comm->connection(rank == 0 ? 2 : rank == 2 ? 0 : (rank + 2) % 4, 0).connected();
    smallMatrix(rank, comm, 4);
    // Ring 0 -> 2 -> 1 -> 3 -> 0: 0 and 2 are neighbours there, never in rank order.
    if (rank == 0 || rank == 2) {
      EXPECT_FALSE(before) << "connected before the call: the test proves nothing";
      EXPECT_TRUE(comm->connection(rank == 0 ? 2 : 0, 0).connected());
    }
  }, 600);
}

// Across hosts the cost model charges every algorithm the bytes its busiest connection between hosts
// carries, at the network's bandwidth: bounds computed by hand from each algorithm's traffic.
TEST(AllReduce, TheModelChargesTheNetworkAcrossHosts) {
  CostModel m;
  m.netGBs = m.netDuplexGBs = m.netDirectGBs = 1.0;  // one way, both ways, whole messages: 1 us per KB
  m.netStepUs = 20;
  const size_t mb64 = 64u << 20, slot = 256u << 10;
  const double us64 = static_cast<double>(mb64) * 1e-3;  // 64 MB at 1 GB/s, in us
  // Broadcast along a chain of 2 hosts moves the whole message over the one link.
  EXPECT_GE(predictUs(m, Algo::Ring, CollType::Broadcast, mb64, 2, 2, slot), us64);
  // Ring allreduce: 2(n-1)/n of the message on each link; one-shot: the whole message to each of the 7
  // other hosts.
  EXPECT_GE(predictUs(m, Algo::Ring, CollType::AllReduce, mb64, 8, 8, slot), 1.75 * us64);
  EXPECT_GE(predictUs(m, Algo::OneShot, CollType::AllReduce, mb64, 8, 8, slot), 7 * us64);
  EXPECT_LT(predictUs(m, Algo::Ring, CollType::AllReduce, mb64, 8, 8, slot),
            predictUs(m, Algo::OneShot, CollType::AllReduce, mb64, 8, 8, slot));
  // On one host the network does not count; across hosts every large call is slower on a slower network,
  // and a small one pays the network's step.
  for (Algo a : {Algo::Ring, Algo::Tree, Algo::Rhd, Algo::OneShot, Algo::Hier}) {
    CostModel slow = m;
    slow.netGBs = slow.netDuplexGBs = slow.netDirectGBs = 0.5;
    EXPECT_EQ(predictUs(m, a, CollType::AllReduce, mb64, 4, 1, slot), predictUs(slow, a, CollType::AllReduce, mb64, 4, 1, slot))
        << algoName(a);
    EXPECT_GT(predictUs(slow, a, CollType::AllReduce, mb64, 4, 2, slot), predictUs(m, a, CollType::AllReduce, mb64, 4, 2, slot))
        << algoName(a);
    EXPECT_GE(predictUs(m, a, CollType::AllReduce, 8, 4, 2, slot), m.netStepUs) << algoName(a);
  }
}

// A parameter outside the range base/params.h declares for it is refused by init at once, naming the
// variable: never clamped, never a hang (LOOM_NET_NSLOTS=0 over sockets once waited LOOM_TIMEOUT).
TEST(AllReduce, ParametersOutOfRangeAreAnInitError) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"LOOM_NCHANNELS", "17"}, {"LOOM_NET_NSLOTS", "0"}, {"LOOM_SHM_NSLOTS", "65"},
      {"LOOM_SHM_SLOT_SIZE", "4100"}, {"LOOM_NET_SLOT_SIZE", "1K"}, {"LOOM_NSOCKS", "0"},
      {"LOOM_IB_QPS_PER_CONNECTION", "17"}, {"LOOM_IB_GDR_CACHE", "0"}};
  for (const auto& [name, value] : bad) {
    ScopedEnv env{{"LOOM_SHM_DISABLE", "1"}, {"LOOM_NET", "socket"}, {name, value}};
    const std::string wanted = std::string(name) + "=" + value;
    auto outcomes = testing::forkRanks(1, [&](int) {
      // Making the unique id reads the environment too (a launcher's rank 0 may start the root there).
      loomUniqueId id;
      loomComm_t comm;
      loomResult_t r = loomGetUniqueId(&id);
      if (r == loomSuccess) r = loomCommInitRank(&comm, 1, id, 0);
      if (r != loomInvalidArgument) return 1;
      return std::strstr(loomGetLastError(nullptr), wanted.c_str()) != nullptr ? 0 : 2;
    }, 60);
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_TRUE(outcomes[0].ok()) << wanted << ": " << outcomes[0].describe()
                                  << " (1: init did not fail, 2: message without the variable)";
  }
}

}  // namespace
}  // namespace loom
