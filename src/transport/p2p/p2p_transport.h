// Peer-to-peer transport between GPUs of one host (CUDA IPC over NVLink or PCIe, or the same GPU shared
// by several processes): one-sided.  A rank exports its buffers of a call as IPC handles, its peers map
// them into their own address space and read or write them with device copies and kernels, so the bytes
// never leave the GPUs.  It offers no FIFOs (caps().queues is false): buffers are mapped per call, by the
// device path (device/p2p_call.h), which also runs the protocol around it (exchange, agreement, barrier).
//
// Whether two GPUs may use it is the driver's answer (can one access the other) and the topology's
// (LOOM_P2P_LEVEL: at most that far apart in this host's model, topo/decisions.h p2pAllowed).
#pragma once

#include <map>
#include <string>

#include "device_runtime/device_api.h"
#include "topo/decisions.h"
#include "topo/system.h"
#include "transport/transport.h"

namespace loom {

// What a rank tells its peers about its buffers of one call (fixed layout: it travels as bytes).
struct P2pBuffers {
  int32_t ok;  // its buffers are device memory it could export
  int32_t pid;
  uint64_t hostHash, pidNamespace;  // with pid: the same process?
  uint64_t sendAddr, recvAddr;  // for ranks of the same process, which cannot open each other's handles
  char busId[32];               // of this rank's GPU
  DeviceApi::IpcHandle send, recv;
  int32_t hasSend, hasRecv;
};

// Peers' device allocations mapped into this process, by IPC handle; closed with the communicator.
class P2pMappings {
 public:
  explicit P2pMappings(DeviceApi* api) : api_(api) {}
  ~P2pMappings();
  P2pMappings(const P2pMappings&) = delete;
  P2pMappings& operator=(const P2pMappings&) = delete;
  // The address in this process of a peer's pointer (mapping its allocation the first time).
  loomResult_t map(const DeviceApi::IpcHandle& handle, const void* near, void** ptr);

 private:
  DeviceApi* api_;
  std::map<std::string, void*> opened_;  // handle bytes -> base here
};

class P2pTransport : public Transport {
 public:
  const char* name() const override { return "p2p"; }
  TransportCaps caps() const override {
    TransportCaps c{LinkKind::kDevicePeer};
    c.memory = kDeviceMemory;
    c.queues = false;
    c.zeroCopy = c.mapsPeerMemory = true;
    return c;
  }
  // Ranks of one host (whether their GPUs reach each other is known per call, from their buffers).
  bool reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est, std::string* reason) const override;
  loomResult_t createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) override;
  loomResult_t connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                           std::unique_ptr<SendQueue>* send) override;

  // This rank's buffers of a call (sendBytes at send, recvBytes at recv; either may be empty), exported
  // for its peers; ok is 0 where they are not device memory the runtime could export.
  static P2pBuffers describe(DeviceApi* api, const PeerInfo& self, const void* send, size_t sendBytes,
                             const void* recv, size_t recvBytes);
  // Whether this rank's GPU reaches the peer's (driver and LOOM_P2P_LEVEL; sys may be null: no model).
  static bool gpusReach(DeviceApi* api, const TopoSystem* sys, const TopoPolicy& policy, const std::string& mine,
                        const std::string& theirs);
  // The peer's buffers at addresses of this process: plain addresses for a rank of this very process,
  // else mapped through `maps` on the device of `near`.
  static loomResult_t open(P2pMappings* maps, const P2pBuffers& mine, const P2pBuffers& peer, const void* near,
                           const char** send, char** recv);
};

}  // namespace loom
