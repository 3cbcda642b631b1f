// One RC connection of the ib transport: its queue pairs with their completion queue and registered
// buffers (IbConnection), and the rdma_cm endpoint that connects them where the device needs rdma_cm.
#pragma once

#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "base/socket.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/mr_cache.h"
#include "transport/net/hello.h"
#include "transport/net/relay_queue.h"

namespace loom {

static_assert(sizeof(FrameHeader) == kHeaderBytes, "slot header layout");

// What each side tells the other over the TCP exchange.
struct QpInfo {
  uint32_t qpn, psn;
  uint16_t lid;
  uint8_t mtu, hasGid;
  uint8_t gid[16];
  uint64_t slots;      // receiver: address of slot 0 (header first)
  uint32_t rkey;       // receiver: key of the slot region
  uint32_t nslots;
  uint64_t stride;     // bytes from one slot to the next (header + slot)
};

// rdma_connect/rdma_accept parameters: one outstanding read each way (the protocol only writes and
// sends), hardware retries as in the attribute mode, `data` as private data (the sender's hello; the
// receiver's slot description).
rdma_conn_param connParam(const void* data, size_t bytes);

// An rdma_cm identifier on its own event channel (rdma_cm connection mode).  The receiver's holds the
// listening id and, once a request is accepted, the connection's id; events are awaited by polling the
// channel's descriptor, so every wait is bounded and stoppable.
class CmEndpoint {
 public:
  struct Event {
    rdma_cm_event_type type;
    int status;
    rdma_cm_id* id;
    std::string privateData;
  };
  explicit CmEndpoint(const RdmaCmApi& cm) : cm_(cm) {}
  ~CmEndpoint() {
    for (rdma_cm_id* c : conns_) cm_.destroyId(c);
    if (id_ != nullptr) cm_.destroyId(id_);
    if (channel_ != nullptr) cm_.destroyEventChannel(channel_);
  }
  const RdmaCmApi& api() const { return cm_; }
  bool open(std::string* why) {
    channel_ = cm_.createEventChannel();
    if (channel_ == nullptr || cm_.createId(channel_, &id_, nullptr, RDMA_PS_TCP) != 0)
      return *why = "cannot create an rdma_cm identifier: " + std::string(strerror(errno)), false;
    return true;
  }
  rdma_cm_id* id() const { return id_; }
  // A connection's id on the receiving side (owned from here on).
  void adoptConnection(rdma_cm_id* id) { conns_.push_back(id); }
  // The next event, acknowledged (its private data copied out first).
  bool next(const Deadline& deadline, const std::atomic<bool>* stop, Event* e, std::string* why) {
    for (;;) {
      if (stop != nullptr && stop->load()) return *why = "stopped", false;
      if (deadline.expired()) return *why = "no rdma_cm event within the timeout", false;
      pollfd p{channel_->fd, POLLIN, 0};
      const int r = ::poll(&p, 1, deadline.remainingMs(100));
      if (r < 0 && errno != EINTR) return *why = "polling the rdma_cm channel failed", false;
      if (r <= 0) continue;
      rdma_cm_event* ev = nullptr;
      if (cm_.getEvent(channel_, &ev) != 0) continue;
      e->type = ev->event;
      e->status = ev->status;
      e->id = ev->id;
      const auto* data = static_cast<const char*>(ev->param.conn.private_data);
      e->privateData.assign(data != nullptr ? data : "", data != nullptr ? ev->param.conn.private_data_len : 0);
      cm_.ackEvent(ev);
      return true;
    }
  }
  // Waits for an event of type `want`; any failure event ends the wait with its name.
  bool expect(rdma_cm_event_type want, const Deadline& deadline, const std::atomic<bool>* stop, Event* e,
              std::string* why) {
    if (!next(deadline, stop, e, why)) return false;
    if (e->type == want) return true;
    *why = std::string("rdma_cm: ") + cm_.eventName(e->type) + " while waiting for " + cm_.eventName(want) +
           " (status " + std::to_string(e->status) + ")";
    return false;
  }

 private:
  const RdmaCmApi& cm_;
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  std::vector<rdma_cm_id*> conns_;
};

static_assert(sizeof(NetHello) <= 56, "the hello must fit rdma_connect's private data on InfiniBand");
static_assert(sizeof(QpInfo) <= 196, "the slot description must fit rdma_accept's private data on InfiniBand");

// One connection's verbs resources: the slot ring and the note buffers, registered once; one completion
// queue; and LOOM_IB_QPS_PER_CONNECTION RC queue pairs.  The frame for the peer's slot s travels on queue
// pair s % count, with its notification, and the credit for slot s comes back on the same one: several
// queue pairs let the device (and, on a multi-path fabric, the network) move frames in parallel.
// Completions of different queue pairs arrive in any order; each names its slot.
class IbConnection {
 public:
  IbConnection(const IbDevice& dev, size_t nslots, size_t slotBytes, int nqps)
      : dev_(dev), api_(*dev.api), nslots_(nslots), qps_(static_cast<size_t>(nqps)) {
    stride_ = (kHeaderBytes + slotBytes + 63) & ~size_t{63};
  }
  ~IbConnection() {
    for (Qp& q : qps_) {
      if (q.qp == nullptr) continue;
      if (q.cmId != nullptr) cmApi_->destroyQp(q.cmId);
      else api_.destroyQp(q.qp);
    }
    if (cq_ != nullptr) api_.destroyCq(cq_);
    // No queue pair can write into them any more: the next connection may have them.
    releaseRegistered(api_, &slots_);
    releaseRegistered(api_, &notes_);
    endpoints_.clear();  // the identifiers go after their queue pairs
  }
  int nqps() const { return static_cast<int>(qps_.size()); }

  // QP-exchange mode: registers on the device's own context and creates every queue pair by verbs.
  loomResult_t create() {
    LOOM_CHECK(registerOn(dev_.context, dev_.pd));
    for (Qp& q : qps_) {
      ibv_qp_init_attr a = initAttr();
      q.qp = api_.createQp(dev_.pd, &a);
      if (q.qp == nullptr)
        return setError(loomSystemError, "ib %s: cannot create a queue pair (%s)", dev_.name.c_str(), strerror(errno));
      q.psn = static_cast<uint32_t>(randomNetToken() & 0xffffff);
    }
    return loomSuccess;
  }
  // rdma_cm mode: registers the buffers on the device context rdma_cm chose, in its protection domain.
  // The receiver does it as soon as its listener is bound (its ring must exist before the connection
  // does); the sender once its first identifier is resolved.
  bool prepareOnCm(ibv_context* context, std::string* why) {
    if (context == nullptr) return *why = "rdma_cm gave no device context (the address is on no RDMA device)", false;
    cmPd_ = protectionDomainOf(api_, context);
    if (cmPd_ == nullptr) return *why = "cannot allocate a protection domain", false;
    if (registerOn(context, cmPd_) != loomSuccess) return *why = lastError(), false;
    cmContext_ = context;
    return true;
  }
  // rdma_cm mode: queue pair k is made on connection `id`, which must be on the same device context.
  bool createOnCm(int k, rdma_cm_id* id, const RdmaCmApi& cm, std::string* why) {
    if (cq_ == nullptr && !prepareOnCm(id->verbs, why)) return false;
    if (id->verbs != cmContext_)
      return *why = "rdma_cm resolved the queue pairs of one connection to different devices", false;
    cmApi_ = &cm;
    ibv_qp_init_attr a = initAttr();
    if (cm.createQp(id, cmPd_, &a) != 0 || id->qp == nullptr)
      return *why = "rdma_create_qp failed: " + std::string(strerror(errno)), false;
    Qp& q = qps_[static_cast<size_t>(k)];
    q.qp = id->qp;
    q.cmId = id;
    if (!postReceives(k)) return *why = "cannot post receives", false;
    return true;
  }
  // Keeps an rdma_cm endpoint (its identifiers and channel) until the queue pairs are gone.
  void keep(std::unique_ptr<CmEndpoint> endpoint) { endpoints_.push_back(std::move(endpoint)); }

  void setPeer(const QpInfo& peer) { peer_ = peer; }
  const QpInfo& peer() const { return peer_; }
  QpInfo info(int k) const {
    const Qp& q = qps_[static_cast<size_t>(k)];
    QpInfo i{};
    i.qpn = q.qp->qp_num;
    i.psn = q.psn;
    i.lid = dev_.portAttr.lid;
    i.mtu = static_cast<uint8_t>(dev_.portAttr.active_mtu);
    i.hasGid = dev_.gidIndex >= 0;
    std::memcpy(i.gid, dev_.gid.raw, 16);
    i.slots = reinterpret_cast<uint64_t>(slots_.data);
    i.rkey = slots_.mr->rkey;
    i.nslots = static_cast<uint32_t>(nslots_);
    i.stride = stride_;
    return i;
  }
  // Queue pair k: RESET -> INIT -> RTR -> RTS against the peer's description, then its receive buffers
  // are posted.
  loomResult_t connect(int k, const QpInfo& peer) {
    peer_ = peer;
    ibv_qp* qp = qps_[static_cast<size_t>(k)].qp;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = dev_.port;
    // Remote reads: a direct frame's receiver reads the sender's buffer (GPUDirect RDMA).
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE;
    if (api_.modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
      return fail("INIT");
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min<int>(peer.mtu, dev_.portAttr.active_mtu));
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = peer.lid;
    a.ah_attr.port_num = dev_.port;
    if (peer.hasGid) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev_.gidIndex);
      a.ah_attr.grh.hop_limit = 255;
    }
    if (api_.modifyQp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
      return fail("RTR");
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = qps_[static_cast<size_t>(k)].psn;
    a.max_rd_atomic = 1;
    if (api_.modifyQp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) != 0)
      return fail("RTS");
    if (!postReceives(k)) return setError(loomSystemError, "ib %s: cannot post receives", dev_.name.c_str());
    return loomSuccess;
  }

  char* slot(size_t i) { return slots_.data + i * stride_; }
  // Whether `p` lies in this connection's slot ring.
  bool inRing(const void* p) const {
    const char* c = static_cast<const char*>(p);
    return c >= slots_.data && c < slots_.data + nslots_ * stride_;
  }
  // The device context the queue pairs are on.
  ibv_context* context() const { return cmContext_ != nullptr ? cmContext_ : dev_.context; }
  // The protection domain the queue pairs are on (registrations must be made there).
  ibv_pd* pd() const { return cmPd_ != nullptr ? cmPd_ : dev_.pd; }
  const VerbsApi& api() const { return api_; }
  size_t nslots() const { return nslots_; }
  // The queue pair that carries everything about the peer's slot `remote`.
  int qpOf(size_t remote) const { return static_cast<int>(remote % qps_.size()); }

  // A small message to the peer on queue pair k (credit or write notification), sent inline: no buffer
  // to keep alive.
  bool postNote(int k, uint64_t index, std::string* why) {
    uint64_t note[2] = {index, 0};
    ibv_sge sge{reinterpret_cast<uint64_t>(note), kNoteBytes, 0};
    ibv_send_wr wr{};
    wr.wr_id = kNoteWr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (api_.postSend(qps_[static_cast<size_t>(k)].qp, &wr, &bad) != 0)
      return *why = "cannot post a send: " + std::string(strerror(errno)), false;
    ++outstanding_;
    return true;
  }
  // Writes local slot `local` (header and `bytes`) into the peer's slot `remote`, signalled by an
  // immediate unless that failed once (then by a note on the same queue pair, which the write precedes).
  // With `payload`, the bytes after the header come from there (a caller's buffer: zero copy) instead
  // of the slot.
  bool postWrite(size_t local, size_t remote, size_t bytes, std::string* why, const ibv_sge* payload = nullptr) {
    const int k = qpOf(remote);
    ibv_qp* qp = qps_[static_cast<size_t>(k)].qp;
    ibv_sge sge[2] = {{reinterpret_cast<uint64_t>(slot(local)),
                       static_cast<uint32_t>(kHeaderBytes + (payload != nullptr ? 0 : bytes)), slots_.mr->lkey},
                      payload != nullptr ? *payload : ibv_sge{}};
    ibv_send_wr wr{};
    wr.wr_id = kWriteWr;
    wr.sg_list = sge;
    wr.num_sge = payload != nullptr ? 2 : 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer_.slots + remote * peer_.stride;
    wr.wr.rdma.rkey = peer_.rkey;
    ibv_send_wr* bad = nullptr;
    if (usesImm()) {
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = htonl(static_cast<uint32_t>(remote));
      if (api_.postSend(qp, &wr, &bad) == 0) return ++outstanding_, true;
      LOOM_INFO(kNet, "ib %s: RDMA WRITE WITH IMMEDIATE refused (%s); notifying by SEND from now on",
                dev_.name.c_str(), strerror(errno));
      useImm_ = false;
    }
    wr.opcode = IBV_WR_RDMA_WRITE;
    if (api_.postSend(qp, &wr, &bad) != 0) return *why = "cannot post an RDMA write: " + std::string(strerror(errno)), false;
    ++outstanding_;
    return postNote(k, remote, why);
  }
  bool usesImm() const { return useImm_ && !dev_.iwarp && params().IB_WRITE_IMM != 0; }

  // A zero-length RDMA WRITE to the peer: it carries nothing and needs no credit, but it fails (retries
  // exhausted) when the peer's queue pair is gone, which a sender waiting for credits would otherwise
  // never learn (nothing else of its own is in flight).
  bool postProbe(std::string* why) {
    ibv_send_wr wr{};
    wr.wr_id = kWriteWr;
    wr.num_sge = 0;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer_.slots;
    wr.wr.rdma.rkey = peer_.rkey;
    ibv_send_wr* bad = nullptr;
    if (api_.postSend(qps_[0].qp, &wr, &bad) != 0)
      return *why = "cannot post a probe: " + std::string(strerror(errno)), false;
    ++outstanding_;
    return true;
  }

  // Polls the completion queue until done() (sleeping in growing steps up to 1 ms once nothing comes:
  // never a long busy spin).  Incoming notes and immediates go to onNote(index).
  // A failed completion (or a failure noted with fail()) breaks the connection for good, but what
  // arrived before it is still delivered: the queue is drained and done() asked before the failure is
  // reported.  (A receiver's credit to a sender that flushed its last frame and left fails; the frame
  // must not be lost to that.)
  template <typename Done, typename OnNote>
  bool progressUntil(Done done, OnNote onNote, const std::atomic<bool>& stop, std::string* why) {
    int idleUs = 0;
    for (int spins = 0;; ++spins) {
      ibv_wc wc[16];
      const int n = api_.pollCq(cq_, 16, wc);
      if (n < 0) fail("polling the completion queue failed");
      for (int k = 0; k < n; ++k) {
        if (wc[k].status != IBV_WC_SUCCESS) {
          fail(std::string("queue pair error: ") + wcStatusText(wc[k].status));
        } else if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          onNote(ntohl(wc[k].imm_data));
          if (!postRecv(wc[k].wr_id)) fail("cannot repost a receive");
        } else if (wc[k].opcode == IBV_WC_RECV) {
          uint64_t note = 0;
          std::memcpy(&note, notes_.data + wc[k].wr_id * kNoteBytes, sizeof note);
          onNote(note);
          if (!postRecv(wc[k].wr_id)) fail("cannot repost a receive");
        } else if (wc[k].wr_id == kReadWr) {
          ++readsDone_;
        } else {
          --outstanding_;  // our own write or note completed
        }
      }
      if (done()) return true;
      if (!failure_.empty() && n <= 0) return *why = failure_, false;
      if (stop.load()) return *why = "stopped", false;
      if (n > 0) {
        idleUs = 0;
        continue;
      }
      if (spins < 200) continue;
      idleUs = std::min(1000, idleUs == 0 ? 20 : idleUs * 2);
      std::this_thread::sleep_for(std::chrono::microseconds(idleUs));
    }
  }
  // Notes the connection's first failure; progressUntil reports it once nothing more is delivered.
  void fail(const std::string& why) {
    if (failure_.empty()) failure_ = why;
  }
  int outstanding() const { return outstanding_; }

  // Reads `bytes` of the peer's region (address, key) into dst (local key `lkey`), one RDMA READ of at
  // most 1 GiB at a time (one read in flight: the queue pairs allow one), on queue pair 0.  onNote and
  // `between` as for progressUntil.
  template <typename OnNote, typename Between>
  bool read(uint32_t lkey, char* dst, uint64_t address, uint32_t key, size_t bytes, OnNote onNote, Between between,
            const std::atomic<bool>& stop, std::string* why) {
    constexpr size_t kMaxRead = size_t{1} << 30;
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(kMaxRead, bytes - done);
      ibv_sge sge{reinterpret_cast<uint64_t>(dst + done), static_cast<uint32_t>(n), lkey};
      ibv_send_wr wr{};
      wr.wr_id = kReadWr;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_READ;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = address + done;
      wr.wr.rdma.rkey = key;
      ibv_send_wr* bad = nullptr;
      if (api_.postSend(qps_[0].qp, &wr, &bad) != 0)
        return *why = "cannot post an RDMA read: " + std::string(strerror(errno)), false;
      const uint64_t target = readsDone_ + 1;
      if (!progressUntil([&] { return between(), readsDone_ == target; }, onNote, stop, why)) return false;
      done += n;
    }
    return true;
  }

 private:
  struct Qp {
    ibv_qp* qp = nullptr;
    rdma_cm_id* cmId = nullptr;  // rdma_cm mode: the identifier the queue pair was made on
    uint32_t psn = 0;
  };
  static constexpr uint64_t kNoteWr = ~0ull, kWriteWr = ~0ull - 1, kReadWr = ~0ull - 2;
  // One receive per note that may be in flight on one queue pair (credits and notifications share them).
  size_t notesPerQp() const { return 2 * nslots_; }
  bool postReceives(int k) {
    for (size_t i = 0; i < notesPerQp(); ++i)
      if (!postRecv(static_cast<size_t>(k) * notesPerQp() + i)) return false;
    return true;
  }
  // Note buffer `buffer` belongs to queue pair buffer / notesPerQp().
  bool postRecv(size_t buffer) {
    ibv_sge sge{reinterpret_cast<uint64_t>(notes_.data + buffer * kNoteBytes), kNoteBytes, notes_.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = buffer;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return api_.postRecv(qps_[buffer / notesPerQp()].qp, &wr, &bad) == 0;
  }
  // The slot ring and the note buffers (receive buffers for incoming notes), from the registration cache.
  loomResult_t registerOn(ibv_context* context, ibv_pd* pd) {
    const bool ok =
        acquireRegistered(api_, pd, nslots_ * stride_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &slots_) &&
        acquireRegistered(api_, pd, qps_.size() * notesPerQp() * kNoteBytes, IBV_ACCESS_LOCAL_WRITE, &notes_) &&
        (cq_ = api_.createCq(context, static_cast<int>(qps_.size() * 4 * nslots_ + 16))) != nullptr;
    if (!ok)
      return setError(loomSystemError, "ib %s: cannot register memory or create a completion queue (%s)",
                      dev_.name.c_str(), strerror(errno));
    return loomSuccess;
  }
  ibv_qp_init_attr initAttr() const {
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = static_cast<uint32_t>(2 * nslots_ + 4);
    a.cap.max_recv_wr = static_cast<uint32_t>(notesPerQp());
    a.cap.max_send_sge = 2;  // a frame's header from its slot, its payload from the caller's buffer
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = kNoteBytes;
    return a;
  }
  loomResult_t fail(const char* state) {
    return setError(loomSystemError, "ib %s: cannot move the queue pair to %s (%s)", dev_.name.c_str(), state,
                    strerror(errno));
  }

  const IbDevice& dev_;
  const VerbsApi& api_;
  std::string failure_;  // the first failure (see progressUntil)
  size_t nslots_ = 0, stride_ = 0;
  RegisteredBuffer slots_, notes_;
  ibv_cq* cq_ = nullptr;
  std::vector<Qp> qps_;
  ibv_pd* cmPd_ = nullptr;                              // rdma_cm mode: the connection's context's
  ibv_context* cmContext_ = nullptr;                    // rdma_cm mode: that context
  const RdmaCmApi* cmApi_ = nullptr;                    // rdma_cm mode
  std::vector<std::unique_ptr<CmEndpoint>> endpoints_;  // rdma_cm mode
  QpInfo peer_{};
  bool useImm_ = true;
  int outstanding_ = 0;
  uint64_t readsDone_ = 0;
};

}  // namespace loom
