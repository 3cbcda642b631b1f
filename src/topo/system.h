// The model of one host: CPUs (one per NUMA node), PCI switches, GPUs, NICs, NVSwitches and the networks
// the NICs reach, joined by links with a type and a bandwidth; and the best path between any two nodes.
// Built from the NCCL-format XML tree (topo/xml.h), whether that came from a file or from detection.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom.h"
#include "topo/xml.h"

namespace loom {

enum class NodeType { Cpu, PciSwitch, Gpu, Nic, Net, NvSwitch };
enum class LinkType { Nvl, Pci, Sys, Net };
// Best to worst.  LOC: same device; NVL: NVLink (direct or through NVSwitches); NVB: NVLink through
// another GPU; PIX: through one PCIe switch; PXB: through several; PHB: through a CPU's root complex;
// SYS: across the link between CPU sockets; NET: across hosts.
enum class PathType { LOC, NVL, NVB, PIX, PXB, PHB, SYS, NET };

const char* nodeTypeName(NodeType t);
const char* pathTypeName(PathType t);
std::string bandwidthText(double gbs);  // "12.5 GB/s", as the decisions and routes print it
bool parsePathType(const std::string& s, PathType* out);

struct TopoNode {
  NodeType type = NodeType::Cpu;
  std::string name;   // CPU0, GPU3, mlx5_0, PCI/0000:17:00.0, NVS
  std::string busId;  // PCI devices, lower case
  int parent = -1;       // up the PCI tree towards the CPU (-1 for CPUs and NVSwitches)
  int parentLink = -1;
  int cpu = -1;          // the CPU (NUMA node) this hangs off
  int line = 0;          // source line in the XML it was built from
  std::vector<int> links;
  // CPU
  int numaId = -1, family = 0, model = 0, cores = 0;
  std::string vendor, affinity;
  // GPU
  int dev = -1, sm = 0, rank = -1;
  std::vector<std::string> migInstances;  // MIG instance uuids (none: the GPU is not partitioned)
  // NIC: the port speeds are on its NET children.  NET:
  double speedGBs = 0;
  bool gdr = false;        // NET: the NIC can read/write GPU memory (GPUDirect RDMA)
  std::string linkLayer;   // NET: IB, RoCE, iWARP, Ethernet
  bool rdma = false;          // NET: an RDMA port (IB, RoCE, iWARP; or, without link_layer, one NCCL's format
                              // describes with a guid or gdr="1", which only RDMA ports have)
  bool speedAssumed = false;  // NET: no speed was given; speedGBs is a guess
  std::string note;        // what was assumed, if anything
};

struct TopoLink {
  int a = -1, b = -1;
  LinkType type = LinkType::Pci;
  double bw = 0;  // GB/s, each direction
};

struct TopoPath {
  PathType type = PathType::NET;
  double bw = 0;           // the narrowest link
  std::vector<int> hops;   // directed links: 2*link + (0 if traversed a->b, 1 if b->a)
};

class TopoSystem {
 public:
  // Validates `root` (a <system>) and builds the graph.  Errors name the line: "file.xml:12: ...".
  static loomResult_t build(const XmlNode& root, const std::string& source, std::unique_ptr<TopoSystem>* out);

  std::string hostName;
  std::string source;              // file name or "detected"
  std::unique_ptr<XmlNode> xml;    // the tree it was built from: dumping writes it
  std::vector<TopoNode> nodes;
  std::vector<TopoLink> links;

  std::vector<int> ofType(NodeType t) const;
  // The node of a PCI bus id, in any case (the model's are lower case; CUDA writes upper case); -1 if none.
  int findBusId(const std::string& busId) const;
  int findName(const std::string& name) const;
  // Best path from a to b (NVLink when there is one, else the PCI tree); computed once, then cached.
  const TopoPath& path(int a, int b) const;
  // The NET nodes of NIC `nic` (its ports).
  std::vector<int> netsOf(int nic) const;
  // Bandwidth of a NIC: its fastest port.
  double nicBw(int nic) const;
  // Whether a NIC has an RDMA port; whether none of its ports' speeds was reported (all assumed).
  bool nicIsRdma(int nic) const;
  bool nicSpeedAssumed(int nic) const;
  // "GPU0 (0000:17:00.0)" style label.
  std::string label(int node) const;

 private:
  mutable std::vector<std::vector<TopoPath>> paths_;
  void computePaths() const;
  TopoPath treePath(int a, int b) const;
  bool nvlinkPath(int a, int b, TopoPath* out) const;
};

// Bandwidth facts (GB/s per direction), from ../shared/facts.md.
double pcieBandwidth(double gtPerSecond, int width);
double nvlinkBandwidth(int sm);
double interSocketBandwidth(const std::string& vendor, int family, int model);

}  // namespace loom
