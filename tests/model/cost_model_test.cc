// The allreduce shapes both cost models read (model/cost_model.h), against hand-computed values and the
// properties any model must have; and the paper planner built on them choosing what the shapes imply.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/cost_model.h"

namespace loom {
namespace {

ShapeCase at(double bytes, int n, int hosts) {
  ShapeCase c;
  c.bytes = bytes, c.nranks = n, c.hosts = hosts;
  return c;
}

TEST(CostModel, AllReduceShapesByHand) {
  // 8 ranks on one host: the ring hands over 2(n-1) = 14 times and each link carries 2(n-1)/n = 1.75 S.
  const AlgoShape ring = allReduceShape(Algo::Ring, at(1 << 20, 8, 1));
  EXPECT_DOUBLE_EQ(ring.steps, 14);
  EXPECT_DOUBLE_EQ(ring.linkBytes, 1.75);
  // Recursive halving/doubling: log2(8) = 3 rounds each way, the same bytes as the ring.
  const AlgoShape rhd = allReduceShape(Algo::Rhd, at(1 << 20, 8, 1));
  EXPECT_LT(rhd.steps, ring.steps);
  EXPECT_DOUBLE_EQ(rhd.linkBytes, ring.linkBytes);
  // Oneshot: every rank reads the 7 others' inputs; across 2 hosts of 4 a host's links carry 4 x 4 S.
  EXPECT_DOUBLE_EQ(allReduceShape(Algo::OneShot, at(4096, 8, 1)).linkBytes, 7);
  EXPECT_DOUBLE_EQ(allReduceShape(Algo::OneShot, at(4096, 8, 2)).linkBytes, 16);
  // Hier: chains of 3 hand-overs each way inside a host of 4, a ring of 2 hosts moving S each way.
  const AlgoShape hier = allReduceShape(Algo::Hier, at(1 << 20, 8, 2));
  EXPECT_DOUBLE_EQ(hier.hostSteps, 6);
  EXPECT_DOUBLE_EQ(hier.steps, 2);
  EXPECT_DOUBLE_EQ(hier.linkBytes, 1);
  EXPECT_DOUBLE_EQ(allReduceShape(Algo::Hier, at(1 << 20, 8, 1)).linkBytes, 0);  // no network on one host
  // Flat is not an allreduce.
  EXPECT_FALSE(allReduceShape(Algo::Flat, at(1 << 20, 8, 1)).applies);
  // rhd across 4 hosts of one rank: 2 rounds each way, one exchange on the wire each (4 steps, fewer
  // than the ring's 6), with no more memory work than on one host (its rounds land without a copy).
  const AlgoShape rhdNet = allReduceShape(Algo::Rhd, at(1 << 20, 4, 4));
  EXPECT_DOUBLE_EQ(rhdNet.steps, 4);
  EXPECT_LT(rhdNet.steps, allReduceShape(Algo::Ring, at(1 << 20, 4, 4)).steps);
  EXPECT_LT(rhdNet.passes, allReduceShape(Algo::Rhd, at(1 << 20, 4, 1)).passes);
  // 3 hosts: the third rank is folded in before the one round each way and out after: 4 exchanges.
  EXPECT_DOUBLE_EQ(allReduceShape(Algo::Rhd, at(1 << 20, 3, 3)).steps, 4);
}

TEST(CostModel, ShapesGrowWithRanksAndSlices) {
  for (Algo a : {Algo::Ring, Algo::Tree, Algo::Rhd, Algo::OneShot}) {
    double steps = 0;
    for (int n : {2, 4, 8, 16, 64}) {
      const AlgoShape s = allReduceShape(a, at(1 << 20, n, 1));
      EXPECT_GE(s.steps, steps) << algoName(a) << " at " << n << " ranks";
      steps = s.steps;
    }
  }
  // The pipelined tree pays a hand-over per slot-sized slice.
  EXPECT_GT(allReduceShape(Algo::Tree, at(64 << 20, 8, 1)).steps,
            allReduceShape(Algo::Tree, at(256 << 10, 8, 1)).steps);
}

TEST(CostModel, ExchangesCrossAtTheDuplexSpeedChainsAtTheOneWaySpeed) {
  // 2 hosts x 1 rank, 16 MB: the ring allreduce moves S each way at once (netDuplexGBs), the broadcast
  // chain S one way (netGBs).  Halving the duplex speed adds exactly S / duplex (slowed past the cache
  // by netSlowdown) to the allreduce and nothing to the broadcast; the spec round-trips the new key.
  CostModel m;
  m.netGBs = 4.0, m.netDuplexGBs = 2.0;
  const size_t S = 16u << 20, slot = 1u << 20;
  const double ar = predictUs(m, Algo::Ring, CollType::AllReduce, S, 2, 2, slot);
  const double bc = predictUs(m, Algo::Ring, CollType::Broadcast, S, 2, 2, slot);
  const CallCost arCost = callCost(m, Algo::Ring, CollType::AllReduce, S, 2, 2, slot);
  const CallCost bcCost = callCost(m, Algo::Ring, CollType::Broadcast, S, 2, 2, slot);
  EXPECT_TRUE(arCost.bothWays);
  EXPECT_FALSE(bcCost.bothWays);
  EXPECT_NEAR(ar - arCost.latencyUs - arCost.memoryUs, arCost.netSlowdown * S * 1e-3 / 2.0, 1e-6 * ar);
  EXPECT_NEAR(bc - bcCost.latencyUs - bcCost.memoryUs, bcCost.netSlowdown * S * 1e-3 / 4.0, 1e-6 * bc);
  CostModel slower = m;
  slower.netDuplexGBs = 1.0;
  EXPECT_NEAR(predictUs(slower, Algo::Ring, CollType::AllReduce, S, 2, 2, slot) - ar,
              arCost.netSlowdown * S * 1e-3 / 2.0, 1e-6 * ar);
  EXPECT_DOUBLE_EQ(predictUs(slower, Algo::Ring, CollType::Broadcast, S, 2, 2, slot), bc);
  CostModel back;
  std::string why;
  ASSERT_TRUE(CostModel::parseSpec(slower.spec(), &back, &why)) << why;
  EXPECT_DOUBLE_EQ(back.netDuplexGBs, 1.0);
  EXPECT_DOUBLE_EQ(back.netGBs, 4.0);
}

TEST(CostModel, WholeMessageTransfersCrossAtTheDirectSpeed) {
  // 2 hosts x 1 rank, 16 MB: alltoall, flat allgather, rhd and oneshot above a slot hand the transport
  // whole messages (netDirectGBs); the ring streams slots (netDuplexGBs), and so does oneshot within
  // one slot.  Halving the direct speed adds exactly each one's bytes again to the first (16 MB calls:
  // messages of 8-16 MB) and nothing to the others; the spec round-trips the key.
  CostModel m;
  m.netGBs = 4.0, m.netDuplexGBs = 3.0, m.netDirectGBs = 2.0;
  const size_t S = 16u << 20, slot = 1u << 20;
  CostModel slower = m;
  slower.netDirectGBs = 1.0;
  struct Case {
    Algo algo;
    CollType coll;
    size_t bytes;
    bool whole;
  };
  const Case cases[] = {{Algo::Flat, CollType::AllToAll, S, true},     {Algo::Flat, CollType::AllGather, S, true},
                        {Algo::Rhd, CollType::AllReduce, S, true},     {Algo::OneShot, CollType::AllReduce, S, true},
                        {Algo::OneShot, CollType::AllReduce, slot, false}, {Algo::Ring, CollType::AllReduce, S, false},
                        {Algo::Ring, CollType::AllGather, S, false}};
  for (const Case& c : cases) {
    const CallCost cost = callCost(m, c.algo, c.coll, c.bytes, 2, 2, slot);
    ASSERT_TRUE(cost.applies) << algoName(c.algo);
    EXPECT_EQ(cost.wholeMessageBytes > 0, c.whole) << algoName(c.algo) << " " << c.bytes;
    EXPECT_GT(cost.netLinkBytes, 0) << algoName(c.algo);
    const double before = predictUs(m, c.algo, c.coll, c.bytes, 2, 2, slot);
    const double after = predictUs(slower, c.algo, c.coll, c.bytes, 2, 2, slot);
    const double wire = cost.netSlowdown * cost.netLinkBytes * static_cast<double>(c.bytes) * 1e-3;
    EXPECT_NEAR(after - before, c.whole ? wire / 2.0 : 0.0, 1e-6 * before) << algoName(c.algo) << " " << c.bytes;
  }
  // Smaller whole messages fit the sockets' buffers: a 512 KB block crosses at the streams' speed, a
  // 2 MB one at the direct speed, 1 MB in between.
  auto alltoallSpeed = [&](size_t block) {
    return netSpeedGBs(m, callCost(m, Algo::Flat, CollType::AllToAll, block, 2, 2, slot));
  };
  EXPECT_DOUBLE_EQ(alltoallSpeed(512u << 10), m.netDuplexGBs);
  EXPECT_DOUBLE_EQ(alltoallSpeed(2u << 20), m.netDirectGBs);
  EXPECT_GT(alltoallSpeed(1u << 20), m.netDirectGBs);
  EXPECT_LT(alltoallSpeed(1u << 20), m.netDuplexGBs);
  CostModel back;
  std::string why;
  ASSERT_TRUE(CostModel::parseSpec(slower.spec(), &back, &why)) << why;
  EXPECT_DOUBLE_EQ(back.netDirectGBs, 1.0);
  EXPECT_DOUBLE_EQ(back.netDuplexGBs, 3.0);
}

TEST(CostModel, AcrossHostsTheKernelMovesTheBytesThatCross) {
  // A byte that crosses hosts is copied by the kernel at the probed speed, and the probe streams slot by
  // slot: a call across hosts is charged one pass less per byte over its busiest connection and no
  // hand-over per slice.  2 ranks, 16 MB broadcast (2 passes, S over the connection): on one host its
  // latency grows with the slices; across 2 hosts it is the same for any slot and the memory time is
  // half the one-host call's.  The whole-message alltoall (1.5 passes, S over the connection) keeps a
  // third.  Past the cache the connection slows as the memory work does: not at 1 MB, at 16 MB, and the
  // prediction is the parts with the link time scaled by it.
  CostModel m;
  const size_t S = 16u << 20, small = 64u << 10, large = 1u << 20;
  const CallCost oneHostSmall = callCost(m, Algo::Ring, CollType::Broadcast, S, 2, 1, small);
  const CallCost oneHostLarge = callCost(m, Algo::Ring, CollType::Broadcast, S, 2, 1, large);
  EXPECT_GT(oneHostSmall.latencyUs, oneHostLarge.latencyUs + 100 * m.stepUs);
  const CallCost netSmall = callCost(m, Algo::Ring, CollType::Broadcast, S, 2, 2, small);
  const CallCost netLarge = callCost(m, Algo::Ring, CollType::Broadcast, S, 2, 2, large);
  EXPECT_DOUBLE_EQ(netSmall.latencyUs, netLarge.latencyUs);
  EXPECT_DOUBLE_EQ(netSmall.latencyUs, std::max(m.stepUs, m.netStepUs) + m.callUs);
  EXPECT_NEAR(netLarge.memoryUs, oneHostLarge.memoryUs / 2, 1e-9 * oneHostLarge.memoryUs);
  const CallCost a2aOne = callCost(m, Algo::Flat, CollType::AllToAll, S, 2, 1, large);
  const CallCost a2aNet = callCost(m, Algo::Flat, CollType::AllToAll, S, 2, 2, large);
  EXPECT_GT(a2aNet.wholeMessageBytes, 0);
  EXPECT_NEAR(a2aNet.memoryUs, a2aOne.memoryUs / 3, 1e-9 * a2aOne.memoryUs);
  EXPECT_DOUBLE_EQ(callCost(m, Algo::Ring, CollType::Broadcast, 1u << 20, 2, 2, large).netSlowdown, 1.0);
  EXPECT_GT(netLarge.netSlowdown, 1.0);
  EXPECT_DOUBLE_EQ(oneHostLarge.netSlowdown, 1.0);
  const double us = predictUs(m, Algo::Ring, CollType::Broadcast, S, 2, 2, large);
  EXPECT_NEAR(us - netLarge.latencyUs - netLarge.memoryUs, netLarge.netSlowdown * S * 1e-3 / m.netGBs, 1e-9 * us);
}

}  // namespace
}  // namespace loom
