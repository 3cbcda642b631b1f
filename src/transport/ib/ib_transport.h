// RDMA verbs transport (LOOM_NET=ib, or by default where an RDMA port is active): one RC queue pair per
// one-way connection, on the shared relay-queue mechanism (transport/net).  The receiver's ring of slots
// is registered memory that the sender writes into with RDMA WRITE; each slot starts with a 16-byte
// header (size, call signature).  Completion is signalled per frame either by RDMA WRITE WITH IMMEDIATE
// (the immediate is the slot index) or, where the device lacks it (iWARP devices such as siw, and any
// device where posting it fails), by the write followed by a small SEND carrying the index: RC ordering
// makes the data land before that message.  The receiver handles both per completion, so a sender may
// fall back at any time.  Credits flow the other way as small SENDs: one per slot the receiver emptied.
//
// The two QPs learn each other (QP number, LID, GID, PSN, slot addresses and key) over a TCP connection
// from the sender to the receiver, authenticated like the socket transport's.  Every verbs call goes
// through a table (verbs_api.h), so tests run this whole protocol against an emulated device.
//
// Where the device has implicit on-demand paging (transport/ib/host_mr.h), frames leave from the
// caller's buffer (the header from the slot, the payload from the buffer, in one write), and a frame
// that lands in the receiver's caller buffer goes as a direct frame: the receiver reads it from the
// sender's buffer into its own (RDMA READ).  No byte is copied by the CPU on either side.
#pragma once

#include "transport/net/relay_queue.h"
#include "transport/transport.h"

namespace loom {

class IbTransport : public Transport {
 public:
  const char* name() const override { return "ib"; }
  TransportCaps caps() const override;
  bool reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est, std::string* reason) const override;
  loomResult_t createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) override;
  loomResult_t connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                           std::unique_ptr<SendQueue>* send) override;
};

}  // namespace loom
