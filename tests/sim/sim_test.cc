// The simulator (sim/simulate.h) against hand-computed loads and bounds, against the selector's model
// where the two must agree, and for the properties any prediction must have (more bytes never cost
// less, more NICs never cost more).  Fixtures from tests/topo/fixtures; no hardware.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "sim/simulate.h"
#include "sim/traffic.h"
#include "tests/common/scoped_env.h"
#include "topo/decisions.h"
#include "topo/xml.h"

namespace loom {
namespace {

std::shared_ptr<const TopoSystem> system(const std::string& text) {
  std::unique_ptr<XmlNode> root;
  EXPECT_EQ(xmlParse(text, "inline", &root), loomSuccess) << loomGetLastError(nullptr);
  std::unique_ptr<TopoSystem> sys;
  EXPECT_EQ(TopoSystem::build(*root, "inline", &sys), loomSuccess) << loomGetLastError(nullptr);
  return std::shared_ptr<const TopoSystem>(std::move(sys));
}

// A host of one CPU (4 cores) with one 100 Gb/s Ethernet NIC on a PCIe Gen3 x16 link (~12 GB/s).
const char* const kCpuHost =
    "<system version=\"1\"><cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\" "
    "cores=\"4\"><pci busid=\"0000:01:00.0\" class=\"0x020000\" link_speed=\"8.0 GT/s PCIe\" link_width=\"16\">"
    "<nic><net name=\"eth0\" dev=\"0\" speed=\"100000\" port=\"1\" link_layer=\"Ethernet\"/></nic></pci></cpu>"
    "</system>";

struct Planned {
  Cluster cluster;
  RoutePlan plan;
};

Planned plan(std::vector<std::shared_ptr<const TopoSystem>> hosts, int cpuRanks = 0) {
  Planned p;
  p.cluster = placeRanks(std::move(hosts), cpuRanks);
  EXPECT_EQ(planRoutes(p.cluster, &p.plan), loomSuccess) << loomGetLastError(nullptr);
  return p;
}

Planned fixture(const std::string& name, int hosts) {
  std::vector<std::shared_ptr<const TopoSystem>> systems;
  EXPECT_EQ(loadCluster(std::string(LOOM_TOPO_FIXTURES) + "/" + name, hosts, &systems), loomSuccess)
      << loomGetLastError(nullptr);
  return plan(systems);
}

SimEstimate of(const std::vector<SimEstimate>& est, Algo a) {
  for (const SimEstimate& e : est)
    if (e.algo == a) return e;
  ADD_FAILURE() << "no estimate for " << algoName(a);
  return est.front();
}

TEST(Sim, RingOverTwoHostsLoadsEachPortWithWhatItSends) {
  // 2 hosts x 1 rank: the ring's one hop each way carries 2(n-1)/n = 1 S through each NIC port, and
  // with a measured 1.25 GB/s per connection that is the call's link time: S / 1.25 GB/s.
  Planned p = plan({system(kCpuHost), system(kCpuHost)}, 1);
  SimMachine m = defaultMachine(p.cluster);
  m.model.netGBs = m.model.netDuplexGBs = m.model.netDirectGBs = 1.25, m.capNet = true;
  const double S = 8 << 20;
  const SimEstimate ring = of(simulate(p.cluster, p.plan, m, CollType::AllReduce, 8 << 20), Algo::Ring);
  EXPECT_NEAR(ring.linkUs, S / 1.25e3, 1e-6 * ring.linkUs);
  ASSERT_FALSE(ring.busiest.empty());
  EXPECT_NE(ring.busiest.front().name.find("eth0"), std::string::npos) << ring.busiest.front().name;
  EXPECT_DOUBLE_EQ(ring.busiest.front().units, 1.0);
  EXPECT_DOUBLE_EQ(ring.busiest.front().gbs, 1.25);
  // Without the measured cap the narrowest link is the NIC's PCIe Gen3 x16 link, not its 12.5 GB/s port.
  const SimEstimate line = of(simulate(p.cluster, p.plan, defaultMachine(p.cluster), CollType::AllReduce, 8 << 20),
                               Algo::Ring);
  ASSERT_FALSE(line.busiest.empty());
  EXPECT_LT(line.busiest.front().gbs, 12.5);
  EXPECT_NEAR(line.linkUs, S / (1e3 * line.busiest.front().gbs), 1e-6 * line.linkUs);
}

TEST(Sim, RoutedNetworkLoadMatchesTheSelectorsShapes) {
  // One rank per host: whatever an algorithm sends between hosts leaves through the one NIC, so the
  // busiest port carries exactly what the selector's shape says its busiest connection carries, and
  // the simulator's link time is the selector's network term.
  for (int hosts : {2, 4, 8}) {
    std::vector<std::shared_ptr<const TopoSystem>> systems(hosts, system(kCpuHost));
    Planned p = plan(systems, 1);
    SimMachine m = defaultMachine(p.cluster);
    m.model.netGBs = m.model.netDuplexGBs = m.model.netDirectGBs = 1.0, m.capNet = true;
    const size_t bytes = 4 << 20;
    for (const SimEstimate& e : simulate(p.cluster, p.plan, m, CollType::AllReduce, bytes)) {
      if (e.algo == Algo::Rhd || e.algo == Algo::Tree) continue;  // their rounds and trees: below
      const CallCost c = callCost(m.model, e.algo, CollType::AllReduce, bytes, hosts, hosts, simStepBytes(true));
      EXPECT_NEAR(e.linkUs, c.netLinkBytes * bytes * 1e-3 / m.model.netGBs, 1e-6 * e.linkUs)
          << algoName(e.algo) << " on " << hosts << " hosts";
    }
  }
}

TEST(Sim, RhdRoundsCarryHalvingShares) {
  // Recursive halving/doubling at 4 hosts x 1 rank: rounds swap S/2 then S/4, and back: each round
  // lasts its own share at the port, 2 x (1/2 + 1/4) S in all, the ring's 2(n-1)/n S.
  std::vector<std::shared_ptr<const TopoSystem>> systems(4, system(kCpuHost));
  Planned p = plan(systems, 1);
  const Traffic t = trafficOf(CollType::AllReduce, Algo::Rhd, p.cluster, p.plan, 1);
  ASSERT_EQ(t.phases.size(), 4u);
  EXPECT_DOUBLE_EQ(t.phases[0].flows[0].units, 0.5);
  EXPECT_DOUBLE_EQ(t.phases[1].flows[0].units, 0.25);
  EXPECT_DOUBLE_EQ(t.phases[3].flows[0].units, 0.5);
  SimMachine m = defaultMachine(p.cluster);
  m.model.netGBs = m.model.netDuplexGBs = m.model.netDirectGBs = 1.0, m.capNet = true;
  const SimEstimate rhd = of(simulate(p.cluster, p.plan, m, CollType::AllReduce, 1 << 20), Algo::Rhd);
  EXPECT_NEAR(rhd.linkUs, 1.5 * (1 << 20) * 1e-3, 1e-6 * rhd.linkUs);
  // Non-powers of two fold in first: 3 ranks, the first two pair up, so one whole S crosses before.
  std::vector<std::shared_ptr<const TopoSystem>> three(3, system(kCpuHost));
  Planned q = plan(three, 1);
  const Traffic t3 = trafficOf(CollType::AllReduce, Algo::Rhd, q.cluster, q.plan, 1);
  ASSERT_GE(t3.phases.size(), 2u);
  ASSERT_EQ(t3.phases.front().flows.size(), 1u);
  EXPECT_EQ(t3.phases.front().flows[0].from, 0);
  EXPECT_EQ(t3.phases.front().flows[0].to, 1);
  EXPECT_DOUBLE_EQ(t3.phases.front().flows[0].units, 1.0);
}

TEST(Sim, OneHostWithoutLinksIsTheSelectorsModel) {
  // CPU ranks on one CPU share no link: every prediction is the selector's own, latency and memory.
  Planned p = plan({system(kCpuHost)}, 4);
  const SimMachine m = defaultMachine(p.cluster);
  for (CollType coll : {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter, CollType::Broadcast,
                        CollType::Reduce, CollType::AllToAll})
    for (size_t bytes : {size_t{4096}, size_t{1} << 20, size_t{64} << 20}) {
      const std::vector<SimEstimate> est = simulate(p.cluster, p.plan, m, coll, bytes);
      ASSERT_FALSE(est.empty());
      int chosen = 0;
      for (const SimEstimate& e : est) {
        EXPECT_DOUBLE_EQ(e.linkUs, 0);
        EXPECT_NEAR(e.us, predictUs(m.model, e.algo, coll, bytes, 4, 1, simStepBytes(false)), 1e-9 * e.us);
        chosen += e.chosen;
      }
      EXPECT_EQ(chosen, 1);
      EXPECT_TRUE(est.front().chosen);  // the same model: the fastest is the selector's choice
    }
}

TEST(Sim, NoAlgorithmBeatsTheBandwidthBoundAcrossHosts) {
  // An allreduce must move at least 2(H-1)/H x S out of every host (reduce-scatter and allgather of the
  // hosts' shares), at most at the sum of the host's NIC ports: no algorithm's link time may be below.
  for (const char* name : {"cluster2_a100.xml", "cluster4_l20.xml"}) {
    Planned p = fixture(name, 1);
    const int H = usedHosts(p.cluster);
    double nicGBs = 0;  // of host 0, every NIC a rank uses
    std::vector<int> seen;
    for (const RankPlace& r : p.cluster.ranks)
      if (r.host == 0 && r.nic >= 0 && std::find(seen.begin(), seen.end(), r.nic) == seen.end())
        seen.push_back(r.nic), nicGBs += p.cluster.hosts[0]->nicBw(r.nic);
    ASSERT_GT(nicGBs, 0) << name;
    const size_t bytes = size_t{1} << 30;
    const double bound = 2.0 * (H - 1) / H * static_cast<double>(bytes) / (1e3 * nicGBs);
    for (const SimEstimate& e : simulate(p.cluster, p.plan, defaultMachine(p.cluster), CollType::AllReduce, bytes))
      EXPECT_GE(e.linkUs, bound * (1 - 1e-9)) << name << " " << algoName(e.algo);
  }
}

TEST(Sim, MoreBytesNeverCostLessAndFewerRailsNeverCostLess) {
  Planned p = fixture("cluster2_a100.xml", 1);
  const SimMachine m = defaultMachine(p.cluster);
  for (CollType coll : {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter, CollType::Broadcast,
                        CollType::Reduce, CollType::AllToAll}) {
    double last = 0;
    for (size_t bytes = 1024; bytes <= (size_t{1} << 30); bytes *= 4) {
      const std::vector<SimEstimate> est = simulate(p.cluster, p.plan, m, coll, bytes);
      ASSERT_FALSE(est.empty());
      EXPECT_GE(est.front().us, last) << "collective " << static_cast<int>(coll) << " at " << bytes;
      last = est.front().us;
    }
  }
  // The same two servers with 4 of their 8 NICs: 4 rails instead of 8, never faster at any size.
  Planned four = p;
  {
    testing::ScopedEnv env{{"LOOM_IB_HCA", "mlx5_0,mlx5_2,mlx5_4,mlx5_6"}};
    paramsReloadForTesting();
    TopoPolicy policy;
    ASSERT_EQ(TopoPolicy::fromParams(&policy), loomSuccess);
    assignNics(&four.cluster, policy);
    ASSERT_EQ(planRoutes(four.cluster, &four.plan), loomSuccess);
  }
  ASSERT_EQ(four.plan.rings.size(), 4u);
  ASSERT_EQ(p.plan.rings.size(), 8u);
  for (size_t bytes : {size_t{1} << 20, size_t{64} << 20, size_t{1} << 30}) {
    const double eight = simulate(p.cluster, p.plan, m, CollType::AllReduce, bytes).front().us;
    const double half = simulate(four.cluster, four.plan, defaultMachine(four.cluster), CollType::AllReduce, bytes)
                            .front()
                            .us;
    EXPECT_GE(half, eight) << bytes;
  }
  // At 1 GB the ring runs on every rail: with half of them its link time doubles.
  const size_t big = size_t{1} << 30;
  EXPECT_NEAR(of(simulate(four.cluster, four.plan, m, CollType::AllReduce, big), Algo::Ring).linkUs /
                  of(simulate(p.cluster, p.plan, m, CollType::AllReduce, big), Algo::Ring).linkUs,
              2.0, 0.01);
}

TEST(Sim, FlatPatternsAggregateWhatEveryPairSends) {
  // Alltoall at 2 hosts x 8 GPUs: each GPU sends a block of S to each of the 8 GPUs of the other host,
  // all through its own NIC: 8 S per port each way.
  Planned p = fixture("cluster2_a100.xml", 1);
  const std::vector<SimEstimate> est = simulate(p.cluster, p.plan, defaultMachine(p.cluster), CollType::AllToAll,
                                                1 << 20);
  ASSERT_EQ(est.size(), 1u);
  EXPECT_EQ(est[0].algo, Algo::Flat);
  double mostOnPort = 0;
  for (const LinkUse& l : est[0].busiest) mostOnPort = std::max(mostOnPort, l.units);
  EXPECT_DOUBLE_EQ(mostOnPort, 8.0);
}

}  // namespace
}  // namespace loom
