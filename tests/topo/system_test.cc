// The host model: path types and bandwidths on the fixtures, merging a PCI-only file with detection,
// and detection on this machine.
#include <gtest/gtest.h>

#include <dirent.h>
#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "topo/detect.h"
#include "topo/system.h"
#include "topo/topo_fixture.h"
#include "topo/verbs_ports.h"

namespace loom {
namespace {

TEST(Paths, NvSwitchServer) {
  auto s = loadFixture("a100_nvswitch.xml");
  EXPECT_EQ(s->ofType(NodeType::Gpu).size(), 8u);
  EXPECT_EQ(s->ofType(NodeType::Nic).size(), 8u);
  EXPECT_EQ(s->ofType(NodeType::NvSwitch).size(), 1u);  // six NVSwitch targets are one fabric node
  EXPECT_EQ(pathType(*s, "GPU0", "GPU7"), PathType::NVL);
  EXPECT_DOUBLE_EQ(s->path(node(*s, "GPU0"), node(*s, "GPU7")).bw, 12 * 20.0);  // 6 targets x 2 links x 20 GB/s
  EXPECT_EQ(pathType(*s, "GPU0", "mlx5_0"), PathType::PIX);
  EXPECT_EQ(pathType(*s, "GPU0", "mlx5_2"), PathType::PHB);
  EXPECT_EQ(pathType(*s, "GPU0", "mlx5_4"), PathType::SYS);
  EXPECT_EQ(pathType(*s, "CPU0", "CPU1"), PathType::SYS);
  EXPECT_DOUBLE_EQ(s->path(node(*s, "CPU0"), node(*s, "CPU1")).bw, 16.0);  // AMD socket link
}

TEST(Paths, PcieServer) {
  auto s = loadFixture("l20_pcie.xml");
  EXPECT_EQ(pathType(*s, "GPU0", "GPU1"), PathType::PIX);
  EXPECT_EQ(pathType(*s, "GPU0", "GPU2"), PathType::PHB);
  EXPECT_EQ(pathType(*s, "GPU0", "GPU4"), PathType::SYS);
  EXPECT_EQ(pathType(*s, "GPU3", "mlx5_1"), PathType::PIX);
  // Gen4 x16 GPUs under Gen5 switches: the GPU's own link is the narrowest.
  EXPECT_NEAR(s->path(node(*s, "GPU0"), node(*s, "GPU1")).bw, pcieBandwidth(16.0, 16), 1e-9);
  EXPECT_NEAR(pcieBandwidth(16.0, 16), 24.0, 0.5);
  EXPECT_NEAR(pcieBandwidth(8.0, 16), 12.0, 0.5);
  EXPECT_DOUBLE_EQ(s->path(node(*s, "GPU0"), node(*s, "GPU4")).bw, 22.0);  // Sapphire Rapids UPI
}

TEST(Paths, TwoSocketAndItsVmView) {
  auto bare = loadFixture("twosocket_pcie.xml");
  EXPECT_EQ(pathType(*bare, "GPU0", "GPU1"), PathType::PHB);
  EXPECT_EQ(pathType(*bare, "GPU0", "GPU2"), PathType::SYS);
  EXPECT_EQ(pathType(*bare, "GPU2", "mlx5_1"), PathType::PHB);
  auto vm = loadFixture("vm_flat.xml");
  EXPECT_EQ(vm->ofType(NodeType::Cpu).size(), 1u);
  EXPECT_EQ(pathType(*vm, "GPU0", "GPU2"), PathType::PHB);  // the VM hides the socket link
}

TEST(Merge, PciOnlyFileGetsDetectedDevices) {
  // A file with only the PCI tree (devices known by class) merged with a "detection" that knows the
  // GPU identity and the NIC's port by bus id; plus a detected device the file left out.
  std::unique_ptr<XmlNode> file, detected;
  ASSERT_EQ(xmlLoadFile(fixturePath("partial_pci_only.xml"), &file), loomSuccess);
  ASSERT_EQ(xmlParse("<system host=\"h\"><cpu numaid=\"0\" vendor=\"GenuineIntel\">"
                     "<pci busid=\"0000:11:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"89\"/></pci>"
                     "<pci busid=\"0000:18:00.0\" class=\"0x020700\"><nic><net name=\"mlx5_0\" speed=\"200000\" gdr=\"1\"/></nic></pci>"
                     "<pci busid=\"0000:99:00.0\" class=\"0x020000\"><nic><net name=\"eth9\" speed=\"25000\"/></nic></pci>"
                     "</cpu></system>",
                     "detected", &detected),
            loomSuccess);
  mergeTopology(file.get(), *detected);
  std::unique_ptr<TopoSystem> s;
  ASSERT_EQ(TopoSystem::build(*file, "merged", &s), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(s->ofType(NodeType::Gpu).size(), 2u);  // one identified, one known by class only
  EXPECT_EQ(s->nodes[node(*s, "GPU0")].sm, 89);
  EXPECT_GE(s->findName("mlx5_0"), 0);
  EXPECT_GE(s->findName("eth9"), 0);
  EXPECT_EQ(pathType(*s, "GPU0", "mlx5_0"), PathType::PIX);
  EXPECT_EQ(s->hostName, "h");
  EXPECT_EQ(s->nodes[node(*s, "CPU0")].vendor, "GenuineIntel");
}

TEST(Detect, ThisMachine) {
  std::unique_ptr<XmlNode> tree;
  ASSERT_EQ(detectHost(&tree), loomSuccess) << loomGetLastError(nullptr);
  std::unique_ptr<TopoSystem> s;
  ASSERT_EQ(TopoSystem::build(*tree, "detected", &s), loomSuccess) << loomGetLastError(nullptr);
  // As many CPUs as the kernel has NUMA nodes.
  int numa = 0;
  if (DIR* d = opendir("/sys/devices/system/node")) {
    while (dirent* e = readdir(d))
      if (strncmp(e->d_name, "node", 4) == 0 && isdigit(static_cast<unsigned char>(e->d_name[4]))) ++numa;
    closedir(d);
  }
  EXPECT_EQ(s->ofType(NodeType::Cpu).size(), static_cast<size_t>(std::max(numa, 1)));
  int cores = 0;
  for (int c : s->ofType(NodeType::Cpu)) cores += s->nodes[c].cores;
  EXPECT_EQ(cores, sysconf(_SC_NPROCESSORS_ONLN));
  // Every physical network interface (one with a PCI device in sysfs) is a NIC of the model.
  if (DIR* d = opendir("/sys/class/net")) {
    while (dirent* e = readdir(d)) {
      std::string dev = std::string("/sys/class/net/") + e->d_name + "/device/subsystem";
      char target[256] = {};
      if (e->d_name[0] == '.' || readlink(dev.c_str(), target, sizeof target - 1) <= 0) continue;
      if (std::string(target).find("/pci") == std::string::npos) continue;
      EXPECT_GE(s->findName(e->d_name), 0) << e->d_name << " is a PCI network device missing from the model";
    }
    closedir(d);
  }
  // The dump of the detected machine loads back.
  std::unique_ptr<XmlNode> again;
  ASSERT_EQ(xmlParse(xmlWrite(*s->xml), "dump", &again), loomSuccess);
  std::unique_ptr<TopoSystem> s2;
  EXPECT_EQ(TopoSystem::build(*again, "dump", &s2), loomSuccess) << loomGetLastError(nullptr);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(Verbs, PortSpeedFromTheSysfsRate) {
  EXPECT_EQ(verbsRateMbps("100 Gb/sec (4X EDR)"), 100000);
  EXPECT_EQ(verbsRateMbps("200 Gb/sec (4X HDR)"), 200000);
  EXPECT_EQ(verbsRateMbps("2.5 Gb/sec (1X SDR)"), 2500);
  EXPECT_EQ(verbsRateMbps("25 Gb/sec (1X EDR)"), 25000);
  EXPECT_EQ(verbsRateMbps("fast"), 0);        // unreadable: unknown, not a guess
  EXPECT_EQ(verbsRateMbps("10 Mb/sec"), 0);
  // This machine has no RDMA device: asking for one gives no ports rather than an error.
  EXPECT_TRUE(verbsPorts("no_such_rdma_device").empty());
}

// A sysfs tree as the kernel lays it out: an InfiniBand HCA with one active and one down port, a RoCE
// NIC, an iWARP RNIC.
TEST(Verbs, PortsFromASysfsTree) {
  char tmpl[] = "/tmp/loom-sysfs-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  auto write = [&](const std::string& rel, const std::string& text) {
    const std::string path = root + "/" + rel;
    ASSERT_EQ(std::system(("mkdir -p " + path.substr(0, path.rfind('/'))).c_str()), 0);
    std::ofstream(path) << text << "\n";
  };
  write("mlx5_0/node_type", "1: CA");
  write("mlx5_0/ports/1/state", "4: ACTIVE");
  write("mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)");
  write("mlx5_0/ports/1/link_layer", "InfiniBand");
  write("mlx5_0/ports/2/state", "1: DOWN");
  write("mlx5_0/ports/2/rate", "200 Gb/sec (4X HDR)");
  write("mlx5_0/ports/2/link_layer", "InfiniBand");
  write("mlx5_1/node_type", "1: CA");
  write("mlx5_1/ports/1/state", "4: ACTIVE");
  write("mlx5_1/ports/1/rate", "100 Gb/sec (4X EDR)");
  write("mlx5_1/ports/1/link_layer", "Ethernet");
  write("iwp0/node_type", "4: RNIC");
  write("iwp0/ports/1/state", "4: ACTIVE");
  write("iwp0/ports/1/rate", "25 Gb/sec (1X EDR)");
  write("iwp0/ports/1/link_layer", "Ethernet");
  auto ib = verbsPorts("mlx5_0", root);
  ASSERT_EQ(ib.size(), 1u);
  EXPECT_EQ(ib[0].name, "mlx5_0");
  EXPECT_EQ(ib[0].port, 1);
  EXPECT_EQ(ib[0].speedMbps, 200000);
  EXPECT_EQ(ib[0].linkLayer, "IB");
  auto roce = verbsPorts("mlx5_1", root);
  ASSERT_EQ(roce.size(), 1u);
  EXPECT_EQ(roce[0].linkLayer, "RoCE");
  EXPECT_EQ(roce[0].speedMbps, 100000);
  auto iwarp = verbsPorts("iwp0", root);
  ASSERT_EQ(iwarp.size(), 1u);
  EXPECT_EQ(iwarp[0].linkLayer, "iWARP");
  EXPECT_EQ(iwarp[0].speedMbps, 25000);
  EXPECT_EQ(std::system(("rm -rf " + root).c_str()), 0);
}

}  // namespace
}  // namespace loom
