// The ib transport's two wires (transport/net/relay_queue.h): frames written by RDMA WRITE with
// immediate into the peer's slot ring, credits sent back, and direct frames from GPU memory read by the
// receiver (GPUDirect RDMA).
#pragma once

#include <memory>

#include "transport/ib/ib_connection.h"
#include "transport/net/relay_queue.h"

namespace loom {

std::unique_ptr<SendWire> makeIbSendWire(std::unique_ptr<IbConnection> conn);
// QP-exchange mode listens on a TCP socket (`listenFd`), rdma_cm mode on `cmListener`.
std::unique_ptr<RecvWire> makeIbRecvWire(std::unique_ptr<IbConnection> conn, int listenFd,
                                         std::unique_ptr<CmEndpoint> cmListener, const ConnectRequest& req,
                                         uint64_t token, double timeoutSec);

}  // namespace loom
