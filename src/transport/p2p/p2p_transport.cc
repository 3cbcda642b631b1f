#include "transport/p2p/p2p_transport.h"

#include <cstdio>

#include "base/error.h"
#include "base/log.h"

namespace loom {

P2pMappings::~P2pMappings() {
  for (auto& [key, base] : opened_) api_->ipcClose(base);
}

loomResult_t P2pMappings::map(const DeviceApi::IpcHandle& handle, const void* near, void** ptr) {
  const std::string key(reinterpret_cast<const char*>(handle.bytes), sizeof handle.bytes);
  auto it = opened_.find(key);
  if (it == opened_.end()) {
    void* base = nullptr;
    if (api_->ipcOpen(handle, near, &base) != loomSuccess) return loomUnhandledCudaError;
    it = opened_.emplace(key, base).first;
  }
  *ptr = static_cast<char*>(it->second) + handle.offset;
  return loomSuccess;
}

bool P2pTransport::reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est,
                           std::string* reason) const {
  if (self.hostHash != peer.hostHash) {
    *reason = "p2p: different hosts";
    return false;
  }
  // The least a GPU pair that passes gpusReach has: PCIe Gen4 x16 (NVLink is several times more); the
  // latency is that of a device copy's launch.
  est->bandwidthGBs = 24;
  est->latencyUs = 10;
  *reason = "p2p: GPUs of one host, per call where the driver and LOOM_P2P_LEVEL allow";
  return true;
}

loomResult_t P2pTransport::createRecv(const ConnectRequest& req, ConnectInfo*, std::unique_ptr<RecvQueue>*) {
  return setError(loomInternalError, "p2p: rank %d -> %d: this transport maps buffers per call and has no queues",
                  req.peer, req.self);
}

loomResult_t P2pTransport::connectSend(const ConnectRequest& req, const ConnectInfo&, std::unique_ptr<SendQueue>*) {
  return setError(loomInternalError, "p2p: rank %d -> %d: this transport maps buffers per call and has no queues",
                  req.self, req.peer);
}

P2pBuffers P2pTransport::describe(DeviceApi* api, const PeerInfo& self, const void* send, size_t sendBytes,
                                  const void* recv, size_t recvBytes) {
  P2pBuffers b{};
  b.pid = self.pid;
  b.hostHash = self.hostHash;
  b.pidNamespace = self.pidNamespace;
  b.sendAddr = reinterpret_cast<uintptr_t>(send);
  b.recvAddr = reinterpret_cast<uintptr_t>(recv);
  auto exportOne = [&](const void* p, size_t bytes, DeviceApi::IpcHandle* h, int32_t* has) {
    if (bytes == 0) return true;
    *has = 1;
    return api->isDeviceMemory(p) && api->ipcExport(p, h) == loomSuccess;
  };
  b.ok = exportOne(send, sendBytes, &b.send, &b.hasSend) && exportOne(recv, recvBytes, &b.recv, &b.hasRecv);
  const void* local = recvBytes > 0 ? recv : send;  // a buffer on this rank's GPU
  std::snprintf(b.busId, sizeof b.busId, "%s", api->busIdOf(local).c_str());
  return b;
}

bool P2pTransport::gpusReach(DeviceApi* api, const TopoSystem* sys, const TopoPolicy& policy, const std::string& mine,
                             const std::string& theirs) {
  if (!api->reaches(mine, theirs)) return false;
  if (mine == theirs || sys == nullptr) return true;
  const int x = sys->findBusId(mine), y = sys->findBusId(theirs);
  if (x < 0 || y < 0) return true;  // GPUs the model does not know: the driver's answer stands
  const PathType path = sys->path(x, y).type;
  if (p2pAllowed(path, policy)) return true;
  LOOM_INFO(kColl, "p2p: GPUs %s and %s are %s apart, beyond LOOM_P2P_LEVEL=%s", mine.c_str(), theirs.c_str(),
            pathTypeName(path), pathTypeName(policy.p2pLevel));
  return false;
}

loomResult_t P2pTransport::open(P2pMappings* maps, const P2pBuffers& mine, const P2pBuffers& peer, const void* near,
                                const char** send, char** recv) {
  if (peer.pid == mine.pid && peer.hostHash == mine.hostHash && peer.pidNamespace == mine.pidNamespace) {
    *send = reinterpret_cast<const char*>(peer.sendAddr);  // this process: plain addresses
    *recv = reinterpret_cast<char*>(peer.recvAddr);
    return loomSuccess;
  }
  void* at = nullptr;
  if (peer.hasSend) LOOM_CHECK(maps->map(peer.send, near, &at));
  *send = static_cast<const char*>(at);
  at = nullptr;
  if (peer.hasRecv) LOOM_CHECK(maps->map(peer.recv, near, &at));
  *recv = static_cast<char*>(at);
  return loomSuccess;
}

}  // namespace loom
