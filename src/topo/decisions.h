// The topology's decisions, each with the reason loom-topo prints and the communicator logs:
// which transport links two ranks, whether a GPU and a NIC use GPUDirect RDMA, which NIC a rank uses.
#pragma once

#include <string>

#include "base/link_kind.h"

#include "topo/cluster.h"

namespace loom {

struct Decision {
  std::string choice;  // e.g. "p2p/nvlink", "shm", "net", "local", "on", "off", "mlx5_0"
  std::string reason;
  LinkKind link = LinkKind::kNetwork;  // pairTransport's: the kind of link `choice` names
};

struct TopoPolicy {
  PathType p2pLevel = PathType::PXB;  // LOOM_P2P_LEVEL: GPU P2P up to this path type
  PathType gdrLevel = PathType::PXB;  // LOOM_NET_GDR_LEVEL: GPUDirect RDMA up to this path type
  // NIC choice (assignNics).  RDMA NICs (IB, RoCE, iWARP) come before plain Ethernet ones unless LOOM_NET
  // is socket; LOOM_IB_HCA and LOOM_SOCKET_IFNAME keep only the RDMA and plain NICs they name.
  bool preferRdma = true;
  std::string ibHca, socketIfname;
  // From the environment; a bad value is loomInvalidArgument.
  static loomResult_t fromParams(TopoPolicy* out);
};

// The P2P rule, once: two GPUs of one host read each other's memory over NVLink always, and over PCIe
// when their path is at most LOOM_P2P_LEVEL.
inline bool p2pAllowed(PathType path, const TopoPolicy& policy) {
  return path == PathType::NVL || path == PathType::NVB || static_cast<int>(path) <= static_cast<int>(policy.p2pLevel);
}

Decision pairTransport(const Cluster& c, int a, int b, const TopoPolicy& policy);
Decision gdrDecision(const TopoSystem& sys, int gpu, int nic, const TopoPolicy& policy);
// Whether every rank is a GPU rank whose GPU and NIC may use GPUDirect RDMA.  Every rank computes the
// same answer from the same cluster, so choices made on it (allgather, allreduce and reduce-scatter run
// point to point) agree without a word.
bool gdrOnEveryRank(const Cluster& c, const TopoPolicy& policy);
// Binds each rank to a NIC, by these rules in order: a NIC the user's LOOM_IB_HCA / LOOM_SOCKET_IFNAME
// keeps; an RDMA NIC before a plain Ethernet one (unless LOOM_NET=socket), as NCCL uses plain Ethernet
// only without RDMA; a reported speed before an assumed one (a guess never outranks a measurement); the
// nearest path type; the most bandwidth; the least used (spreading ranks over equal NICs: rails).  The
// reason says which rule chose it over the runner-up.
void assignNics(Cluster* c, const TopoPolicy& policy = TopoPolicy());

}  // namespace loom
