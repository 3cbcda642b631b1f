#include "transport/emulated_verbs.h"

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace loom {
namespace emulated {

namespace {

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
  uint64_t withImm = 0, plain = 0;
} g;

void complete(ibv_cq* cq, uint64_t wrId, ibv_wc_status status, ibv_wc_opcode op, uint32_t qpn, uint32_t bytes = 0,
              uint32_t imm = 0, bool withImm = false) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = op;
  wc.qp_num = qpn;
  wc.byte_len = bytes;
  wc.imm_data = imm;
  wc.wc_flags = withImm ? IBV_WC_WITH_IMM : 0;
  g.cqs[cq].push_back(wc);
}

// The error state: posted receives are flushed with an error completion, as hardware does.
void toError(Qp* q) {
  if (q->state == IBV_QPS_ERR) return;
  q->state = IBV_QPS_ERR;
  for (const Qp::Recv& r : q->recvs) complete(q->cq, r.wrId, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, q->qp.qp_num);
  q->recvs.clear();
}

// A registered range that covers [addr, addr+length) under `key` and allows `access`, or null.
ibv_mr* findMr(uint32_t key, uint64_t addr, uint64_t length, int access) {
  auto it = g.mrs.find(key);
  if (it == g.mrs.end()) return nullptr;
  ibv_mr* mr = it->second;
  const uint64_t base = reinterpret_cast<uint64_t>(mr->addr);
  if (addr < base || addr + length > base + mr->length) return nullptr;
  if ((g.access[key] & access) != access) return nullptr;
  return mr;
}

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(g.mu);
  Qp* q = g.qps.at(qp->qp_num);
  for (; wr != nullptr; wr = wr->next) {
    *bad = wr;
    if (q->state != IBV_QPS_RTS) return errno = EINVAL;
    if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && g.options.iwarp) return errno = EOPNOTSUPP;
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM && wr->opcode != IBV_WR_SEND)
      return errno = EINVAL;
    // Gather the local data (inline data is read at post time, without a key).
    std::vector<char> data;
    bool localOk = true;
    for (int k = 0; k < wr->num_sge; ++k) {
      const ibv_sge& sge = wr->sg_list[k];
      if (!(wr->send_flags & IBV_SEND_INLINE) && findMr(sge.lkey, sge.addr, sge.length, 0) == nullptr) localOk = false;
      const char* p = reinterpret_cast<const char*>(sge.addr);
      data.insert(data.end(), p, p + sge.length);
    }
    const ibv_wc_opcode localOp = wr->opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
    if (!localOk) {
      complete(q->cq, wr->wr_id, IBV_WC_LOC_PROT_ERR, localOp, qp->qp_num);
      toError(q);
      continue;
    }
    auto peerIt = g.qps.find(q->dest);
    Qp* peer = peerIt == g.qps.end() ? nullptr : peerIt->second;
    if (peer == nullptr || peer->state == IBV_QPS_ERR || peer->state == IBV_QPS_RESET) {
      // Nobody acknowledges: the sender's retries run out.
      complete(q->cq, wr->wr_id, IBV_WC_RETRY_EXC_ERR, localOp, qp->qp_num);
      toError(q);
      continue;
    }
    if (wr->opcode != IBV_WR_SEND) {
      ibv_mr* mr = findMr(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, data.size(), IBV_ACCESS_REMOTE_WRITE);
      if (mr == nullptr) {
        complete(q->cq, wr->wr_id, IBV_WC_REM_ACCESS_ERR, localOp, qp->qp_num);
        toError(q);
        toError(peer);
        continue;
      }
      std::memcpy(reinterpret_cast<char*>(wr->wr.rdma.remote_addr), data.data(), data.size());
      (wr->opcode == IBV_WR_RDMA_WRITE ? g.plain : g.withImm) += 1;
    }
    if (wr->opcode != IBV_WR_RDMA_WRITE) {
      // Consumes the peer's next receive: a SEND's data lands in it; an immediate only completes it.
      if (peer->recvs.empty()) {
        complete(q->cq, wr->wr_id, IBV_WC_RNR_RETRY_EXC_ERR, localOp, qp->qp_num);
        toError(q);
        continue;
      }
      Qp::Recv r = peer->recvs.front();
      peer->recvs.pop_front();
      if (wr->opcode == IBV_WR_SEND) {
        if (data.size() > r.length) {
          complete(peer->cq, r.wrId, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, peer->qp.qp_num);
          complete(q->cq, wr->wr_id, IBV_WC_REM_INV_REQ_ERR, localOp, qp->qp_num);
          toError(peer);
          toError(q);
          continue;
        }
        std::memcpy(r.addr, data.data(), data.size());
        complete(peer->cq, r.wrId, IBV_WC_SUCCESS, IBV_WC_RECV, peer->qp.qp_num, static_cast<uint32_t>(data.size()));
      } else {
        complete(peer->cq, r.wrId, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, peer->qp.qp_num,
                 static_cast<uint32_t>(data.size()), wr->imm_data, true);
      }
    }
    if (wr->send_flags & IBV_SEND_SIGNALED) complete(q->cq, wr->wr_id, IBV_WC_SUCCESS, localOp, qp->qp_num);
  }
  *bad = nullptr;
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(g.mu);
  Qp* q = g.qps.at(qp->qp_num);
  for (; wr != nullptr; wr = wr->next) {
    *bad = wr;
    if (q->state == IBV_QPS_RESET || wr->num_sge != 1 ||
        findMr(wr->sg_list[0].lkey, wr->sg_list[0].addr, wr->sg_list[0].length, IBV_ACCESS_LOCAL_WRITE) == nullptr)
      return errno = EINVAL;
    if (q->state == IBV_QPS_ERR) {
      complete(q->cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qp_num);
      continue;
    }
    q->recvs.push_back({wr->wr_id, reinterpret_cast<char*>(wr->sg_list[0].addr), wr->sg_list[0].length});
  }
  *bad = nullptr;
  return 0;
}

int pollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(g.mu);
  auto& q = g.cqs[cq];
  int k = 0;
  for (; k < n && !q.empty(); ++k) {
    wc[k] = q.front();
    q.pop_front();
  }
  return k;
}

int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard<std::mutex> lock(g.mu);
  Qp* q = g.qps.at(qp->qp_num);
  if (!(mask & IBV_QP_STATE)) return errno = EINVAL;
  // The transitions a real device accepts, in order.
  const ibv_qp_state want = attr->qp_state;
  const bool ok = (want == IBV_QPS_INIT && q->state == IBV_QPS_RESET) ||
                  (want == IBV_QPS_RTR && q->state == IBV_QPS_INIT && (mask & IBV_QP_DEST_QPN) && (mask & IBV_QP_AV)) ||
                  (want == IBV_QPS_RTS && q->state == IBV_QPS_RTR) || want == IBV_QPS_ERR;
  if (!ok) return errno = EINVAL;
  if (want == IBV_QPS_RTR) q->dest = attr->dest_qp_num;
  if (want == IBV_QPS_ERR) toError(q);
  q->state = want;
  return 0;
}

const VerbsApi kApi = {
    "emulated",
    [](int* n) {
      *n = 1;
      return g.list;
    },
    [](ibv_device**) {},
    [](ibv_device* d) {
      auto* c = new ibv_context{};
      c->device = d;
      return c;
    },
    [](ibv_context*) { return 0; },
    [](ibv_context*, ibv_device_attr* a) {
      *a = ibv_device_attr{};
      a->phys_port_cnt = 1;
      return 0;
    },
    [](ibv_context*, uint8_t port, ibv_port_attr* a) {
      *a = ibv_port_attr{};
      a->state = g.options.portActive ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
      a->link_layer = g.options.roce || g.options.iwarp ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
      a->lid = g.options.roce ? 0 : 7;
      a->active_mtu = IBV_MTU_1024;
      a->gid_tbl_len = 2;
      return port == 1 ? 0 : EINVAL;
    },
    [](ibv_context*, uint8_t, int index, ibv_gid* gid) {
      *gid = ibv_gid{};
      if (index > 1) return EINVAL;
      gid->raw[10] = gid->raw[11] = 0xff;  // ::ffff:10.0.0.1, the RoCE v2 form of an IPv4 address
      gid->raw[12] = 10;
      gid->raw[15] = static_cast<uint8_t>(1 + index);
      return 0;
    },
    [](ibv_context*, uint8_t, int index) { return index == 1 ? 2 : 1; },
    [](ibv_context* c) {
      auto* pd = new ibv_pd{};
      pd->context = c;
      return pd;
    },
    [](ibv_pd* pd) {
      delete pd;
      return 0;
    },
    [](ibv_pd* pd, void* addr, size_t length, int access) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* mr = new ibv_mr{};
      mr->pd = pd;
      mr->context = pd->context;
      mr->addr = addr;
      mr->length = length;
      mr->lkey = mr->rkey = g.nextKey++;
      g.mrs[mr->lkey] = mr;
      g.access[mr->lkey] = access | IBV_ACCESS_LOCAL_WRITE;
      return mr;
    },
    [](ibv_mr* mr) {
      std::lock_guard<std::mutex> lock(g.mu);
      g.mrs.erase(mr->lkey);
      g.access.erase(mr->lkey);
      delete mr;
      return 0;
    },
    [](ibv_context* c, int cqe) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* cq = new ibv_cq{};
      cq->context = c;
      cq->cqe = cqe;
      g.cqs[cq];
      return cq;
    },
    [](ibv_cq* cq) {
      std::lock_guard<std::mutex> lock(g.mu);
      g.cqs.erase(cq);
      delete cq;
      return 0;
    },
    [](ibv_pd* pd, ibv_qp_init_attr* attr) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto* q = new Qp();
      q->qp.context = pd->context;
      q->qp.pd = pd;
      q->qp.qp_num = g.nextQpn++;
      q->qp.qp_type = attr->qp_type;
      q->cq = attr->recv_cq;
      g.qps[q->qp.qp_num] = q;
      return &q->qp;
    },
    modifyQp,
    [](ibv_qp* qp) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto it = g.qps.find(qp->qp_num);
      delete it->second;
      g.qps.erase(it);
      return 0;
    },
    postSend,
    postRecv,
    pollCq,
};

}  // namespace

const VerbsApi& install(const Options& options) {
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.options = options;
    g.device = ibv_device{};
    std::strcpy(g.device.name, options.iwarp ? "emu_siw0" : options.roce ? "emu_rxe0" : "emu_ib0");
    g.device.transport_type = options.iwarp ? IBV_TRANSPORT_IWARP : IBV_TRANSPORT_IB;
    g.withImm = g.plain = 0;
  }
  // A fresh table address per install: the transport caches its device per table.
  static std::deque<VerbsApi> tables;
  tables.push_back(kApi);
  setVerbsApiForTesting(&tables.back());
  return tables.back();
}

void breakAllQueuePairs() {
  std::lock_guard<std::mutex> lock(g.mu);
  for (auto& [qpn, q] : g.qps) toError(q);
}

uint64_t writesWithImm() {
  std::lock_guard<std::mutex> lock(g.mu);
  return g.withImm;
}

uint64_t plainWrites() {
  std::lock_guard<std::mutex> lock(g.mu);
  return g.plain;
}

}  // namespace emulated
}  // namespace loom
