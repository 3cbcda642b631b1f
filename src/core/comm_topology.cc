#include "core/comm_topology.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <string>

#include "core/comm.h"
#include "core/log.h"
#include "device/device_api.h"
#include "topo/decisions.h"
#include "topo/detect.h"
#include "topo/render.h"

namespace loom {

namespace {

// What each rank publishes in the first round: its NUMA node, its GPU and how long its host's XML is.
struct TopoHeader {
  int32_t numa;
  int32_t publishes;  // 1: this rank is the first on its host and sends the host's XML
  uint64_t xmlBytes;
  char gpuBus[24];  // PCI bus id of the rank's current GPU, lower case; empty for a CPU rank
};

// This rank's GPU: the device current on the joining thread, where a GPU runtime is present.
void currentGpu(char (&bus)[24]) {
  std::memset(bus, 0, sizeof bus);
  DeviceApi* dev = deviceApi();
  if (dev == nullptr) return;
  std::string id = dev->currentBusId();
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  std::strncpy(bus, id.c_str(), sizeof bus - 1);
}

constexpr uint64_t kMaxHostXml = 4u << 20;

}  // namespace

loomResult_t commBuildTopology(loomComm* comm) {
  const int n = comm->nranks, me = comm->rank;
  std::shared_ptr<const TopoSystem> local;
  LOOM_CHECK(localTopology(&local));
  LOOM_CHECK(TopoPolicy::fromParams(&comm->topoPolicy));

  // Only the first rank of each host sends its host's model; the others send nothing but their NUMA node.
  int firstOnHost = me;
  for (int r = 0; r < n; ++r)
    if (comm->peers[r].hostHash == comm->peers[me].hostHash) {
      firstOnHost = r;
      break;
    }
  const std::string xml = firstOnHost == me ? xmlWrite(*local->xml) : std::string();
  std::vector<TopoHeader> headers(n);
  headers[me] = TopoHeader{currentNumaNode(), firstOnHost == me, xml.size(), {}};
  currentGpu(headers[me].gpuBus);
  LOOM_CHECK(comm->bootstrap->allGather(headers.data(), sizeof(TopoHeader)));
  uint64_t maxBytes = 1;
  for (const TopoHeader& h : headers) {
    if (h.xmlBytes > kMaxHostXml)
      return setError(loomRemoteError, "a rank announced a %llu-byte topology (limit %llu)",
                      static_cast<unsigned long long>(h.xmlBytes), static_cast<unsigned long long>(kMaxHostXml));
    maxBytes = std::max(maxBytes, h.xmlBytes);
  }
  std::vector<char> blobs(maxBytes * n, 0);
  std::memcpy(blobs.data() + maxBytes * me, xml.data(), xml.size());
  LOOM_CHECK(comm->bootstrap->allGather(blobs.data(), maxBytes));

  // One model per host, in order of each host's first rank; this host keeps its own (already built).
  auto cluster = std::make_shared<Cluster>();
  std::map<uint64_t, int> hostIndex;
  std::vector<std::shared_ptr<const TopoSystem>> hosts;
  for (int r = 0; r < n; ++r) {
    const uint64_t hh = comm->peers[r].hostHash;
    if (hostIndex.count(hh)) continue;
    if (!headers[r].publishes)
      return setError(loomInternalError, "no rank published the topology of host %s", comm->peers[r].hostName);
    std::shared_ptr<const TopoSystem> sys = local;
    if (hh != comm->peers[me].hostHash) {
      std::unique_ptr<XmlNode> tree;
      std::unique_ptr<TopoSystem> built;
      const std::string text(blobs.data() + maxBytes * r, headers[r].xmlBytes);
      const std::string source = std::string("topology of ") + comm->peers[r].hostName;
      LOOM_CHECK(xmlParse(text, source, &tree));
      LOOM_CHECK(TopoSystem::build(*tree, source, &built));
      sys = std::move(built);
    }
    hostIndex[hh] = static_cast<int>(hosts.size());
    hosts.push_back(sys);
    cluster->hostNames.push_back(comm->peers[r].hostName);
  }
  cluster->hosts = hosts;
  // A rank's device: its GPU where it has one that its host's model holds, else the CPU of its NUMA node.
  for (int r = 0; r < n; ++r) {
    RankPlace p;
    p.host = hostIndex[comm->peers[r].hostHash];
    const TopoSystem& s = *hosts[p.host];
    std::vector<int> cpus = s.ofType(NodeType::Cpu);
    p.device = cpus.empty() ? -1 : cpus[0];
    for (int c : cpus)
      if (s.nodes[c].numaId == headers[r].numa) p.device = c;
    headers[r].gpuBus[sizeof headers[r].gpuBus - 1] = 0;  // another rank's bytes: terminated here
    const int gpu = headers[r].gpuBus[0] != 0 ? s.findBusId(headers[r].gpuBus) : -1;
    if (gpu >= 0 && s.nodes[gpu].type == NodeType::Gpu) p.device = gpu;
    cluster->ranks.push_back(p);
  }
  assignNics(cluster.get());
  comm->cluster = cluster;
  comm->gdrEverywhere = gdrOnEveryRank(*cluster, comm->topoPolicy);
  if (comm->gdrEverywhere && me == 0)
    LOOM_INFO(kTopo, "every rank's GPU and NIC allow GPUDirect RDMA: allgather runs flat (point to point), so "
              "GPU buffers cross hosts by RDMA where the transport offers it");
  LOOM_CHECK(planRoutes(*cluster, &comm->routes));
  LOOM_INFO(kTopo, "rank %d: %s; NIC: %s", me, cluster->describe(me).c_str(), cluster->ranks[me].nicReason.c_str());
  LOOM_INFO(kTopo, "ring 0 (%s): %zu ranks; trees: %s", comm->routes.rings[0].reason.c_str(),
            comm->routes.rings[0].ranks.size(), comm->routes.treeReason.c_str());
  return loomSuccess;
}

}  // namespace loom
