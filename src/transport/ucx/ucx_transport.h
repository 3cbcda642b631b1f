// UCX transport (LOOM_NET=ucx): each one-way connection is a UCP stream endpoint between two workers,
// connected through a UCP listener (client/server sockaddr mode), and carries the same frames as the
// socket transport through the shared relay-queue mechanism (transport/net).  UCX chooses the wire
// underneath (tcp, shared memory, verbs, cuda where present; UCX_TLS restricts it), so loom gets every
// fabric UCX supports without code of its own for each.
#pragma once

#include "transport/net/relay_queue.h"
#include "transport/transport.h"

namespace loom {

class UcxTransport : public Transport {
 public:
  const char* name() const override { return "ucx"; }
  TransportCaps caps() const override {
    TransportCaps c{LinkKind::kNetwork};
    c.slotBytes = netRingShape().slotBytes;
    c.sendsFromThread = c.zeroCopy = true;  // tagged sends from the caller's buffer, headers read first
    return c;
  }
  bool reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est, std::string* reason) const override;
  loomResult_t createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) override;
  loomResult_t connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                           std::unique_ptr<SendQueue>* send) override;
};

}  // namespace loom
