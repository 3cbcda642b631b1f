#include "device/gdr_path.h"

#include <string>
#include <vector>

#include "runtime/comm.h"
#include "base/log.h"
#include "device_runtime/device_api.h"
#include "topo/decisions.h"

namespace loom {

namespace {

// The topology's word on GPUDirect RDMA between the GPU holding ptr and this rank's NIC.
Decision topologyDecision(const loomComm* comm, DeviceApi* api, const void* ptr) {
  if (comm->cluster == nullptr) return {"off", "no topology model"};
  const Cluster& c = *comm->cluster;
  const TopoSystem& sys = c.sys(comm->rank);
  const std::string bus = api->busIdOf(ptr);
  const int gpu = sys.findBusId(bus);
  if (gpu < 0 || sys.nodes[gpu].type != NodeType::Gpu)
    return {"off", "GDR off: the buffer's GPU (" + (bus.empty() ? std::string("bus id unknown") : bus) +
                       ") is not in this host's topology"};
  const int nic = c.ranks[comm->rank].nic;
  if (nic < 0) return {"off", "GDR off: this rank has no NIC"};
  return gdrDecision(sys, gpu, nic, comm->topoPolicy);
}

}  // namespace

loomResult_t gdrChosen(loomComm* comm, DeviceApi* api, const CollArgs& args, bool* chosen) {
  *chosen = false;
  const int me = comm->rank, n = comm->nranks;
  // Calls made of point-to-point transfers only: send, recv, alltoall out of place (in place stages
  // blocks on the CPU), and where every rank runs them over transfers (algos/selector.cc) allgather,
  // broadcast, and the reductions with a builtin op on GPU input and output (they reduce on the GPU;
  // a reduce's output exists at its root only).
  const bool alltoall = args.coll == CollType::AllToAll && args.sendbuff != args.recvbuff;
  const bool chain = args.coll == CollType::Broadcast || args.coll == CollType::Reduce;
  const bool reduces = args.coll == CollType::AllReduce || args.coll == CollType::ReduceScatter ||
                       args.coll == CollType::Reduce;
  const bool deviceOutput = (args.coll == CollType::Reduce && args.root != me) || api->isDeviceMemory(args.recvbuff);
  const bool everywhere = comm->gdrEverywhere &&
                          (args.coll == CollType::AllGather || args.coll == CollType::Broadcast ||
                           (reduces && args.op < loomNumOps && args.scalar == nullptr &&
                            api->isDeviceMemory(args.sendbuff) && deviceOutput));
  if (args.coll != CollType::Send && args.coll != CollType::Recv && !alltoall && !everywhere) return loomSuccess;
  const CallExtents e = callExtents(args, n, me);
  // What this rank sends from and receives into (a broadcast passes on what it received).
  void* sendFrom = e.sendBytes > 0 ? const_cast<void*>(args.sendbuff) : nullptr;
  size_t sendBytes = e.sendBytes;
  void* recvInto = e.recvBytes > 0 ? args.recvbuff : nullptr;
  if (args.coll == CollType::Broadcast && args.root != me) sendFrom = args.recvbuff, sendBytes = e.recvBytes;
  // Every device buffer of the call must be one the topology lets the NIC reach.
  for (const void* p : {static_cast<const void*>(sendFrom), static_cast<const void*>(recvInto)}) {
    if (p == nullptr || !api->isDeviceMemory(p)) continue;
    const Decision d = topologyDecision(comm, api, p);
    if (!comm->gdrLogged) {
      LOOM_INFO(kColl, "rank %d: device buffers over the network: %s", me, d.reason.c_str());
      comm->gdrLogged = true;
    }
    if (d.choice != "on") return loomSuccess;
  }
  std::vector<int> peers;
  if (chain) {  // the chain's neighbours (algos/transfer_chain.cc)
    for (int p : {(me + 1) % n, (me + n - 1) % n})
      if (p != me && (peers.empty() || peers[0] != p)) peers.push_back(p);
  } else if (alltoall || everywhere) {
    for (int p = 0; p < n; ++p)
      if (p != me) peers.push_back(p);
  } else if (args.root != me) {
    peers.push_back(args.root);
  }
  if (peers.empty()) return loomSuccess;  // to oneself: a device copy, staged or not
  // Both ends connect in the same call (the transfers would), so asking the transports costs nothing.
  // A buffer the NIC cannot register (no dma-buf export, no peer memory) is staged instead.
  LOOM_CHECK(comm->connect(peers, 0));
  const bool devSend = sendFrom != nullptr && api->isDeviceMemory(sendFrom);
  const bool devRecv = recvInto != nullptr && api->isDeviceMemory(recvInto);
  for (int p : peers) {
    const Connection& c = comm->connection(p, 0);
    if ((devSend && !c.send->canPostDirectFrom(sendFrom, sendBytes)) ||
        (devRecv && !c.recv->canReadDirectInto(recvInto, e.recvBytes)))
      return loomSuccess;
  }
  *chosen = true;
  return loomSuccess;
}

}  // namespace loom
