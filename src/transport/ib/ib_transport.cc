#include "transport/ib/ib_transport.h"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/params.h"
#include "core/socket.h"
#include "transport/ib/verbs_api.h"
#include "transport/net/hello.h"
#include "transport/net/staged_queue.h"

namespace loom {

namespace {

constexpr uint32_t kMagic = 0x4c4f4f49;    // "LOOI": queue pairs connected by attributes over TCP
constexpr uint32_t kMagicCm = 0x4c4f4f43;  // "LOOC": queue pairs connected through rdma_cm
constexpr size_t kHeaderBytes = 16;      // at the start of every slot: size, signature
constexpr size_t kNoteBytes = 16;        // a credit or a write notification: the slot index

static_assert(sizeof(FrameHeader) == kHeaderBytes, "slot header layout");

// ---- the device: chosen once per process (per verbs table, for tests) ----

struct IbDevice {
  const VerbsApi* api = nullptr;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 0;
  ibv_port_attr portAttr{};
  int gidIndex = -1;  // -1: no GID (InfiniBand by LID)
  ibv_gid gid{};
  bool iwarp = false;
  std::string name;
  std::string error;  // why there is no usable device
};

const IbDevice& ibDevice() {
  static std::mutex mu;
  // Open for the life of the process (never destroyed, so still reachable at exit: no leak reports).
  static auto* cache = new std::map<const VerbsApi*, IbDevice>();
  const VerbsApi& api = verbsApi();
  std::lock_guard<std::mutex> g(mu);
  auto it = cache->find(&api);
  if (it != cache->end()) return it->second;
  IbDevice& d = (*cache)[&api];
  d.api = &api;
  int n = 0;
  ibv_device** list = api.getDeviceList(&n);
  if (list == nullptr || n == 0) {
    d.error = "no RDMA device";
    if (list != nullptr) api.freeDeviceList(list);
    return d;
  }
  const std::string& spec = params().IB_HCA;
  for (int i = 0; i < n && d.context == nullptr; ++i) {
    const std::string name = list[i]->name;
    if (!spec.empty() && !interfaceMatches(spec, name)) continue;
    ibv_context* c = api.openDevice(list[i]);
    if (c == nullptr) continue;
    ibv_device_attr da{};
    if (api.queryDevice(c, &da) != 0) da.phys_port_cnt = 1;
    for (uint8_t p = 1; p <= da.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (api.queryPort(c, p, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
      d.context = c;
      d.port = p;
      d.portAttr = pa;
      d.name = name + ":" + std::to_string(p);
      d.iwarp = list[i]->transport_type == IBV_TRANSPORT_IWARP;
      break;
    }
    if (d.context == nullptr) api.closeDevice(c);
  }
  api.freeDeviceList(list);
  if (d.context == nullptr) {
    d.error = spec.empty() ? "no active RDMA port" : "no active RDMA port on a device matching LOOM_IB_HCA=" + spec;
    return d;
  }
  // GIDs: RoCE and iWARP address by GID; RoCE prefers a v2 entry (routable), LOOM_IB_GID_INDEX overrides.
  if (d.portAttr.link_layer == IBV_LINK_LAYER_ETHERNET || d.iwarp) {
    int chosen = static_cast<int>(params().IB_GID_INDEX);
    for (int i = 0; chosen < 0 && i < d.portAttr.gid_tbl_len; ++i) {
      ibv_gid entry{};
      if (api.queryGid(d.context, d.port, i, &entry) != 0 || (entry.global.subnet_prefix == 0 && entry.global.interface_id == 0))
        continue;
      if (api.gidType(d.context, d.port, i) == 2) chosen = i;
    }
    if (chosen < 0) chosen = 0;
    d.gidIndex = chosen;
    api.queryGid(d.context, d.port, chosen, &d.gid);
  }
  d.pd = api.allocPd(d.context);
  if (d.pd == nullptr) {
    d.error = "cannot allocate a protection domain on " + d.name;
    d.context = nullptr;
  }
  return d;
}

// ---- one RC queue pair with its completion queue and registered buffers ----

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
rdma_conn_param connParam(const void* data, size_t bytes) {
  rdma_conn_param p{};
  p.private_data = data;
  p.private_data_len = static_cast<uint8_t>(bytes);
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

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
    if (conn_ != nullptr) cm_.destroyId(conn_);
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
  // The connection's id on the receiving side (owned from here on).
  void adoptConnection(rdma_cm_id* id) { conn_ = id; }
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
  rdma_cm_id* conn_ = nullptr;
};

// Whether this device's queue pairs connect through rdma_cm (LOOM_IB_CM; iWARP needs it).
bool usesRdmaCm(const IbDevice& d) { return params().IB_CM == 1 || (params().IB_CM < 0 && d.iwarp); }

static_assert(sizeof(NetHello) <= 56, "the hello must fit rdma_connect's private data on InfiniBand");
static_assert(sizeof(QpInfo) <= 196, "the slot description must fit rdma_accept's private data on InfiniBand");

class IbQp {
 public:
  explicit IbQp(const IbDevice& dev) : dev_(dev), api_(*dev.api) {}
  ~IbQp() {
    if (qp_ != nullptr) {
      if (cm_ != nullptr) cm_->api().destroyQp(cmQpId_);
      else api_.destroyQp(qp_);
    }
    if (cq_ != nullptr) api_.destroyCq(cq_);
    for (ibv_mr* mr : {slotsMr_, notesMr_})
      if (mr != nullptr) api_.deregMr(mr);
    if (ownPd_ != nullptr) api_.deallocPd(ownPd_);
    cm_.reset();  // the identifiers go after their queue pair
  }
  // The slot ring and note buffers; registered later, on the context the queue pair lives on.
  void allocate(size_t nslots, size_t slotBytes) {
    nslots_ = nslots;
    stride_ = (kHeaderBytes + slotBytes + 63) & ~size_t{63};
    slots_.assign(nslots * stride_, 0);
    notes_.assign(2 * nslots * kNoteBytes, 0);  // receive buffers for incoming notes
  }
  // QP-exchange mode: registers on the device's own context and creates the queue pair by verbs.
  loomResult_t create(size_t nslots, size_t slotBytes) {
    allocate(nslots, slotBytes);
    LOOM_CHECK(registerOn(dev_.context, dev_.pd));
    ibv_qp_init_attr a = initAttr();
    qp_ = api_.createQp(dev_.pd, &a);
    if (qp_ == nullptr)
      return setError(loomSystemError, "ib %s: cannot create a queue pair (%s)", dev_.name.c_str(), strerror(errno));
    psn_ = static_cast<uint32_t>(randomNetToken() & 0xffffff);
    return loomSuccess;
  }
  // rdma_cm mode: the queue pair is made on connection `id` (whose device context rdma_cm chose), with
  // a protection domain of its own there; the endpoint is kept until the queue pair is gone.
  bool createOnCm(std::unique_ptr<CmEndpoint> endpoint, rdma_cm_id* id, std::string* why) {
    cm_ = std::move(endpoint);
    cmQpId_ = id;
    ownPd_ = id->verbs != nullptr ? api_.allocPd(id->verbs) : nullptr;
    if (ownPd_ == nullptr) return *why = "rdma_cm gave no device context for the connection", false;
    if (registerOn(id->verbs, ownPd_) != loomSuccess) return *why = lastError(), false;
    ibv_qp_init_attr a = initAttr();
    if (cm_->api().createQp(id, ownPd_, &a) != 0 || id->qp == nullptr)
      return *why = "rdma_create_qp failed: " + std::string(strerror(errno)), false;
    qp_ = id->qp;
    if (!postReceives()) return *why = "cannot post receives", false;
    return true;
  }
  CmEndpoint* cm() const { return cm_.get(); }
  void setPeer(const QpInfo& peer) { peer_ = peer; }
  QpInfo info() const {
    QpInfo i{};
    i.qpn = qp_->qp_num;
    i.psn = psn_;
    i.lid = dev_.portAttr.lid;
    i.mtu = static_cast<uint8_t>(dev_.portAttr.active_mtu);
    i.hasGid = dev_.gidIndex >= 0;
    std::memcpy(i.gid, dev_.gid.raw, 16);
    i.slots = reinterpret_cast<uint64_t>(slots_.data());
    i.rkey = slotsMr_->rkey;
    i.nslots = static_cast<uint32_t>(nslots_);
    i.stride = stride_;
    return i;
  }
  // RESET -> INIT -> RTR -> RTS against the peer's description, then the receive buffers are posted.
  loomResult_t connect(const QpInfo& peer) {
    peer_ = peer;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = dev_.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    if (api_.modifyQp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
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
    if (api_.modifyQp(qp_, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
      return fail("RTR");
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = psn_;
    a.max_rd_atomic = 1;
    if (api_.modifyQp(qp_, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC) != 0)
      return fail("RTS");
    if (!postReceives()) return setError(loomSystemError, "ib %s: cannot post receives", dev_.name.c_str());
    return loomSuccess;
  }
  // One receive per possible note in flight (credits and write notifications share them).
  bool postReceives() {
    for (size_t i = 0; i < 2 * nslots_; ++i)
      if (!postRecv(i)) return false;
    return true;
  }

  char* slot(size_t i) { return slots_.data() + i * stride_; }
  const QpInfo& peer() const { return peer_; }
  size_t nslots() const { return nslots_; }

  bool postRecv(size_t buffer) {
    ibv_sge sge{reinterpret_cast<uint64_t>(notes_.data() + buffer * kNoteBytes), kNoteBytes, notesMr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = buffer;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return api_.postRecv(qp_, &wr, &bad) == 0;
  }
  // A small message to the peer (credit or write notification), sent inline: no buffer to keep alive.
  bool postNote(uint64_t index, std::string* why) {
    uint64_t note[2] = {index, 0};
    ibv_sge sge{reinterpret_cast<uint64_t>(note), kNoteBytes, 0};
    ibv_send_wr wr{};
    wr.wr_id = kNoteWr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (api_.postSend(qp_, &wr, &bad) != 0) return *why = "cannot post a send: " + std::string(strerror(errno)), false;
    ++outstanding_;
    return true;
  }
  // Writes local slot `local` (header and `bytes`) into the peer's slot `remote`, signalled by an
  // immediate unless that failed once (then by a note).
  bool postWrite(size_t local, size_t remote, size_t bytes, std::string* why) {
    ibv_sge sge{reinterpret_cast<uint64_t>(slot(local)), static_cast<uint32_t>(kHeaderBytes + bytes), slotsMr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kWriteWr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer_.slots + remote * peer_.stride;
    wr.wr.rdma.rkey = peer_.rkey;
    ibv_send_wr* bad = nullptr;
    if (useImm_ && !dev_.iwarp && params().IB_WRITE_IMM != 0) {
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = htonl(static_cast<uint32_t>(remote));
      if (api_.postSend(qp_, &wr, &bad) == 0) return ++outstanding_, true;
      LOOM_INFO(kNet, "ib %s: RDMA WRITE WITH IMMEDIATE refused (%s); notifying by SEND from now on",
                dev_.name.c_str(), strerror(errno));
      useImm_ = false;
    }
    wr.opcode = IBV_WR_RDMA_WRITE;
    if (api_.postSend(qp_, &wr, &bad) != 0) return *why = "cannot post an RDMA write: " + std::string(strerror(errno)), false;
    ++outstanding_;
    return postNote(remote, why);
  }
  bool usesImm() const { return useImm_ && !dev_.iwarp && params().IB_WRITE_IMM != 0; }

  // Polls the completion queue until done() (sleeping in growing steps up to 1 ms once nothing comes:
  // never a long busy spin).  Incoming notes and immediates go to onNote(index).
  template <typename Done, typename OnNote>
  bool progressUntil(Done done, OnNote onNote, const std::atomic<bool>& stop, std::string* why) {
    int idleUs = 0;
    for (int spins = 0;; ++spins) {
      ibv_wc wc[16];
      const int n = api_.pollCq(cq_, 16, wc);
      if (n < 0) return *why = "polling the completion queue failed", false;
      for (int k = 0; k < n; ++k) {
        if (wc[k].status != IBV_WC_SUCCESS)
          return *why = std::string("queue pair error: ") + ibv_wc_status_str(wc[k].status), false;
        if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          onNote(ntohl(wc[k].imm_data));
          if (!postRecv(wc[k].wr_id)) return *why = "cannot repost a receive", false;
        } else if (wc[k].opcode == IBV_WC_RECV) {
          uint64_t note = 0;
          std::memcpy(&note, notes_.data() + wc[k].wr_id * kNoteBytes, sizeof note);
          onNote(note);
          if (!postRecv(wc[k].wr_id)) return *why = "cannot repost a receive", false;
        } else {
          --outstanding_;  // our own write or note completed
        }
      }
      if (done()) return true;
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
  int outstanding() const { return outstanding_; }

 private:
  static constexpr uint64_t kNoteWr = ~0ull, kWriteWr = ~0ull - 1;
  loomResult_t registerOn(ibv_context* context, ibv_pd* pd) {
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    slotsMr_ = api_.regMr(pd, slots_.data(), slots_.size(), access);
    notesMr_ = api_.regMr(pd, notes_.data(), notes_.size(), IBV_ACCESS_LOCAL_WRITE);
    cq_ = api_.createCq(context, static_cast<int>(4 * nslots_ + 16));
    if (slotsMr_ == nullptr || notesMr_ == nullptr || cq_ == nullptr)
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
    a.cap.max_recv_wr = static_cast<uint32_t>(2 * nslots_);
    a.cap.max_send_sge = 1;
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
  size_t nslots_ = 0, stride_ = 0;
  std::vector<char> slots_, notes_;
  ibv_mr* slotsMr_ = nullptr;
  ibv_mr* notesMr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_pd* ownPd_ = nullptr;             // rdma_cm mode: on the connection's context
  std::unique_ptr<CmEndpoint> cm_;      // rdma_cm mode
  rdma_cm_id* cmQpId_ = nullptr;        // the id the queue pair was created on
  uint32_t psn_ = 0;
  QpInfo peer_{};
  bool useImm_ = true;
  int outstanding_ = 0;
};

// ---- the two wires ----

class IbSendWire : public SendWire {
 public:
  explicit IbSendWire(std::unique_ptr<IbQp> qp) : qp_(std::move(qp)) {}
  void* slotMemory(size_t index) override { return qp_->slot(index) + kHeaderBytes; }
  bool send(const Frame* frames, size_t n, const std::atomic<bool>& stop, std::string* why) override {
    for (size_t k = 0; k < n; ++k) {
      // A credit names the receiver's slot we may write next (they come in ring order).
      if (!qp_->progressUntil([&] { return credits_ > 0; }, [&](uint64_t) { ++credits_; }, stop, why)) return false;
      --credits_;
      FrameHeader h{frames[k].bytes, frames[k].signature};
      std::memcpy(qp_->slot(frames[k].slot), &h, sizeof h);
      if (!qp_->postWrite(frames[k].slot, written_ % qp_->peer().nslots, frames[k].bytes, why)) return false;
      ++written_;
    }
    // The slots are reusable once their writes completed (the data then sits in the peer's memory).
    return qp_->progressUntil([&] { return qp_->outstanding() == 0; }, [&](uint64_t) { ++credits_; }, stop, why);
  }

 private:
  std::unique_ptr<IbQp> qp_;
  uint64_t credits_ = 0, written_ = 0;
};

class IbRecvWire : public RecvWire {
 public:
  // QP-exchange mode listens on a TCP socket (`listenFd`), rdma_cm mode on `cmListener`.
  IbRecvWire(std::unique_ptr<IbQp> qp, int listenFd, std::unique_ptr<CmEndpoint> cmListener, const ConnectRequest& req,
             uint64_t token, double timeoutSec)
      : qp_(std::move(qp)),
        listenFd_(listenFd),
        cmListener_(std::move(cmListener)),
        req_(req),
        token_(token),
        timeoutSec_(timeoutSec) {}
  ~IbRecvWire() override { closeSocket(&listenFd_); }
  void* slotMemory(size_t index) override { return qp_->slot(index) + kHeaderBytes; }
  bool open(const std::atomic<bool>& stop, std::string* why) override {
    return cmListener_ != nullptr ? openByRdmaCm(stop, why) : openByExchange(stop, why);
  }
  // Accepts the sender's exchange connection (refusing strangers), swaps queue-pair descriptions and
  // connects the queue pair.
  bool openByExchange(const std::atomic<bool>& stop, std::string* why) {
    const Deadline deadline = Deadline::afterSeconds(timeoutSec_);
    for (;;) {
      int fd = -1;
      if (acceptSocket(listenFd_, deadline, &stop, &fd) != loomSuccess || fd < 0)
        return *why = "the peer never connected within the timeout", false;
      NetHello h{};
      QpInfo peer{};
      const Deadline d = Deadline::afterSeconds(10);
      bool ok = recvAll(fd, &h, sizeof h, d, &stop, "ib hello") == loomSuccess &&
                netHelloMatches(h, kMagic, req_, token_, 1) &&
                recvAll(fd, &peer, sizeof peer, d, &stop, "ib queue pair") == loomSuccess;
      if (!ok) {
        LOOM_WARN(kNet, "ib transport: refused a connection that is not from rank %d (bad hello)", req_.peer);
        closeSocket(&fd);
        continue;
      }
      QpInfo mine = qp_->info();
      ok = sendAll(fd, &mine, sizeof mine, d, &stop, "ib queue pair") == loomSuccess && qp_->connect(peer) == loomSuccess;
      char ready = 0;
      // The sender's queue pair must be ready to receive before we send it credits.
      ok = ok && recvAll(fd, &ready, 1, d, &stop, "ib ready") == loomSuccess;
      closeSocket(&fd);
      closeSocket(&listenFd_);
      if (!ok) return *why = std::string("queue pair exchange failed: ") + lastError(), false;
      return true;
    }
  }
  // Takes the sender's connection request (rejecting strangers: the hello rides in its private data),
  // makes the queue pair on it, accepts with this side's slot description and waits until established.
  bool openByRdmaCm(const std::atomic<bool>& stop, std::string* why) {
    const Deadline deadline = Deadline::afterSeconds(timeoutSec_);
    const RdmaCmApi& cm = cmListener_->api();
    for (;;) {
      CmEndpoint::Event e{};
      if (!cmListener_->next(deadline, &stop, &e, why)) return false;
      if (e.type != RDMA_CM_EVENT_CONNECT_REQUEST) continue;
      // The request carries only the hello (IB's rdma_cm allows 56 bytes there); the receiver never
      // writes to the sender, so it needs no description of the sender's memory.
      NetHello h{};
      const bool ok = e.privateData.size() >= sizeof h &&
                      (std::memcpy(&h, e.privateData.data(), sizeof h), netHelloMatches(h, kMagicCm, req_, token_, 1));
      if (!ok) {
        LOOM_WARN(kNet, "ib transport: rejected an rdma_cm connection that is not from rank %d (bad hello)", req_.peer);
        cm.reject(e.id, nullptr, 0);
        cm.destroyId(e.id);
        continue;
      }
      cmListener_->adoptConnection(e.id);
      if (!qp_->createOnCm(std::move(cmListener_), e.id, why)) return false;
      QpInfo mine = qp_->info();
      rdma_conn_param param = connParam(&mine, sizeof mine);
      if (cm.accept(e.id, &param) != 0) return *why = "rdma_accept failed: " + std::string(strerror(errno)), false;
      return qp_->cm()->expect(RDMA_CM_EVENT_ESTABLISHED, deadline, &stop, &e, why);
    }
  }
  void grant(size_t index) override {
    std::string why;
    if (!qp_->postNote(index, &why)) grantError_ = why;
  }
  bool receive(size_t index, void* slot, size_t capacity, size_t* bytes, uint64_t* signature,
               const std::function<void()>& grantFreed, const std::atomic<bool>& stop, std::string* why) override {
    if (!grantError_.empty()) return *why = grantError_, false;
    // Notes and immediates name the slots in ring order; anything else is a confused or hostile peer.
    const auto arrivedOrFailed = [&] {
      grantFreed();
      return arrived_ > taken_ || !grantError_.empty();
    };
    const auto onNote = [&](uint64_t i) { badIndex_ |= i != arrived_++ % qp_->nslots(); };
    if (!qp_->progressUntil(arrivedOrFailed, onNote, stop, why)) return false;
    if (!grantError_.empty()) return *why = grantError_, false;
    if (badIndex_) return *why = "the peer announced slots out of order", false;
    ++taken_;
    FrameHeader h{};
    std::memcpy(&h, qp_->slot(index), sizeof h);
    if (!frameFits(h, capacity, why)) return false;
    *bytes = h.bytes;
    *signature = h.signature;
    return true;
  }

 private:
  std::unique_ptr<IbQp> qp_;
  int listenFd_;
  std::unique_ptr<CmEndpoint> cmListener_;
  ConnectRequest req_;
  uint64_t token_;
  double timeoutSec_;
  uint64_t arrived_ = 0, taken_ = 0;
  bool badIndex_ = false;
  std::string grantError_;
};

}  // namespace

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
loomResult_t listenByRdmaCm(const IbDevice& d, ConnectInfo* info, NetListenInfo* published,
                            std::unique_ptr<CmEndpoint>* listener) {
  SocketAddress addr;
  std::string iface, why;
  LOOM_CHECK(findInterfaceAddress(&addr, &iface));
  setPort(&addr, 0);
  auto ep = std::make_unique<CmEndpoint>(*d.api->cm);
  if (!ep->open(&why)) return setError(loomSystemError, "ib: %s", why.c_str());
  if (d.api->cm->bindAddr(ep->id(), reinterpret_cast<sockaddr*>(&addr.storage)) != 0 ||
      d.api->cm->listen(ep->id(), 4) != 0)
    return setError(loomSystemError, "ib: cannot listen through rdma_cm on %s (%s): %s", addr.toString().c_str(),
                    iface.c_str(), strerror(errno));
  setPort(&addr, d.api->cm->srcPort(ep->id()));
  publishNetListenInfo(kMagicCm, addr, 1, info, published);
  *listener = std::move(ep);
  return loomSuccess;
}

// rdma_cm mode, sender: resolve the receiver's address and route, make the queue pair on the resolved
// device, connect with the hello as private data; the receiver's accept carries its slot description.
loomResult_t connectByRdmaCm(const IbDevice& d, const ConnectRequest& req, const NetListenInfo& ci,
                             SocketAddress addr, IbQp* qp) {
  const RdmaCmApi& cm = *d.api->cm;
  const Deadline deadline = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
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
  ok = ok && qp->createOnCm(std::move(ep), id, &why);
  NetHello h = makeNetHello(kMagicCm, req, ci.token, 0, 1);
  rdma_conn_param param = connParam(&h, sizeof h);
  if (ok && cm.connect(id, &param) != 0) ok = false, why = "rdma_connect failed: " + std::string(strerror(errno));
  ok = ok && qp->cm()->expect(RDMA_CM_EVENT_ESTABLISHED, deadline, nullptr, &e, &why);
  if (!ok)
    return setError(loomRemoteError, "ib: cannot connect to rank %d at %s through rdma_cm: %s", req.peer,
                    addr.toString().c_str(), why.c_str());
  QpInfo peer{};
  if (e.privateData.size() < sizeof peer)
    return setError(loomRemoteError, "ib: rank %d accepted without a slot description", req.peer);
  std::memcpy(&peer, e.privateData.data(), sizeof peer);
  qp->setPeer(peer);
  return loomSuccess;
}

// QP-exchange mode, sender: hello and queue-pair descriptions over an authenticated TCP connection,
// then RESET -> RTS by verbs on both sides.
loomResult_t connectByExchange(const ConnectRequest& req, const NetListenInfo& ci, const SocketAddress& addr,
                               IbQp* qp) {
  const Deadline deadline = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
  int fd = -1;
  if (connectSocket(addr, deadline, nullptr, &fd, /*retryRefused=*/false) != loomSuccess) {
    const loomResult_t r = setError(loomRemoteError,
                                    "ib: rank %d cannot reach rank %d at %s: %s", req.self, req.peer,
                                    addr.toString().c_str(), std::string(lastErrorDetail()).c_str());
    setLastErrorPeer(req.peer);
    return r;
  }
  NetHello h = makeNetHello(kMagic, req, ci.token, 0, 1);
  QpInfo mine = qp->info(), peer{};
  const char ready = 1;
  loomResult_t r = sendAll(fd, &h, sizeof h, deadline, nullptr, "ib hello");
  if (r == loomSuccess) r = sendAll(fd, &mine, sizeof mine, deadline, nullptr, "ib queue pair");
  if (r == loomSuccess) r = recvAll(fd, &peer, sizeof peer, deadline, nullptr, "ib queue pair");
  if (r == loomSuccess) r = qp->connect(peer);
  if (r == loomSuccess) r = sendAll(fd, &ready, 1, deadline, nullptr, "ib ready");
  closeSocket(&fd);
  return r;
}

}  // namespace

loomResult_t IbTransport::createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) {
  const IbDevice& d = ibDevice();
  if (d.context == nullptr) return setError(loomSystemError, "ib: %s", d.error.c_str());
  const RingShape shape = netRingShape();
  auto qp = std::make_unique<IbQp>(d);
  int fd = -1;
  std::unique_ptr<CmEndpoint> listener;
  NetListenInfo ci;
  if (usesRdmaCm(d)) {
    qp->allocate(shape.nslots, shape.slotBytes);  // registered on the connection's device once it comes
    LOOM_CHECK(listenByRdmaCm(d, info, &ci, &listener));
  } else {
    LOOM_CHECK(qp->create(shape.nslots, shape.slotBytes));
    LOOM_CHECK(listenAndPublish(kMagic, 1, info, &ci, &fd));
  }
  *recv = std::make_unique<StagedRecvQueue>(
      std::make_unique<IbRecvWire>(std::move(qp), fd, std::move(listener), req, ci.token,
                                   static_cast<double>(params().TIMEOUT)),
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
  LOOM_CHECK(readNetListenInfo(peerInfo, cm ? kMagicCm : kMagic, 1, "ib", req.peer, &ci, &addr));
  const RingShape shape = netRingShape();
  auto qp = std::make_unique<IbQp>(d);
  if (cm) {
    qp->allocate(shape.nslots, shape.slotBytes);
    LOOM_CHECK(connectByRdmaCm(d, req, ci, addr, qp.get()));
  } else {
    LOOM_CHECK(qp->create(shape.nslots, shape.slotBytes));
    LOOM_CHECK(connectByExchange(req, ci, addr, qp.get()));
  }
  const QpInfo& peer = qp->peer();
  if (peer.nslots == 0 || peer.stride < kHeaderBytes + shape.slotBytes)
    return setError(loomInvalidUsage, "ib: rank %d has smaller slots than this rank (LOOM_SHM_SLOT_SIZE differs)",
                    req.peer);
  *send = std::make_unique<StagedSendQueue>(std::make_unique<IbSendWire>(std::move(qp)), shape, req.peer);
  return loomSuccess;
}

}  // namespace loom
