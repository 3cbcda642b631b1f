// GPUs from NVML merged into the detected model: what addGpus makes of NVML's answers (fed here by
// hand: this machine has no GPU and no NVIDIA driver), and what NVML detection says on this machine.
#include <gtest/gtest.h>

#include "topo/gpu_detect.h"
#include "topo/system.h"
#include "topo/topo_fixture.h"

namespace loom {
namespace {

// Two GPUs known by PCI class only (as hwloc reports them), under one PCIe switch.
std::unique_ptr<XmlNode> pciOnlyHost() {
  std::unique_ptr<XmlNode> root;
  EXPECT_EQ(xmlParse(R"(<system version="1">
  <cpu numaid="0" arch="x86_64" cores="32">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:17:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0000:65:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
  </cpu>
</system>)", "host", &root), loomSuccess) << loomGetLastError(nullptr);
  return root;
}

std::unique_ptr<TopoSystem> build(const XmlNode& root) {
  std::unique_ptr<TopoSystem> sys;
  EXPECT_EQ(TopoSystem::build(root, "detected", &sys), loomSuccess) << loomGetLastError(nullptr) << "\n" << xmlWrite(root);
  return sys;
}

DetectedGpu gpu(const std::string& busId, int dev) {
  DetectedGpu g;
  g.busId = busId;
  g.dev = dev;
  g.sm = 90;
  g.computeMode = "default";
  return g;
}

TEST(GpuDetect, NvlinkPairBecomesAnNvlPath) {
  auto root = pciOnlyHost();
  DetectedGpu a = gpu("0000:17:00.0", 0), b = gpu("0000:65:00.0", 1);
  a.nvlinks.push_back({"0000:65:00.0", false, 4});
  b.nvlinks.push_back({"0000:17:00.0", false, 4});
  addGpus(root.get(), {a, b});
  auto sys = build(*root);
  ASSERT_EQ(sys->ofType(NodeType::Gpu).size(), 2u);
  EXPECT_EQ(pathType(*sys, "GPU0", "GPU1"), PathType::NVL);
  EXPECT_EQ(sys->nodes[node(*sys, "GPU1")].sm, 90);
  EXPECT_GT(sys->path(node(*sys, "GPU0"), node(*sys, "GPU1")).bw, 50.0);  // 4 links, not PCIe's ~25
  EXPECT_NE(xmlWrite(*root).find("compute_mode=\"default\""), std::string::npos);
}

TEST(GpuDetect, WithoutNvlinkThePairMeetsAtTheSwitch) {
  auto root = pciOnlyHost();
  addGpus(root.get(), {gpu("0000:17:00.0", 0), gpu("0000:65:00.0", 1)});
  auto sys = build(*root);
  EXPECT_EQ(pathType(*sys, "GPU0", "GPU1"), PathType::PIX);
}

TEST(GpuDetect, MigInstancesAreRecorded) {
  auto root = pciOnlyHost();
  DetectedGpu a = gpu("0000:17:00.0", 0);
  a.migUuids = {"MIG-aaaa", "MIG-bbbb", "MIG-cccc"};
  addGpus(root.get(), {a, gpu("0000:65:00.0", 1)});
  auto sys = build(*root);
  EXPECT_EQ(sys->nodes[node(*sys, "GPU0")].migInstances.size(), 3u);
  EXPECT_TRUE(sys->nodes[node(*sys, "GPU1")].migInstances.empty());
}

TEST(GpuDetect, LinksToAnNvSwitchMakeOneFabricNode) {
  auto root = pciOnlyHost();
  DetectedGpu a = gpu("0000:17:00.0", 0), b = gpu("0000:65:00.0", 1);
  a.nvlinks = {{"0000:c1:00.0", true, 9}, {"0000:c2:00.0", true, 9}};
  b.nvlinks = {{"0000:c1:00.0", true, 9}, {"0000:c2:00.0", true, 9}};
  addGpus(root.get(), {a, b});
  auto sys = build(*root);
  EXPECT_EQ(sys->ofType(NodeType::NvSwitch).size(), 1u);
  EXPECT_EQ(pathType(*sys, "GPU0", "GPU1"), PathType::NVL);
}

// A container shows NVML only some GPUs: links to the hidden ones are left out instead of failing the
// whole model as dangling, and a GPU the PCI walk did not see hangs off the first CPU.
TEST(GpuDetect, HiddenPeersAndUnseenGpusKeepTheModelValid) {
  auto root = pciOnlyHost();
  DetectedGpu a = gpu("0000:17:00.0", 0), c = gpu("0000:b3:00.0", 2);
  a.nvlinks.push_back({"0000:ca:00.0", false, 2});  // a GPU this container does not see
  addGpus(root.get(), {a, c});
  auto sys = build(*root);
  ASSERT_EQ(sys->ofType(NodeType::Gpu).size(), 3u);  // GPU1 still known by class; GPU2 added
  EXPECT_EQ(pathType(*sys, "GPU0", "GPU2"), PathType::PHB);
  EXPECT_EQ(sys->nodes[node(*sys, "GPU2")].busId, "0000:b3:00.0");
}

// This machine has no NVIDIA driver: detection says so and adds nothing.
TEST(GpuDetect, ThisMachineWithoutDriverReportsWhy) {
  std::string why;
  auto gpus = probeGpusWithNvml(&why);
  if (!gpus.empty()) GTEST_SKIP() << "this machine has GPUs: " << why;
  EXPECT_NE(why.find("NVML"), std::string::npos) << why;
}

}  // namespace
}  // namespace loom
