// Shared-memory transport: ranks on one host.  Each direction of a connection is a FIFO of slots in a
// segment the receiver creates (so the memory is first touched, and placed, near the rank that reads it);
// the sender maps it, and the sender unlinks the name once mapped.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/transport.h"

namespace loom {

class ShmTransport : public Transport {
 public:
  const char* name() const override { return "shm"; }
  TransportCaps caps() const override;
  bool reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est, std::string* reason) const override;
  loomResult_t createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) override;
  loomResult_t connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                           std::unique_ptr<SendQueue>* send) override;
};

// Removes the segment names peers on this host created for `self` as sender in communicator `key`
// (channels 0..channels-1): normally the opener already did; a peer that died first leaves them.
void removeShmLeftovers(uint64_t key, int self, const std::vector<int>& localPeers, int channels);

}  // namespace loom
