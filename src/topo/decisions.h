// The topology's decisions, each with the reason loom-topo prints and the communicator logs:
// which transport links two ranks, whether a GPU and a NIC use GPUDirect RDMA, which NIC a rank uses.
#pragma once

#include <string>

#include "topo/cluster.h"

namespace loom {

struct Decision {
  std::string choice;  // e.g. "p2p/nvlink", "shm", "net", "local", "on", "off", "mlx5_0"
  std::string reason;
};

struct TopoPolicy {
  PathType p2pLevel = PathType::PXB;  // LOOM_P2P_LEVEL: GPU P2P up to this path type
  PathType gdrLevel = PathType::PXB;  // LOOM_NET_GDR_LEVEL: GPUDirect RDMA up to this path type
  // From the environment; a bad value is loomInvalidArgument.
  static loomResult_t fromParams(TopoPolicy* out);
};

Decision pairTransport(const Cluster& c, int a, int b, const TopoPolicy& policy);
Decision gdrDecision(const TopoSystem& sys, int gpu, int nic, const TopoPolicy& policy);
// Whether every rank is a GPU rank whose GPU and NIC may use GPUDirect RDMA.  Every rank computes the
// same answer from the same cluster, so choices made on it (allgather, allreduce and reduce-scatter run
// point to point) agree without a word.
bool gdrOnEveryRank(const Cluster& c, const TopoPolicy& policy);
// Binds each rank to the nearest NIC with the most bandwidth, spreading the ranks of a host over the
// NICs that are equally near (rails).
void assignNics(Cluster* c);

}  // namespace loom
