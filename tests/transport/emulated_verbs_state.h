// The emulated verbs device's state, shared by its two halves: the verbs (emulated_verbs.cc) and
// rdma_cm (emulated_rdma_cm.cc).  Internal to the emulator; tests use emulated_verbs.h.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "transport/emulated_verbs.h"

namespace loom {
namespace emulated {
namespace detail {

struct Qp {
  ibv_qp qp{};
  ibv_qp_state state = IBV_QPS_RESET;
  uint32_t dest = 0;
  ibv_cq* cq = nullptr;
  struct Recv {
    uint64_t wrId;
    char* addr;
    uint32_t length;
  };
  std::deque<Recv> recvs;
};

struct State {
  std::mutex mu;
  Options options;
  ibv_device device{};
  ibv_device* list[2] = {&device, nullptr};
  uint32_t nextKey = 100, nextQpn = 1000;
  std::map<uint32_t, ibv_mr*> mrs;  // by key (lkey == rkey)
  std::map<ibv_cq*, std::deque<ibv_wc>> cqs;
  std::map<uint32_t, Qp*> qps;
  std::map<uint32_t, int> access;  // by key
  // Where the emulator reaches each region (by key): its own address, or its mapping of a dma-buf.
  std::map<uint32_t, char*> hostAt;
  std::map<uint32_t, size_t> mappedBytes;  // dma-buf regions: the mapping to undo
  std::map<uint32_t, bool> onDemand;  // by key: an ODP region (checked per access, not at registration)
  uint64_t reads = 0, dmabufRegistrations = 0, bytesMoved = 0;
  uint64_t withImm = 0, plain = 0;
  std::map<uint32_t, uint64_t> writesByQpn;  // qpn (creation order) -> RDMA writes posted
  uint64_t shuffleState = 0x9e3779b97f4a7c15ull;
  bool firstSendPosted = false;
  // rdma_cm
  ibv_context cmContext{};  // the device context rdma_cm hands out with resolved identifiers
  uint16_t nextPort = 20000;
  std::map<std::string, struct CmId*> listeners;  // "ip:port"
  uint64_t cmEstablished = 0, cmRejected = 0;
};
extern State g;  // the one emulated device (emulated_verbs.cc)


// rdma_cm: identifiers, and event channels whose descriptor becomes readable per queued event.

struct Channel {
  rdma_event_channel channel{};
  int pipe[2] = {-1, -1};
  std::deque<rdma_cm_event*> events;
};

struct CmId {
  rdma_cm_id id{};  // first: the transport sees only this
  Channel* channel = nullptr;
  std::string bound;       // "ip:port" while listening
  std::string destination;  // "ip:port" the active side resolved
  CmId* peer = nullptr;     // the other end of a requested or established connection
  CmId* listener = nullptr;
};

// Queue pairs, made and destroyed by rdma_cm as by the verbs.  Caller holds g.mu.
ibv_qp* newQp(ibv_pd* pd, ibv_qp_init_attr* attr);
void deleteQp(uint32_t qpn);

extern const RdmaCmApi kCm;

}  // namespace detail
}  // namespace emulated
}  // namespace loom
