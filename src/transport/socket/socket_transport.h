// TCP transport: the connection between ranks on different hosts (or on one host with
// LOOM_SHM_DISABLE=1).  Each direction of a pair is one TCP connection with a ring of slots at each end
// in local memory; a thread per queue moves posted slots through the socket, so the ranks' own threads
// never block in a socket call and no cycle of full socket buffers can deadlock a ring.
#pragma once

#include "transport/transport.h"

namespace loom {

class SocketTransport : public Transport {
 public:
  const char* name() const override { return "socket"; }
  const char* kind() const override { return "net"; }
  bool reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est, std::string* reason) const override;
  loomResult_t createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) override;
  loomResult_t connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                           std::unique_ptr<SendQueue>* send) override;
};

}  // namespace loom
