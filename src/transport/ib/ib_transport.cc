#include "transport/ib/ib_transport.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "base/socket.h"
#include "transport/ib/ib_connection.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/host_mr.h"
#include "transport/ib/ib_wires.h"
#include "transport/net/hello.h"
#include "transport/net/relay_queue.h"

namespace loom {

TransportCaps IbTransport::caps() const {
  TransportCaps c{LinkKind::kNetwork};
  c.slotBytes = netRingShape().slotBytes;
  c.memory = kHostMemory | kDeviceMemory;  // GPUDirect RDMA where the NIC can register device memory
  c.sendsFromThread = true;
  const IbDevice& d = ibDevice();
  c.zeroCopy = d.context != nullptr && hostZeroCopy(*d.api, d.context);
  return c;
}

bool IbTransport::reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est,
                          std::string* reason) const {
  if (!params().NET.empty() && params().NET != "ib") {
    *reason = "ib: not chosen (LOOM_NET=" + params().NET + ")";
    return false;
  }
  const IbDevice& d = ibDevice();
  if (d.context == nullptr) {
    *reason = "ib: " + d.error;
    return false;
  }
  // The port's own rate; ibv rates are per lane x width, topo/verbs_ports.cc knows them in detail.
  est->bandwidthGBs = 10;
  est->latencyUs = 3;
  *reason = "ib: " + d.name + (d.iwarp ? " (iWARP)" : d.portAttr.link_layer == IBV_LINK_LAYER_ETHERNET ? " (RoCE)"
                                                                                                 : " (InfiniBand)");
  return true;
}

namespace {

void setPort(SocketAddress* a, uint16_t netOrderPort) {
  if (a->storage.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&a->storage)->sin6_port = netOrderPort;
  else reinterpret_cast<sockaddr_in*>(&a->storage)->sin_port = netOrderPort;
}

// rdma_cm mode: a listening identifier bound to the bootstrap interface's address, published like a TCP
// listener (the sender resolves that address to its RDMA device).
loomResult_t listenByRdmaCm(const IbDevice& d, int nqps, ConnectInfo* info, NetListenInfo* published,
                            std::unique_ptr<CmEndpoint>* listener) {
  SocketAddress addr;
  std::string iface, why;
  LOOM_CHECK(findInterfaceAddress(&addr, &iface));
  setPort(&addr, 0);
  auto ep = std::make_unique<CmEndpoint>(*d.api->cm);
  if (!ep->open(&why)) return setError(loomSystemError, "ib: %s", why.c_str());
  if (d.api->cm->bindAddr(ep->id(), reinterpret_cast<sockaddr*>(&addr.storage)) != 0 ||
      d.api->cm->listen(ep->id(), kMaxQps) != 0)
    return setError(loomSystemError, "ib: cannot listen through rdma_cm on %s (%s): %s", addr.toString().c_str(),
                    iface.c_str(), strerror(errno));
  setPort(&addr, d.api->cm->srcPort(ep->id()));
  publishNetListenInfo(kIbMagicCm, addr, nqps, info, published);
  *listener = std::move(ep);
  return loomSuccess;
}

// rdma_cm mode, sender: for each queue pair, resolve the receiver's address and route, make the queue
// pair on the resolved device and connect with the hello (naming the queue pair) as private data; the
// receiver's accept carries its slot description.
loomResult_t connectByRdmaCm(const IbDevice& d, const ConnectRequest& req, const NetListenInfo& ci,
                             SocketAddress addr, IbConnection* conn) {
  const RdmaCmApi& cm = *d.api->cm;
  const Deadline deadline = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
  for (int k = 0; k < conn->nqps(); ++k) {
    auto ep = std::make_unique<CmEndpoint>(cm);
    std::string why;
    CmEndpoint::Event e{};
    bool ok = ep->open(&why);
    const int stepMs = std::max(1, deadline.remainingMs(5000));
    if (ok && cm.resolveAddr(ep->id(), nullptr, reinterpret_cast<sockaddr*>(&addr.storage), stepMs) != 0)
      ok = false, why = "rdma_resolve_addr failed: " + std::string(strerror(errno));
    ok = ok && ep->expect(RDMA_CM_EVENT_ADDR_RESOLVED, deadline, nullptr, &e, &why);
    if (ok && cm.resolveRoute(ep->id(), stepMs) != 0)
      ok = false, why = "rdma_resolve_route failed: " + std::string(strerror(errno));
    ok = ok && ep->expect(RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, nullptr, &e, &why);
    rdma_cm_id* id = ep->id();
    ok = ok && conn->createOnCm(k, id, cm, &why);
    NetHello h = makeNetHello(kIbMagicCm, req, ci.token, k, conn->nqps());
    rdma_conn_param param = connParam(&h, sizeof h);
    if (ok && cm.connect(id, &param) != 0) ok = false, why = "rdma_connect failed: " + std::string(strerror(errno));
    ok = ok && ep->expect(RDMA_CM_EVENT_ESTABLISHED, deadline, nullptr, &e, &why);
    conn->keep(std::move(ep));  // its queue pair may exist: the identifier must outlive it
    if (!ok)
      return setError(loomRemoteError, "ib: cannot connect to rank %d at %s through rdma_cm: %s", req.peer,
                      addr.toString().c_str(), why.c_str());
    QpInfo peer{};
    if (e.privateData.size() < sizeof peer)
      return setError(loomRemoteError, "ib: rank %d accepted without a slot description", req.peer);
    std::memcpy(&peer, e.privateData.data(), sizeof peer);
    conn->setPeer(peer);
  }
  return loomSuccess;
}

// QP-exchange mode, sender: hello and the descriptions of every queue pair over an authenticated TCP
// connection, then RESET -> RTS by verbs on both sides.
loomResult_t connectByExchange(const ConnectRequest& req, const NetListenInfo& ci, const SocketAddress& addr,
                               IbConnection* conn) {
  const Deadline deadline = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
  int fd = -1;
  if (connectSocket(addr, deadline, nullptr, &fd, /*retryRefused=*/false) != loomSuccess) {
    const loomResult_t r = setError(loomRemoteError,
                                    "ib: rank %d cannot reach rank %d at %s: %s", req.self, req.peer,
                                    addr.toString().c_str(), std::string(lastErrorDetail()).c_str());
    setLastErrorPeer(req.peer);
    return r;
  }
  const int nqps = conn->nqps();
  NetHello h = makeNetHello(kIbMagic, req, ci.token, 0, nqps);
  std::vector<QpInfo> mine, peer(static_cast<size_t>(nqps));
  for (int k = 0; k < nqps; ++k) mine.push_back(conn->info(k));
  const char ready = 1;
  loomResult_t r = sendAll(fd, &h, sizeof h, deadline, nullptr, "ib hello");
  if (r == loomSuccess) r = sendAll(fd, mine.data(), mine.size() * sizeof(QpInfo), deadline, nullptr, "ib queue pairs");
  if (r == loomSuccess) r = recvAll(fd, peer.data(), peer.size() * sizeof(QpInfo), deadline, nullptr, "ib queue pairs");
  for (int k = 0; k < nqps && r == loomSuccess; ++k) r = conn->connect(k, peer[static_cast<size_t>(k)]);
  if (r == loomSuccess) r = sendAll(fd, &ready, 1, deadline, nullptr, "ib ready");
  closeSocket(&fd);
  return r;
}


}  // namespace

loomResult_t IbTransport::createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) {
  const IbDevice& d = ibDevice();
  if (d.context == nullptr) return setError(loomSystemError, "ib: %s", d.error.c_str());
  int nqps = 1;
  // The receiving side publishes its count and the sender follows it (1..kMaxQps: base/params.h).
  nqps = static_cast<int>(params().IB_QPS_PER_CONNECTION);
  const RingShape shape = netRingShape();
  auto conn = std::make_unique<IbConnection>(d, shape.nslots, shape.slotBytes, nqps);
  int fd = -1;
  std::unique_ptr<CmEndpoint> listener;
  NetListenInfo ci;
  if (usesRdmaCm(d)) {
    LOOM_CHECK(listenByRdmaCm(d, nqps, info, &ci, &listener));
    std::string why;
    if (!conn->prepareOnCm(listener->id()->verbs, &why)) return setError(loomSystemError, "ib: %s", why.c_str());
  } else {
    LOOM_CHECK(conn->create());
    LOOM_CHECK(listenAndPublish(kIbMagic, nqps, info, &ci, &fd));
  }
  *recv = std::make_unique<RelayRecvQueue>(
      makeIbRecvWire(std::move(conn), fd, std::move(listener), req, ci.token, static_cast<double>(params().TIMEOUT)),
      shape, req.peer);
  return loomSuccess;
}

loomResult_t IbTransport::connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                                      std::unique_ptr<SendQueue>* send) {
  const IbDevice& d = ibDevice();
  if (d.context == nullptr) return setError(loomSystemError, "ib: %s", d.error.c_str());
  const bool cm = usesRdmaCm(d);
  NetListenInfo ci;
  SocketAddress addr;
  LOOM_CHECK(readNetListenInfo(peerInfo, cm ? kIbMagicCm : kIbMagic, kMaxQps, "ib", req.peer, &ci, &addr));
  const RingShape shape = netRingShape();
  auto conn = std::make_unique<IbConnection>(d, shape.nslots, shape.slotBytes, ci.count);
  if (cm) {
    LOOM_CHECK(connectByRdmaCm(d, req, ci, addr, conn.get()));
  } else {
    LOOM_CHECK(conn->create());
    LOOM_CHECK(connectByExchange(req, ci, addr, conn.get()));
  }
  const QpInfo& peer = conn->peer();
  if (peer.nslots == 0 || peer.stride < kHeaderBytes + shape.slotBytes)
    return setError(loomInvalidUsage, "ib: rank %d has smaller slots than this rank (LOOM_NET_SLOT_SIZE differs)",
                    req.peer);
  *send = std::make_unique<RelaySendQueue>(makeIbSendWire(std::move(conn)), shape, req.peer);
  return loomSuccess;
}

}  // namespace loom
