#include "transport/socket/socket_transport.h"

#include <vector>

#include "base/params.h"
#include "base/socket.h"
#include "transport/net/hello.h"
#include "transport/socket/socket_queues.h"

namespace loom {

namespace {

constexpr int32_t kMaxSockets = 16;

}  // namespace

bool SocketTransport::reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est,
                              std::string* reason) const {
  // TCP reaches any rank whose bootstrap reached us; a network is slower than shared memory.
  if (!params().NET.empty() && params().NET != "socket") {
    *reason = "socket: not chosen (LOOM_NET=" + params().NET + ")";
    return false;
  }
  est->bandwidthGBs = self.hostHash == peer.hostHash ? 2.0 : 1.2;
  est->latencyUs = 20;
  *reason = "socket: TCP";
  return true;
}

loomResult_t SocketTransport::createRecv(const ConnectRequest& req, ConnectInfo* info,
                                         std::unique_ptr<RecvQueue>* recv) {
  // LOOM_NSOCKS lies in 1..kMaxSockets (base/params.h checks it at init).
  int fd = -1;
  NetListenInfo ci;
  LOOM_CHECK(listenAndPublish(kSocketMagic, static_cast<int32_t>(params().NSOCKS), info, &ci, &fd));
  *recv = std::make_unique<SocketRecvQueue>(fd, req, ci.token, ci.count, netRingShape());
  return loomSuccess;
}

loomResult_t SocketTransport::connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                                          std::unique_ptr<SendQueue>* send) {
  NetListenInfo ci;
  SocketAddress addr;
  LOOM_CHECK(readNetListenInfo(peerInfo, kSocketMagic, kMaxSockets, "socket", req.peer, &ci, &addr));
  const Deadline deadline = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
  std::vector<int> fds;
  loomResult_t r = loomSuccess;
  for (int32_t j = 0; j < ci.count && r == loomSuccess; ++j) {
    int fd = -1;
    // The receiver listened before it published the address: refused means it is gone.
    r = connectSocket(addr, deadline, nullptr, &fd, /*retryRefused=*/false);
    if (r != loomSuccess) {
      r = setError(r, "socket: rank %d cannot reach rank %d at %s: %s", req.self, req.peer, addr.toString().c_str(),
                   std::string(lastErrorDetail()).c_str());
      setLastErrorPeer(req.peer);
      break;
    }
    fds.push_back(fd);
    NetHello h = makeNetHello(kSocketMagic, req, ci.token, j, ci.count);
    r = sendAll(fd, &h, sizeof h, deadline, nullptr, "socket hello");
  }
  if (r != loomSuccess) {
    for (int& fd : fds) closeSocket(&fd);
    return r;
  }
  *send = std::make_unique<SocketSendQueue>(std::move(fds), netRingShape(), req.peer);
  return loomSuccess;
}

}  // namespace loom
