// The p2p transport's place among the transports: one-sided, selected by its capabilities (never as a
// queue), within one host.  Its mapping of device buffers runs under the device path's tests
// (tests/device: DeviceEmulated/DevicePath.*/p2p on the emulated GPU; this machine has none).
#include <gtest/gtest.h>

#include "transport/p2p/p2p_transport.h"
#include "transport/registry.h"

namespace loom {
namespace {

TEST(P2pTransport, IsOneSidedDeviceMemoryWithinAHost) {
  P2pTransport p2p;
  const TransportCaps c = p2p.caps();
  EXPECT_EQ(c.link, LinkKind::kDevicePeer);
  EXPECT_FALSE(c.queues);
  EXPECT_TRUE(c.mapsPeerMemory);
  EXPECT_EQ(c.memory, static_cast<unsigned>(kDeviceMemory));
  PeerInfo a{}, b{}, far{};
  a.hostHash = b.hostHash = 7;
  far.hostHash = 8;
  TransportEstimate est;
  std::string why;
  EXPECT_TRUE(p2p.reaches(a, b, &est, &why)) << why;
  EXPECT_GT(est.bandwidthGBs, 0);
  EXPECT_FALSE(p2p.reaches(a, far, &est, &why));
  EXPECT_NE(why.find("different hosts"), std::string::npos) << why;
  // Asked for a queue anyway, it says so instead of crashing.
  ConnectRequest req{0, 1, 0, 1, &a, &b};
  ConnectInfo ci{};
  std::unique_ptr<RecvQueue> recv;
  EXPECT_EQ(p2p.createRecv(req, &ci, &recv), loomInternalError);
  EXPECT_EQ(recv, nullptr);
}

// Every transport of the build declares what it can do; exactly one maps peer memory, and every other
// offers queues (the communicator's connections choose among those by estimate).
TEST(Registry, EveryTransportDeclaresItsCapabilities) {
  int mapping = 0, queues = 0;
  for (const Transport* t : transports()) {
    const TransportCaps c = t->caps();
    mapping += c.mapsPeerMemory;
    queues += c.queues;
    EXPECT_NE(c.queues, c.mapsPeerMemory) << t->name() << ": queues or mapping, one of the two";
    EXPECT_EQ((c.memory & kHostMemory) != 0, c.link != LinkKind::kDevicePeer) << t->name() << ": host memory";
  }
  EXPECT_EQ(mapping, 1);
  EXPECT_GE(queues, 2);  // shm and socket in every build
}

}  // namespace
}  // namespace loom
