// TCP transport: the connection between ranks on different hosts (or on one host with
// LOOM_SHM_DISABLE=1).  Each direction of a pair is LOOM_NSOCKS TCP sockets, driven by the ranks' own
// threads (socket_queues.h): the receiver reads its sockets itself, the sender writes its frames itself
// and leaves only what the sockets cannot take at once to a helper thread.
#pragma once

#include "transport/net/relay_queue.h"
#include "transport/transport.h"

namespace loom {

class SocketTransport : public Transport {
 public:
  const char* name() const override { return "socket"; }
  TransportCaps caps() const override {
    TransportCaps c{LinkKind::kNetwork};
    c.slotBytes = netRingShape().slotBytes;
    c.sendsFromThread = c.zeroCopy = true;  // sendmsg from the caller's buffer, read straight into it
    return c;
  }
  bool reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est, std::string* reason) const override;
  loomResult_t createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) override;
  loomResult_t connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                           std::unique_ptr<SendQueue>* send) override;
};

}  // namespace loom
