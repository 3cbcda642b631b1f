// The decisions and their reasons on the fixtures: transport per pair, GDR, NIC per rank, MIG.
#include <gtest/gtest.h>

#include <set>

#include "base/params.h"
#include "topo/decisions.h"
#include "topo/topo_fixture.h"
#include "tests/common/scoped_env.h"

namespace loom {
namespace {

using testing::ScopedEnv;

Cluster one(const char* fixture) { return placeRanks({loadFixture(fixture)}); }

TEST(Decisions, NvSwitchServerUsesNvlinkAndItsOwnRail) {
  Cluster c = one("a100_nvswitch.xml");
  ASSERT_EQ(c.nranks(), 8);
  TopoPolicy policy;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b) {
      const Decision d = pairTransport(c, a, b, policy);
      EXPECT_EQ(d.choice, "p2p/nvlink");
      EXPECT_EQ(d.link, LinkKind::kDevicePeer) << "the kind the runtime matches transports by";
    }
  std::set<int> nics;
  for (int r = 0; r < 8; ++r) {
    const TopoSystem& s = c.sys(r);
    // Each GPU is bound to a NIC under its own switch, and no two GPUs share one (rails).
    EXPECT_EQ(s.path(c.ranks[r].device, c.ranks[r].nic).type, PathType::PIX) << c.ranks[r].nicReason;
    EXPECT_EQ(s.nodes[c.ranks[r].device].parent, s.nodes[c.ranks[r].nic].parent);
    nics.insert(c.ranks[r].nic);
    Decision gdr = gdrDecision(s, c.ranks[r].device, c.ranks[r].nic, policy);
    EXPECT_EQ(gdr.choice, "on") << gdr.reason;
  }
  EXPECT_EQ(nics.size(), 8u);
}

TEST(Decisions, PcieServerP2pWithinASwitchOnly) {
  Cluster c = one("l20_pcie.xml");
  TopoPolicy policy;
  EXPECT_EQ(pairTransport(c, 0, 1, policy).choice, "p2p/pcie");
  Decision d = pairTransport(c, 0, 2, policy);  // different switches: PHB, beyond the default PXB
  EXPECT_EQ(d.choice, "shm");
  EXPECT_EQ(d.link, LinkKind::kSharedMemory);
  EXPECT_NE(d.reason.find("PHB"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("LOOM_P2P_LEVEL=PXB"), std::string::npos) << d.reason;
  policy.p2pLevel = PathType::SYS;
  EXPECT_EQ(pairTransport(c, 0, 7, policy).choice, "p2p/pcie");
  // Two GPUs per switch share its one NIC; GDR on under the switch.
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(c.ranks[r].nic, c.ranks[r ^ 1].nic);
    EXPECT_EQ(c.sys(r).path(c.ranks[r].device, c.ranks[r].nic).type, PathType::PIX);
    EXPECT_EQ(gdrDecision(c.sys(r), c.ranks[r].device, c.ranks[r].nic, policy).choice, "on");
  }
  EXPECT_TRUE(gdrOnEveryRank(c, policy)) << "every GPU shares a switch with its NIC";
}

TEST(Decisions, GdrOffAcrossTheCpu) {
  for (const char* f : {"twosocket_pcie.xml", "vm_flat.xml"}) {
    Cluster c = one(f);
    TopoPolicy policy;
    for (int r = 0; r < c.nranks(); ++r) {
      Decision d = gdrDecision(c.sys(r), c.ranks[r].device, c.ranks[r].nic, policy);
      EXPECT_EQ(d.choice, "off") << f;
      EXPECT_NE(d.reason.find("PHB"), std::string::npos) << d.reason;
    }
    EXPECT_FALSE(gdrOnEveryRank(c, policy)) << f;
    policy.gdrLevel = PathType::PHB;  // the user can allow it
    EXPECT_EQ(gdrDecision(c.sys(0), c.ranks[0].device, c.ranks[0].nic, policy).choice, "on") << f;
  }
  {
    // One rank off is enough for "not every rank": on the two-socket server PHB lets all four in.
    Cluster two = one("twosocket_pcie.xml");
    TopoPolicy phb;
    phb.gdrLevel = PathType::PHB;
    EXPECT_TRUE(gdrOnEveryRank(two, phb));
    two.ranks[3].nic = -1;  // a rank without a NIC
    EXPECT_FALSE(gdrOnEveryRank(two, phb));
  }
  // Each GPU of the bare-metal server is bound to its own socket's NIC.
  Cluster c = one("twosocket_pcie.xml");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(c.sys(r).nodes[c.ranks[r].nic].cpu, c.sys(r).nodes[c.ranks[r].device].cpu);
  EXPECT_EQ(pairTransport(c, 0, 2, TopoPolicy()).choice, "shm");  // SYS
}

// A rank that joins a communicator is placed on the GPU current when it joined (by bus id, any case),
// on its MIG instance by the device's UUID (NVML's "MIG-" prefix or none), else on its NUMA node's CPU.
TEST(Decisions, JoiningRankIsPlacedOnItsGpuAndMigInstance) {
  const std::shared_ptr<const TopoSystem> s = loadFixture("h100_mig.xml");
  const int gpu0 = s->findBusId("0000:1b:00.0"), gpu1 = s->findBusId("0000:1c:00.0");
  ASSERT_GE(gpu0, 0);
  ASSERT_GE(gpu1, 0);
  RankPlace p = placeRank(*s, 0, 0, "0000:1b:00.0", "1g.10gb-1");
  EXPECT_EQ(p.device, gpu0);
  EXPECT_EQ(p.mig, 1);
  EXPECT_EQ(placeRank(*s, 0, 0, "0000:1b:00.0", "MIG-2G.20GB-2").mig, 2);
  EXPECT_EQ(placeRank(*s, 0, 0, "0000:1b:00.0", "GPU-not-an-instance").mig, -1) << "the whole GPU";
  p = placeRank(*s, 0, 0, "0000:1C:00.0", "");  // CUDA writes bus ids in upper case
  EXPECT_EQ(p.device, gpu1);
  EXPECT_EQ(p.mig, -1);
  // No GPU, or one the model does not hold: the CPU of the rank's NUMA node.
  for (const char* bus : {"", "0000:99:00.0", "0000:1d:00.0" /* the NIC */}) {
    p = placeRank(*s, 0, 0, bus, "");
    EXPECT_EQ(s->nodes[p.device].type, NodeType::Cpu) << bus;
  }
  // Two ranks on two MIG instances of one GPU never get P2P; on one instance they share the device.
  Cluster c;
  c.hosts = {s};
  c.hostNames = {"h"};
  c.ranks = {placeRank(*s, 0, 0, "0000:1b:00.0", "MIG-1g.10gb-0"), placeRank(*s, 0, 0, "0000:1b:00.0", "MIG-1g.10gb-1")};
  assignNics(&c);
  EXPECT_EQ(pairTransport(c, 0, 1, TopoPolicy()).choice, "shm");
  c.ranks[1] = placeRank(*s, 0, 0, "0000:1b:00.0", "MIG-1g.10gb-0");
  EXPECT_EQ(pairTransport(c, 0, 1, TopoPolicy()).choice, "local");
}

TEST(Decisions, MigInstancesNeverP2p) {
  Cluster c = one("h100_mig.xml");
  ASSERT_EQ(c.nranks(), 4);  // three MIG instances of GPU0 and the whole GPU1
  TopoPolicy policy;
  policy.p2pLevel = PathType::SYS;  // even when P2P is allowed everywhere
  Decision d = pairTransport(c, 0, 1, policy);
  EXPECT_EQ(d.choice, "shm");
  EXPECT_NE(d.reason.find("MIG"), std::string::npos);
  EXPECT_EQ(pairTransport(c, 2, 3, policy).choice, "shm");  // a MIG instance and another GPU
}

TEST(Decisions, SeveralRanksOnOneGpu) {
  Cluster c = one("l20_pcie.xml");
  c.ranks.push_back(c.ranks[0]);  // a second rank on GPU0 (MPS or a shared container)
  EXPECT_EQ(pairTransport(c, 0, 8, TopoPolicy()).choice, "local");
  EXPECT_EQ(pairTransport(c, 0, 8, TopoPolicy()).link, LinkKind::kDevicePeer);
}

TEST(Decisions, AcrossHostsIsTheNetworkThroughTheBoundNics) {
  std::vector<std::shared_ptr<const TopoSystem>> hosts;
  ASSERT_EQ(loadCluster(fixturePath("cluster2_a100.xml"), 1, &hosts), loomSuccess) << loomGetLastError(nullptr);
  Cluster c = placeRanks(hosts);
  ASSERT_EQ(c.nranks(), 16);
  Decision d = pairTransport(c, 3, 11, TopoPolicy());
  EXPECT_EQ(d.choice, "net");
  EXPECT_EQ(d.link, LinkKind::kNetwork);
  EXPECT_NE(d.reason.find("mlx5_3 -> mlx5_3"), std::string::npos) << d.reason;
}

TEST(Decisions, PolicyFromTheEnvironment) {
  ScopedEnv env;
  env.set("LOOM_P2P_LEVEL", "SYS");
  env.set("LOOM_NET_GDR_LEVEL", "phb");
  paramsReloadForTesting();
  TopoPolicy p;
  ASSERT_EQ(TopoPolicy::fromParams(&p), loomSuccess);
  EXPECT_EQ(p.p2pLevel, PathType::SYS);
  EXPECT_EQ(p.gdrLevel, PathType::PHB);
  env.set("LOOM_P2P_LEVEL", "FAST");
  paramsReloadForTesting();
  EXPECT_EQ(TopoPolicy::fromParams(&p), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("LOOM_P2P_LEVEL=FAST"), std::string::npos);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// A VM with one shared 200 Gb/s InfiniBand NIC and its plain Ethernet NIC (speed unknown): every GPU rank
// uses the RDMA NIC, as NCCL would; plain Ethernet only when the user asks for sockets, or when
// LOOM_IB_HCA leaves the RDMA NIC out.
TEST(Decisions, VmWithOneSharedRdmaNicAndEthernetKeepsGpuTrafficOnRdma) {
  Cluster c = one("vm_shared_rdma_eth.xml");
  ASSERT_EQ(c.nranks(), 8);
  for (int r = 0; r < 8; ++r) {
    const TopoSystem& s = c.sys(r);
    EXPECT_EQ(s.nodes[c.ranks[r].nic].name, "mlx5_0") << c.ranks[r].nicReason;
    EXPECT_NE(c.ranks[r].nicReason.find("an RDMA NIC before plain Ethernet (eth0)"), std::string::npos)
        << c.ranks[r].nicReason;
  }
  TopoPolicy sockets;
  sockets.preferRdma = false;  // LOOM_NET=socket: a guessed speed still comes after a reported one
  assignNics(&c, sockets);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(c.sys(r).nodes[c.ranks[r].nic].name, "mlx5_0") << c.ranks[r].nicReason;
    EXPECT_NE(c.ranks[r].nicReason.find("eth0's is assumed"), std::string::npos) << c.ranks[r].nicReason;
  }
  TopoPolicy otherHca;
  otherHca.ibHca = "mlx5_9";
  assignNics(&c, otherHca);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(c.sys(r).nodes[c.ranks[r].nic].name, "eth0") << c.ranks[r].nicReason;
    EXPECT_NE(c.ranks[r].nicReason.find("left out by LOOM_IB_HCA=mlx5_9"), std::string::npos) << c.ranks[r].nicReason;
  }
  TopoPolicy onlyEth;
  onlyEth.socketIfname = "eth";  // names plain NICs only: the RDMA NIC is still kept and still first
  assignNics(&c, onlyEth);
  EXPECT_EQ(c.sys(0).nodes[c.ranks[0].nic].name, "mlx5_0") << c.ranks[0].nicReason;
}

// RDMA NICs of different speeds: the fastest reported one wins over a slower one, and a NIC whose speed
// is not given never wins over a reported one, even from nearer (PIX against PHB).
TEST(Decisions, SeveralRdmaNicsOfDifferentSpeeds) {
  Cluster c = one("rdma_mixed_speeds.xml");
  ASSERT_EQ(c.nranks(), 2);
  const TopoSystem& s = c.sys(0);
  const int near = node(s, "mlx5_2");  // the NIC (its port has the same name)
  ASSERT_EQ(s.nodes[near].type, NodeType::Nic);
  ASSERT_TRUE(s.nicSpeedAssumed(near));
  ASSERT_TRUE(s.nicIsRdma(near));
  EXPECT_FALSE(s.nicSpeedAssumed(node(s, "mlx5_0")));
  EXPECT_EQ(s.path(c.ranks[0].device, near).type, PathType::PIX);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(s.nodes[c.ranks[r].nic].name, "mlx5_0") << c.ranks[r].nicReason;
    EXPECT_NE(c.ranks[r].nicReason.find("the fastest of the equally near NICs (mlx5_1"), std::string::npos)
        << c.ranks[r].nicReason;
  }
  EXPECT_TRUE(s.nicIsRdma(node(s, "mlx5_1")));  // RoCE on an Ethernet-class PCI function
  // With only the assumed-speed NIC and the RoCE NIC allowed, the reported 100 Gb/s one wins.
  TopoPolicy policy;
  policy.ibHca = "mlx5_1,mlx5_2";
  assignNics(&c, policy);
  EXPECT_EQ(s.nodes[c.ranks[0].nic].name, "mlx5_1") << c.ranks[0].nicReason;
  EXPECT_NE(c.ranks[0].nicReason.find("mlx5_2's is assumed"), std::string::npos) << c.ranks[0].nicReason;
}

}  // namespace
}  // namespace loom
