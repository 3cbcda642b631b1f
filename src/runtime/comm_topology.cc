#include "runtime/comm_topology.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "runtime/comm.h"
#include "base/log.h"
#include "device_runtime/device_api.h"
#include "topo/decisions.h"
#include "topo/detect.h"
#include "topo/render.h"

namespace loom {

namespace {

// What each rank publishes in the first round: its NUMA node, its GPU and how long its host's XML is.
struct TopoHeader {
  int32_t numa;
  int32_t publishes;  // 1: this rank is the first on its host and sends the host's XML
  int32_t failed;     // a loomResult_t: the first rank could not model its host; it sends the message instead
  uint64_t xmlBytes;
  char gpuBus[24];   // PCI bus id of the rank's current GPU; empty for a CPU rank
  char gpuUuid[48];  // its UUID (a MIG instance's own, on a partitioned GPU)
};

template <size_t N>
void copyTerminated(char (&to)[N], const std::string& from) {
  std::memset(to, 0, N);
  std::strncpy(to, from.c_str(), N - 1);
}

// This rank's GPU: the device current on the joining thread, where a GPU runtime is present.
void currentGpu(TopoHeader* h) {
  DeviceApi* dev = deviceApi();
  if (dev == nullptr) return;
  const std::string bus = dev->currentBusId();
  copyTerminated(h->gpuBus, bus);
  copyTerminated(h->gpuUuid, dev->currentUuid());
  // Now, while no call of this rank is in flight: a GPU rank's kernels would otherwise load inside its
  // first call on a device stream, which the stream is waiting for.
  if (!bus.empty() && dev->prepareCurrentDevice() != loomSuccess)
    LOOM_WARN(kInit, "readying GPU %s for loom failed (%s): %s; its first calls on device streams may hang",
              bus.c_str(), dev->name(), dev->lastErrorText().c_str());
}

constexpr uint64_t kMaxHostXml = 4u << 20;

// What every way to a communicator's topology ends with: the NIC of each rank and the routes.
loomResult_t placeCluster(loomComm* comm, std::shared_ptr<Cluster> cluster) {
  const int me = comm->rank;
  assignNics(cluster.get(), comm->topoPolicy);
  comm->cluster = cluster;
  comm->gdrEverywhere = gdrOnEveryRank(*cluster, comm->topoPolicy);
  if (comm->gdrEverywhere && me == 0)
    LOOM_INFO(kTopo, "every rank's GPU and NIC allow GPUDirect RDMA: allgather, allreduce and reduce-scatter run "
              "point to point, so GPU buffers cross hosts by RDMA where the transport offers it");
  LOOM_CHECK(planRoutes(*cluster, &comm->routes));
  LOOM_INFO(kTopo, "rank %d: %s; NIC: %s", me, cluster->describe(me).c_str(), cluster->ranks[me].nicReason.c_str());
  LOOM_INFO(kTopo, "ring 0 (%s): %zu ranks; trees: %s", comm->routes.rings[0].reason.c_str(),
            comm->routes.rings[0].ranks.size(), comm->routes.treeReason.c_str());
  return loomSuccess;
}

}  // namespace

loomResult_t commBuildTopology(loomComm* comm) {
  const int n = comm->nranks, me = comm->rank;
  LOOM_CHECK(TopoPolicy::fromParams(&comm->topoPolicy));

  // Only the first rank of each host models its host (hwloc, merged with LOOM_TOPO_FILE) and sends the
  // model; the others send nothing but their NUMA node and GPU, and take their host's model from it.
  // Detection costs ~16 ms of a core, reading sysfs: once per rank, it made most of a 256-process
  // init's topology phase (3.5 s).  Where the first rank cannot model its host (a bad LOOM_TOPO_FILE),
  // it sends its message instead, and every rank fails with it.
  const bool firstOnHost = comm->firstRankOf(&PeerInfo::hostHash);
  std::shared_ptr<const TopoSystem> local;
  loomResult_t detected = loomSuccess;
  std::string xml;
  if (firstOnHost) {
    detected = localTopology(&local);
    xml = detected == loomSuccess ? xmlWrite(*local->xml) : std::string(lastErrorDetail());
  }
  std::vector<TopoHeader> headers(n);
  headers[me] = TopoHeader{currentNumaNode(), firstOnHost, detected, xml.size(), {}, {}};
  currentGpu(&headers[me]);
  LOOM_CHECK(comm->bootstrap->allGather(headers.data(), sizeof(TopoHeader)));
  for (const TopoHeader& h : headers)
    if (h.xmlBytes > kMaxHostXml)
      return setError(loomRemoteError, "a rank announced a %llu-byte topology (limit %llu)",
                      static_cast<unsigned long long>(h.xmlBytes), static_cast<unsigned long long>(kMaxHostXml));
  // The models travel as they are, one per host: the other ranks contribute nothing (slots padded to the
  // largest model made every rank receive n of them).
  std::vector<std::string> blobs;
  LOOM_CHECK(comm->bootstrap->allGatherV(xml, &blobs));
  for (int r = 0; r < n; ++r)
    if (blobs[static_cast<size_t>(r)].size() != headers[r].xmlBytes)
      return setError(loomInternalError, "rank %d sent %zu bytes of topology where it announced %llu", r,
                      blobs[static_cast<size_t>(r)].size(), static_cast<unsigned long long>(headers[r].xmlBytes));
  // A host that could not be modelled fails every rank alike, its own ranks with the message itself.
  for (int r = 0; r < n; ++r) {
    if (!headers[r].publishes || headers[r].failed == loomSuccess) continue;
    const std::string& why = blobs[static_cast<size_t>(r)];
    const auto code = static_cast<loomResult_t>(headers[r].failed);
    if (comm->peers[r].hostHash == comm->peers[me].hostHash) return setError(code, "%s", why.c_str());
    return setError(code, "rank %d could not model its host %s: %s", r, comm->peers[r].hostName, why.c_str());
  }

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
    if (sys == nullptr || hh != comm->peers[me].hostHash) {
      std::unique_ptr<XmlNode> tree;
      std::unique_ptr<TopoSystem> built;
      const std::string& text = blobs[static_cast<size_t>(r)];
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
  // A rank's device: its GPU (and MIG instance) where its host's model holds it, else its NUMA node's CPU.
  for (int r = 0; r < n; ++r) {
    TopoHeader& h = headers[r];
    h.gpuBus[sizeof h.gpuBus - 1] = h.gpuUuid[sizeof h.gpuUuid - 1] = 0;  // another rank's bytes
    const int host = hostIndex[comm->peers[r].hostHash];
    cluster->ranks.push_back(placeRank(*hosts[host], host, h.numa, h.gpuBus, h.gpuUuid));
  }
  return placeCluster(comm, std::move(cluster));
}

loomResult_t commInheritTopology(loomComm* comm, const CommParent& parent) {
  const std::vector<int>& parentRanks = parent.ranks;
  const Cluster& from = *parent.cluster;
  comm->topoPolicy = parent.topoPolicy;
  auto cluster = std::make_shared<Cluster>();
  std::map<int, int> hostIndex;  // the parent's host index -> ours, in order of each host's first rank
  for (int r = 0; r < comm->nranks; ++r) {
    const int old = parentRanks[static_cast<size_t>(r)];
    if (parent.peers[old].hostHash != comm->peers[r].hostHash || parent.peers[old].pid != comm->peers[r].pid)
      return setError(loomInternalError, "rank %d of the new communicator is not rank %d of its parent", r, old);
    RankPlace place = from.ranks[old];
    auto [it, added] = hostIndex.emplace(place.host, static_cast<int>(cluster->hosts.size()));
    if (added) {
      cluster->hosts.push_back(from.hosts[place.host]);
      cluster->hostNames.push_back(from.hostNames[place.host]);
    }
    place.host = it->second;
    cluster->ranks.push_back(place);
  }
  return placeCluster(comm, std::move(cluster));
}

}  // namespace loom
