// The emulated device's rdma_cm: listeners by address, connection requests and their answers as events
// on channels whose descriptor becomes readable, as librdmacm's do.
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "transport/emulated_verbs_state.h"

namespace loom {
namespace emulated {
namespace detail {

namespace {

std::string addressKey(const sockaddr* a, uint16_t port) {
  char ip[INET6_ADDRSTRLEN] = "";
  if (a->sa_family == AF_INET6) inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, ip, sizeof ip);
  else inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(port);
}
uint16_t portOf(const sockaddr* a) {
  return ntohs(a->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(a)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(a)->sin_port);
}

// Queues an event for `to` (on its channel) with a copy of `data` as private data.  Caller holds g.mu.
void pushEvent(CmId* to, rdma_cm_event_type type, int status, const void* data = nullptr, size_t bytes = 0,
               CmId* listener = nullptr) {
  auto* e = new rdma_cm_event{};
  e->id = &to->id;
  e->listen_id = listener != nullptr ? &listener->id : nullptr;
  e->event = type;
  e->status = status;
  if (bytes > 0) {
    char* copy = new char[bytes];
    std::memcpy(copy, data, bytes);
    e->param.conn.private_data = copy;
    e->param.conn.private_data_len = static_cast<uint8_t>(bytes);
  }
  Channel* c = to->channel;
  c->events.push_back(e);
  const char one = 1;
  if (::write(c->pipe[1], &one, 1) != 1) std::abort();
}

}  // namespace

const RdmaCmApi kCm = {
    [] {
      auto* c = new Channel();
      if (::pipe2(c->pipe, O_NONBLOCK | O_CLOEXEC) != 0) std::abort();
      c->channel.fd = c->pipe[0];
      return &c->channel;
    },
    [](rdma_event_channel* ch) {
      auto* c = reinterpret_cast<Channel*>(ch);
      std::lock_guard<std::mutex> lock(g.mu);
      for (rdma_cm_event* e : c->events) {
        delete[] static_cast<const char*>(e->param.conn.private_data);
        delete e;
      }
      ::close(c->pipe[0]);
      ::close(c->pipe[1]);
      delete c;
    },
    [](rdma_event_channel* ch, rdma_cm_id** id, void* context, rdma_port_space ps) {
      auto* c = new CmId();
      c->channel = reinterpret_cast<Channel*>(ch);
      c->id.channel = ch;
      c->id.context = context;
      c->id.ps = ps;
      *id = &c->id;
      return 0;
    },
    [](rdma_cm_id* id) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* c = reinterpret_cast<CmId*>(id);
      if (!c->bound.empty()) g.listeners.erase(c->bound);
      if (c->peer != nullptr) c->peer->peer = nullptr;
      delete c;
      return 0;
    },
    [](rdma_cm_id* id, sockaddr* addr) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* c = reinterpret_cast<CmId*>(id);
      uint16_t port = portOf(addr);
      if (port == 0) port = g.nextPort++;
      c->bound = addressKey(addr, port);
      if (g.listeners.count(c->bound)) return errno = EADDRINUSE, -1;
      c->id.verbs = &g.cmContext;
      c->id.port_num = 1;
      return 0;
    },
    [](rdma_cm_id* id, int) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* c = reinterpret_cast<CmId*>(id);
      if (c->bound.empty()) return errno = EINVAL, -1;
      g.listeners[c->bound] = c;
      return 0;
    },
    [](rdma_cm_id* id) {
      const std::string& b = reinterpret_cast<CmId*>(id)->bound;
      return htons(static_cast<uint16_t>(std::stoi(b.substr(b.rfind(':') + 1))));
    },
    [](rdma_cm_id* id, sockaddr*, sockaddr* dst, int) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* c = reinterpret_cast<CmId*>(id);
      c->destination = addressKey(dst, portOf(dst));
      c->id.verbs = &g.cmContext;
      c->id.port_num = 1;
      pushEvent(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
      return 0;
    },
    [](rdma_cm_id* id, int) {
      std::lock_guard<std::mutex> lock(g.mu);
      pushEvent(reinterpret_cast<CmId*>(id), RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
      return 0;
    },
    [](rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr) {
      std::lock_guard<std::mutex> lock(g.mu);
      if (id->verbs == nullptr || pd->context != id->verbs) return errno = EINVAL, -1;
      id->qp = newQp(pd, attr);
      g.qps[id->qp->qp_num]->state = IBV_QPS_INIT;  // rdma_cm hands the queue pair out ready for receives
      return 0;
    },
    [](rdma_cm_id* id) {
      std::lock_guard<std::mutex> lock(g.mu);
      if (id->qp != nullptr) deleteQp(id->qp->qp_num);
      id->qp = nullptr;
    },
    // rdma_connect: a request on the listener's channel, with a fresh identifier for the connection.
    [](rdma_cm_id* id, rdma_conn_param* p) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* c = reinterpret_cast<CmId*>(id);
      if (c->id.qp == nullptr) return errno = EINVAL, -1;
      auto it = g.listeners.find(c->destination);
      if (it == g.listeners.end()) {
        pushEvent(c, RDMA_CM_EVENT_REJECTED, ECONNREFUSED);
        return 0;
      }
      auto* req = new CmId();
      req->channel = it->second->channel;
      req->id.channel = &req->channel->channel;
      req->id.verbs = &g.cmContext;
      req->id.port_num = 1;
      req->peer = c;
      req->listener = it->second;
      c->peer = req;
      pushEvent(req, RDMA_CM_EVENT_CONNECT_REQUEST, 0, p->private_data, p->private_data_len, it->second);
      return 0;
    },
    // rdma_accept: both queue pairs go to RTS facing each other; both sides see ESTABLISHED, the
    // requester with the accept's private data.
    [](rdma_cm_id* id, rdma_conn_param* p) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* c = reinterpret_cast<CmId*>(id);
      if (c->peer == nullptr || c->id.qp == nullptr || c->peer->id.qp == nullptr) return errno = EINVAL, -1;
      Qp* mine = g.qps.at(c->id.qp->qp_num);
      Qp* theirs = g.qps.at(c->peer->id.qp->qp_num);
      mine->dest = theirs->qp.qp_num;
      theirs->dest = mine->qp.qp_num;
      mine->state = theirs->state = IBV_QPS_RTS;
      ++g.cmEstablished;
      pushEvent(c->peer, RDMA_CM_EVENT_ESTABLISHED, 0, p->private_data, p->private_data_len);
      pushEvent(c, RDMA_CM_EVENT_ESTABLISHED, 0);
      return 0;
    },
    [](rdma_cm_id* id, const void* data, uint8_t n) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* c = reinterpret_cast<CmId*>(id);
      ++g.cmRejected;
      if (c->peer != nullptr) pushEvent(c->peer, RDMA_CM_EVENT_REJECTED, ECONNREFUSED, data, n);
      return 0;
    },
    [](rdma_event_channel* ch, rdma_cm_event** e) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* c = reinterpret_cast<Channel*>(ch);
      if (c->events.empty()) return errno = EAGAIN, -1;
      char byte;
      if (::read(c->pipe[0], &byte, 1) != 1) std::abort();
      *e = c->events.front();
      c->events.pop_front();
      return 0;
    },
    [](rdma_cm_event* e) {
      delete[] static_cast<const char*>(e->param.conn.private_data);
      delete e;
      return 0;
    },
    [](rdma_cm_event_type t) {
      switch (t) {
        case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
        case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
        case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
        case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
        case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
        default: return "RDMA_CM_EVENT_OTHER";
      }
    },
};

}  // namespace detail
}  // namespace emulated
}  // namespace loom
