#include "transport/emulated_verbs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/emulated_verbs_state.h"

namespace loom {
namespace emulated {

namespace detail {

State g;

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

// Whether the first and last byte of [addr, addr + length) can be read by this process.
bool readable(const void* addr, size_t length) {
  for (const char* p : {static_cast<const char*>(addr), static_cast<const char*>(addr) + length - 1}) {
    char byte;
    iovec local{&byte, 1}, remote{const_cast<char*>(p), 1};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != 1) return false;
  }
  return true;
}

// A registered range that covers [addr, addr+length) under `key` and allows `access`, or null.
ibv_mr* findMr(uint32_t key, uint64_t addr, uint64_t length, int access) {
  auto it = g.mrs.find(key);
  if (it == g.mrs.end()) return nullptr;
  ibv_mr* mr = it->second;
  const uint64_t base = reinterpret_cast<uint64_t>(mr->addr);
  if (addr < base || addr - base > mr->length || length > mr->length - (addr - base)) return nullptr;
  if ((g.access[key] & access) != access) return nullptr;
  // On-demand paging faults the pages in at the access: an address the process cannot reach fails now.
  if (g.onDemand[key] && length > 0 && !readable(reinterpret_cast<const void*>(addr), length)) return nullptr;
  return mr;
}

// The emulator's address of byte `addr` of region `mr` (for a dma-buf region, inside its mapping).
char* hostOf(const ibv_mr* mr, uint64_t addr) {
  char* at = g.hostAt[mr->lkey];
  if (at == nullptr) return reinterpret_cast<char*>(addr);  // an implicit region: every address is its own
  return at + (addr - reinterpret_cast<uint64_t>(mr->addr));
}

// An RDMA READ: the peer's registered bytes (its region must allow remote reads) land in the local
// scatter list (which must allow local writes).  Caller holds g.mu; q is in RTS.
void postRead(Qp* q, const ibv_send_wr* wr) {
  const uint32_t qpn = q->qp.qp_num;
  auto peerIt = g.qps.find(q->dest);
  Qp* peer = peerIt == g.qps.end() ? nullptr : peerIt->second;
  if (peer == nullptr || peer->state == IBV_QPS_ERR || peer->state == IBV_QPS_RESET) {
    complete(q->cq, wr->wr_id, IBV_WC_RETRY_EXC_ERR, IBV_WC_RDMA_READ, qpn);
    toError(q);
    return;
  }
  uint64_t total = 0;
  for (int k = 0; k < wr->num_sge; ++k) total += wr->sg_list[k].length;
  const ibv_mr* remote = findMr(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, total, IBV_ACCESS_REMOTE_READ);
  if (remote == nullptr) {
    complete(q->cq, wr->wr_id, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ, qpn);
    toError(q);
    toError(peer);
    return;
  }
  const char* from = hostOf(remote, wr->wr.rdma.remote_addr);
  for (int k = 0; k < wr->num_sge; ++k) {
    const ibv_sge& sge = wr->sg_list[k];
    // iWARP places read responses like tagged writes: the sink must allow remote writes too.
    const int sink = IBV_ACCESS_LOCAL_WRITE | (g.options.iwarp ? IBV_ACCESS_REMOTE_WRITE : 0);
    const ibv_mr* local = findMr(sge.lkey, sge.addr, sge.length, sink);
    if (local == nullptr) {
      complete(q->cq, wr->wr_id, IBV_WC_LOC_PROT_ERR, IBV_WC_RDMA_READ, qpn);
      toError(q);
      return;
    }
    std::memcpy(hostOf(local, sge.addr), from, sge.length);
    from += sge.length;
  }
  ++g.reads;
  g.bytesMoved += total;
  if (wr->send_flags & IBV_SEND_SIGNALED) complete(q->cq, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, qpn, static_cast<uint32_t>(total));
}

ibv_wc_opcode completionOf(ibv_wr_opcode op) {
  return op == IBV_WR_SEND ? IBV_WC_SEND : op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
}

int postSendLocked(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  int pauseMs = 0, rc;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (const ibv_send_wr* w = wr; w != nullptr && !g.firstSendPosted; w = w->next)
      if (w->opcode == IBV_WR_SEND) g.firstSendPosted = true, pauseMs = g.options.pauseAfterFirstSendMs;
    rc = postSendLocked(qp, wr, bad);
  }
  if (pauseMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pauseMs));  // outside the lock
  return rc;
}

int postSendLocked(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp* q = g.qps.at(qp->qp_num);
  for (; wr != nullptr; wr = wr->next) {
    *bad = wr;
    if (q->state == IBV_QPS_ERR) {  // as hardware does: accepted, then flushed with an error completion
      complete(q->cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, completionOf(wr->opcode), qp->qp_num);
      continue;
    }
    if (q->state != IBV_QPS_RTS) return errno = EINVAL;
    if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && g.options.iwarp) return errno = EOPNOTSUPP;
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM && wr->opcode != IBV_WR_SEND &&
        wr->opcode != IBV_WR_RDMA_READ)
      return errno = EINVAL;
    if (wr->opcode == IBV_WR_RDMA_READ) {
      postRead(q, wr);
      continue;
    }
    // Gather the local data (inline data is read at post time, without a key).
    std::vector<char> data;
    bool localOk = true;
    for (int k = 0; k < wr->num_sge; ++k) {
      const ibv_sge& sge = wr->sg_list[k];
      const char* p = reinterpret_cast<const char*>(sge.addr);
      if (!(wr->send_flags & IBV_SEND_INLINE)) {
        const ibv_mr* mr = findMr(sge.lkey, sge.addr, sge.length, 0);
        if (mr == nullptr) {
          localOk = false;
          continue;
        }
        p = hostOf(mr, sge.addr);
      }
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
      // A probe's empty vector has no data pointer, and memcpy from null is undefined even for 0 bytes.
      if (!data.empty()) std::memcpy(hostOf(mr, wr->wr.rdma.remote_addr), data.data(), data.size());
      g.bytesMoved += data.size();
      if (!data.empty() || wr->opcode != IBV_WR_RDMA_WRITE) {  // a zero-length write is a probe, not a frame
        (wr->opcode == IBV_WR_RDMA_WRITE ? g.plain : g.withImm) += 1;
        ++g.writesByQpn[qp->qp_num];
      }
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
        if (!data.empty()) std::memcpy(r.addr, data.data(), data.size());  // (null data: see above)
        g.bytesMoved += data.size();
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
    size_t pick = 0;
    if (g.options.shuffleAcrossQps) {
      // The first completion of a queue pair chosen at random among those waiting: per queue pair the
      // order holds, across them it does not.
      std::vector<size_t> heads;
      for (size_t i = 0; i < q.size(); ++i) {
        bool first = true;
        for (size_t j = 0; j < i && first; ++j) first = q[j].qp_num != q[i].qp_num;
        if (first) heads.push_back(i);
      }
      g.shuffleState ^= g.shuffleState << 13, g.shuffleState ^= g.shuffleState >> 7, g.shuffleState ^= g.shuffleState << 17;
      pick = heads[g.shuffleState % heads.size()];
    }
    wc[k] = q[pick];
    q.erase(q.begin() + static_cast<long>(pick));
  }
  return k;
}

// Caller holds g.mu.
ibv_qp* newQp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  auto* q = new Qp();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.qp_num = g.nextQpn++;
  q->qp.qp_type = attr->qp_type;
  q->cq = attr->recv_cq;
  g.qps[q->qp.qp_num] = q;
  return &q->qp;
}

void deleteQp(uint32_t qpn) {
  auto it = g.qps.find(qpn);
  delete it->second;
  g.qps.erase(it);
}

int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard<std::mutex> lock(g.mu);
  Qp* q = g.qps.at(qp->qp_num);
  if (!(mask & IBV_QP_STATE)) return errno = EINVAL;
  // The transitions a real device accepts, in order.
  const ibv_qp_state want = attr->qp_state;
  // An iWARP device's connection state lives in the kernel: only rdma_cm connects its queue pairs.
  if (g.options.iwarp && (want == IBV_QPS_RTR || want == IBV_QPS_RTS)) return errno = EINVAL;
  const bool ok = (want == IBV_QPS_INIT && q->state == IBV_QPS_RESET) ||
                  (want == IBV_QPS_RTR && q->state == IBV_QPS_INIT && (mask & IBV_QP_DEST_QPN) && (mask & IBV_QP_AV)) ||
                  (want == IBV_QPS_RTS && q->state == IBV_QPS_RTR) || want == IBV_QPS_ERR;
  if (!ok) return errno = EINVAL;
  if (want == IBV_QPS_RTR) q->dest = attr->dest_qp_num;
  if (want == IBV_QPS_ERR) toError(q);
  q->state = want;
  return 0;
}

}  // namespace detail

using namespace detail;

namespace {

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
    [](ibv_context* c) {
      delete c;
      return 0;
    },
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
    [](ibv_pd* pd, void* addr, size_t length, int access) -> ibv_mr* {
      const bool onDemand = (access & IBV_ACCESS_ON_DEMAND) != 0;
      const bool implicit = onDemand && addr == nullptr && length == SIZE_MAX;
      if (onDemand && (g.options.odp == Options::Odp::kNone || (implicit && g.options.odp != Options::Odp::kImplicit)))
        return errno = EOPNOTSUPP, nullptr;
      // Pinning fails on memory the process cannot read (as the kernel's get_user_pages does on an
      // inaccessible mapping, such as GPU memory without a peer-memory module): EFAULT.  On-demand
      // paging pins nothing: its accesses are checked when they happen.
      if (!onDemand && length > 0 && !readable(addr, length)) return errno = EFAULT, nullptr;
      std::lock_guard<std::mutex> lock(g.mu);
      auto* mr = new ibv_mr{};
      mr->pd = pd;
      mr->context = pd->context;
      mr->addr = addr;
      mr->length = length;
      mr->lkey = mr->rkey = g.nextKey++;
      g.mrs[mr->lkey] = mr;
      g.access[mr->lkey] = access | IBV_ACCESS_LOCAL_WRITE;
      g.hostAt[mr->lkey] = static_cast<char*>(addr);
      g.onDemand[mr->lkey] = onDemand;
      return mr;
    },
    // A dma-buf (an emulated device allocation's memfd): mapped here, as a NIC maps the GPU's pages.
    [](ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) -> ibv_mr* {
      const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
      const size_t skip = offset % page, bytes = skip + length;
      void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset - skip));
      if (map == MAP_FAILED) return nullptr;
      std::lock_guard<std::mutex> lock(g.mu);
      auto* mr = new ibv_mr{};
      mr->pd = pd;
      mr->context = pd->context;
      mr->addr = reinterpret_cast<void*>(iova);
      mr->length = length;
      mr->lkey = mr->rkey = g.nextKey++;
      g.mrs[mr->lkey] = mr;
      g.access[mr->lkey] = access | IBV_ACCESS_LOCAL_WRITE;
      g.hostAt[mr->lkey] = static_cast<char*>(map) + skip;
      g.mappedBytes[mr->lkey] = bytes;
      ++g.dmabufRegistrations;
      return mr;
    },
    [](ibv_mr* mr) {
      std::lock_guard<std::mutex> lock(g.mu);
      auto mapped = g.mappedBytes.find(mr->lkey);
      if (mapped != g.mappedBytes.end()) {
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        char* start = g.hostAt[mr->lkey];
        munmap(start - (reinterpret_cast<uintptr_t>(start) % page), mapped->second);
        g.mappedBytes.erase(mapped);
      }
      g.mrs.erase(mr->lkey);
      g.access.erase(mr->lkey);
      g.hostAt.erase(mr->lkey);
      g.onDemand.erase(mr->lkey);
      delete mr;
      return 0;
    },
    [](ibv_context*, uint64_t* general, uint32_t* rc) {
      *general = g.options.odp == Options::Odp::kNone       ? 0
                 : g.options.odp == Options::Odp::kExplicit ? uint64_t{IBV_ODP_SUPPORT}
                                                             : uint64_t{IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT};
      *rc = *general != 0 ? IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ : 0;
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
      return newQp(pd, attr);
    },
    modifyQp,
    [](ibv_qp* qp) {
      std::lock_guard<std::mutex> lock(g.mu);
      deleteQp(qp->qp_num);
      return 0;
    },
    postSend,
    postRecv,
    pollCq,
    &kCm,
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
    g.firstSendPosted = false;
    g.reads = g.dmabufRegistrations = g.bytesMoved = 0;
    g.writesByQpn.clear();
    g.cmEstablished = g.cmRejected = 0;
    g.cmContext = ibv_context{};
    g.cmContext.device = &g.device;
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

namespace {
uint64_t counter(const uint64_t State::*which) {
  std::lock_guard<std::mutex> lock(g.mu);
  return g.*which;
}
}  // namespace

uint64_t writesWithImm() { return counter(&State::withImm); }
uint64_t plainWrites() { return counter(&State::plain); }
uint64_t cmEstablished() { return counter(&State::cmEstablished); }
std::vector<uint64_t> writesPerQp() {
  std::lock_guard<std::mutex> lock(g.mu);
  std::vector<uint64_t> v;
  for (const auto& [qpn, n] : g.writesByQpn) v.push_back(n);
  return v;
}
uint64_t cmRejected() { return counter(&State::cmRejected); }
uint64_t reads() { return counter(&State::reads); }
uint64_t bytesMoved() { return counter(&State::bytesMoved); }
uint64_t dmabufRegistrations() { return counter(&State::dmabufRegistrations); }
uint64_t dmabufRegionsNow() {
  std::lock_guard<std::mutex> lock(g.mu);
  return g.mappedBytes.size();
}

}  // namespace emulated
}  // namespace loom
