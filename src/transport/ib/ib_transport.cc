#include "transport/ib/ib_transport.h"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/params.h"
#include "core/socket.h"
#include "device/device_api.h"
#include "transport/ib/device_mr.h"
#include "transport/ib/mr_cache.h"
#include "transport/ib/verbs_api.h"
#include "transport/net/hello.h"
#include "transport/net/staged_queue.h"

namespace loom {

namespace {

constexpr uint32_t kIbMagic = 0x4c4f4f49;    // "LOOI": queue pairs connected by attributes over TCP
constexpr uint32_t kIbMagicCm = 0x4c4f4f43;  // "LOOC": queue pairs connected through rdma_cm
constexpr size_t kHeaderBytes = 16;      // at the start of every slot: size, signature
constexpr size_t kNoteBytes = 16;        // a credit or a write notification: the slot index
constexpr int kMaxQps = 16;              // LOOM_IB_QPS_PER_CONNECTION at most

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
  static IbDevice* noLibrary = new IbDevice();
  std::lock_guard<std::mutex> g(mu);
  std::string why;
  const VerbsApi* loaded = verbsApi(&why);
  if (loaded == nullptr) {
    noLibrary->error = why;  // the same every time: rdma-core is loaded once or never
    return *noLibrary;
  }
  const VerbsApi& api = *loaded;
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

// Whether this device's queue pairs connect through rdma_cm (LOOM_IB_CM; iWARP needs it).
bool usesRdmaCm(const IbDevice& d) { return params().IB_CM == 1 || (params().IB_CM < 0 && d.iwarp); }

// rdma_cm mode: one protection domain per device context rdma_cm hands out (it opens each device once
// per process), kept for the life of the process like the device itself, so that registered buffers of
// a closed connection fit the next one (transport/ib/mr_cache.h).
ibv_pd* protectionDomainOf(const VerbsApi& api, ibv_context* context) {
  static std::mutex mu;
  static auto* pds = new std::map<std::pair<const VerbsApi*, ibv_context*>, ibv_pd*>();
  std::lock_guard<std::mutex> g(mu);
  ibv_pd*& pd = (*pds)[{&api, context}];
  if (pd == nullptr) pd = api.allocPd(context);
  return pd;
}

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
  bool postWrite(size_t local, size_t remote, size_t bytes, std::string* why) {
    const int k = qpOf(remote);
    ibv_qp* qp = qps_[static_cast<size_t>(k)].qp;
    ibv_sge sge{reinterpret_cast<uint64_t>(slot(local)), static_cast<uint32_t>(kHeaderBytes + bytes), slots_.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kWriteWr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
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

  // Reads `bytes` of the peer's region (address, key) into local region `mr` at dst, one RDMA READ of at
  // most 1 GiB at a time (one read in flight: the queue pairs allow one), on queue pair 0.  onNote and
  // `between` as for progressUntil.
  template <typename OnNote, typename Between>
  bool read(ibv_mr* mr, char* dst, uint64_t address, uint32_t key, size_t bytes, OnNote onNote, Between between,
            const std::atomic<bool>& stop, std::string* why) {
    constexpr size_t kMaxRead = size_t{1} << 30;
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(kMaxRead, bytes - done);
      ibv_sge sge{reinterpret_cast<uint64_t>(dst + done), static_cast<uint32_t>(n), mr->lkey};
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

// ---- the two wires ----

class IbSendWire : public SendWire {
 public:
  explicit IbSendWire(std::unique_ptr<IbConnection> conn) : conn_(std::move(conn)) {}
  void* slotMemory(size_t index) override { return conn_->slot(index) + kHeaderBytes; }
  bool send(const Frame* frames, size_t n, const std::atomic<bool>& stop, std::string* why) override {
    for (size_t k = 0; k < n; ++k) {
      // Each credit frees the receiver's next slot in ring order.  Credits of different queue pairs may
      // arrive out of order, but a credit for slot s is only sent once every slot before s was granted,
      // so counting them is enough.
      if (!waitForPeer([&] { return credits_ > 0; }, stop, why)) return false;
      --credits_;
      FrameHeader h{frames[k].bytes | (frames[k].direct ? kDirectFrame : 0), frames[k].signature};
      std::memcpy(conn_->slot(frames[k].slot), &h, sizeof h);
      if (!conn_->postWrite(frames[k].slot, written_ % conn_->peer().nslots, frames[k].bytes, why)) return false;
      ++written_;
    }
    // The slots are reusable once their writes completed (the data then sits in the peer's memory).
    return conn_->progressUntil([&] { return conn_->outstanding() == 0; }, countCredit(), stop, why);
  }

  // Direct frames from GPU memory (GPUDirect RDMA): the receiver reads the buffer where it lies.  Host
  // buffers are not offered: registering them per call costs more than the copy into a slot saves.
  bool offersDevice(const void* src, size_t bytes) override {
    std::string why;
    return deviceRegistration(conn_->api(), deviceApi(), conn_->pd(), src, bytes, &why) != nullptr;
  }
  bool offerDirect(const void* src, size_t bytes, DirectRef* ref, std::string* why) override {
    ibv_mr* mr = deviceRegistration(conn_->api(), deviceApi(), conn_->pd(), src, bytes, why);
    if (mr == nullptr) return false;
    *ref = DirectRef{reinterpret_cast<uint64_t>(src), bytes, mr->rkey, 0};
    return true;
  }
  // The receiver grants slot s again only once it released the frame in it, and grants in ring order:
  // every frame written so far is released once nslots credits more than frames written have come.
  bool awaitReleased(const std::atomic<bool>& stop, std::string* why) override {
    return waitForPeer([&] { return granted_ >= written_ + conn_->peer().nslots; }, stop, why);
  }

 private:
  // Waits for something only the peer can give (credits), probing it every 200 ms meanwhile: a peer
  // that went away before giving any would otherwise leave this wait to the timeout.
  template <typename Done>
  bool waitForPeer(Done done, const std::atomic<bool>& stop, std::string* why) {
    auto nextProbe = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    return conn_->progressUntil(
        [&] {
          if (done()) return true;
          std::string probeWhy;
          if (std::chrono::steady_clock::now() >= nextProbe) {
            nextProbe += std::chrono::milliseconds(200);
            if (!conn_->postProbe(&probeWhy)) conn_->fail(probeWhy);
          }
          return false;
        },
        countCredit(), stop, why);
  }
  std::function<void(uint64_t)> countCredit() {
    return [this](uint64_t) { ++credits_, ++granted_; };
  }
  std::unique_ptr<IbConnection> conn_;
  uint64_t credits_ = 0, written_ = 0, granted_ = 0;
};

class IbRecvWire : public RecvWire {
 public:
  // QP-exchange mode listens on a TCP socket (`listenFd`), rdma_cm mode on `cmListener`.
  IbRecvWire(std::unique_ptr<IbConnection> conn, int listenFd, std::unique_ptr<CmEndpoint> cmListener,
             const ConnectRequest& req, uint64_t token, double timeoutSec)
      : conn_(std::move(conn)),
        listenFd_(listenFd),
        cmListener_(std::move(cmListener)),
        req_(req),
        token_(token),
        timeoutSec_(timeoutSec),
        arrived_(conn_->nslots(), 0) {}
  ~IbRecvWire() override {
    // An open that failed half-way leaves the connection ids with the listener: the queue pairs made on
    // them must go first (members would be destroyed the other way round).
    conn_.reset();
    closeSocket(&listenFd_);
  }
  void* slotMemory(size_t index) override { return conn_->slot(index) + kHeaderBytes; }
  bool open(const std::atomic<bool>& stop, std::string* why) override {
    return cmListener_ != nullptr ? openByRdmaCm(stop, why) : openByExchange(stop, why);
  }
  // Accepts the sender's exchange connection (refusing strangers), swaps the descriptions of every
  // queue pair and connects them.
  bool openByExchange(const std::atomic<bool>& stop, std::string* why) {
    const Deadline deadline = Deadline::afterSeconds(timeoutSec_);
    const int nqps = conn_->nqps();
    for (;;) {
      int fd = -1;
      if (acceptSocket(listenFd_, deadline, &stop, &fd) != loomSuccess || fd < 0)
        return *why = "the peer never connected within the timeout", false;
      NetHello h{};
      std::vector<QpInfo> peer(static_cast<size_t>(nqps));
      const Deadline d = Deadline::afterSeconds(10);
      bool ok = recvAll(fd, &h, sizeof h, d, &stop, "ib hello") == loomSuccess &&
                netHelloMatches(h, kIbMagic, req_, token_, nqps) &&
                recvAll(fd, peer.data(), peer.size() * sizeof(QpInfo), d, &stop, "ib queue pairs") == loomSuccess;
      if (!ok) {
        LOOM_WARN(kNet, "ib transport: refused a connection that is not from rank %d (bad hello)", req_.peer);
        closeSocket(&fd);
        continue;
      }
      std::vector<QpInfo> mine;
      for (int k = 0; k < nqps; ++k) mine.push_back(conn_->info(k));
      ok = sendAll(fd, mine.data(), mine.size() * sizeof(QpInfo), d, &stop, "ib queue pairs") == loomSuccess;
      for (int k = 0; k < nqps && ok; ++k) ok = conn_->connect(k, peer[static_cast<size_t>(k)]) == loomSuccess;
      char ready = 0;
      // The sender's queue pairs must be ready to receive before we send them credits.
      ok = ok && recvAll(fd, &ready, 1, d, &stop, "ib ready") == loomSuccess;
      closeSocket(&fd);
      closeSocket(&listenFd_);
      if (!ok) return *why = std::string("queue pair exchange failed: ") + lastError(), false;
      return true;
    }
  }
  // Takes the sender's connection requests, one per queue pair (rejecting strangers: the hello rides in
  // the private data and names the queue pair), makes each queue pair on its request, accepts with this
  // side's slot description, and waits until all are established.
  bool openByRdmaCm(const std::atomic<bool>& stop, std::string* why) {
    const Deadline deadline = Deadline::afterSeconds(timeoutSec_);
    const RdmaCmApi& cm = cmListener_->api();
    const int nqps = conn_->nqps();
    std::vector<char> made(static_cast<size_t>(nqps), 0);
    int established = 0;
    while (established < nqps) {
      CmEndpoint::Event e{};
      if (!cmListener_->next(deadline, &stop, &e, why)) return false;
      if (e.type == RDMA_CM_EVENT_ESTABLISHED) {
        ++established;
        continue;
      }
      if (e.type != RDMA_CM_EVENT_CONNECT_REQUEST) {
        if (e.type == RDMA_CM_EVENT_REJECTED || e.type == RDMA_CM_EVENT_CONNECT_ERROR ||
            e.type == RDMA_CM_EVENT_UNREACHABLE || e.type == RDMA_CM_EVENT_DISCONNECTED)
          return *why = std::string("rdma_cm: ") + cm.eventName(e.type) + " while connecting the queue pairs", false;
        continue;
      }
      // The request carries only the hello (IB's rdma_cm allows 56 bytes there); the receiver never
      // writes to the sender, so it needs no description of the sender's memory.
      NetHello h{};
      const bool ok = e.privateData.size() >= sizeof h &&
                      (std::memcpy(&h, e.privateData.data(), sizeof h),
                       netHelloMatches(h, kIbMagicCm, req_, token_, nqps)) &&
                      !made[static_cast<size_t>(h.index)];
      if (!ok) {
        LOOM_WARN(kNet, "ib transport: rejected an rdma_cm connection that is not from rank %d (bad hello)", req_.peer);
        cm.reject(e.id, nullptr, 0);
        cm.destroyId(e.id);
        continue;
      }
      cmListener_->adoptConnection(e.id);
      if (!conn_->createOnCm(h.index, e.id, cm, why)) return false;
      made[static_cast<size_t>(h.index)] = 1;
      QpInfo mine = conn_->info(h.index);
      rdma_conn_param param = connParam(&mine, sizeof mine);
      if (cm.accept(e.id, &param) != 0) return *why = "rdma_accept failed: " + std::string(strerror(errno)), false;
    }
    conn_->keep(std::move(cmListener_));
    return true;
  }
  void grant(size_t index) override {
    std::string why;
    if (!conn_->postNote(conn_->qpOf(index), index, &why)) conn_->fail(why);
  }
  bool receive(size_t index, void* slot, size_t capacity, size_t* bytes, uint64_t* signature,
               const std::function<void()>& grantFreed, const std::atomic<bool>& stop, std::string* why) override {
    // Notes and immediates name the slot written; queue pairs complete in any order between them, so
    // each slot is marked until the ring reaches it.  A slot named twice, or out of the ring, is a
    // confused or hostile peer.
    const auto arrivedOrFailed = [&] {
      grantFreed();
      return arrived_[index] != 0 || badIndex_;
    };
    if (!conn_->progressUntil(arrivedOrFailed, markArrived(), stop, why)) return false;
    if (badIndex_) return *why = "the peer announced a slot it may not write", false;
    arrived_[index] = 0;
    FrameHeader h{};
    std::memcpy(&h, conn_->slot(index), sizeof h);
    if (!frameFits(FrameHeader{h.bytes & ~kDirectFrame, h.signature}, capacity, why)) return false;
    *bytes = h.bytes;  // the staged queue reads the direct flag
    *signature = h.signature;
    return true;
  }

  bool acceptsDevice(void* dst, size_t bytes) override {
    std::string why;
    return deviceRegistration(conn_->api(), deviceApi(), conn_->pd(), dst, bytes, &why) != nullptr;
  }
  // A direct frame: RDMA READ from the sender's buffer into dst, registered as GPU memory (GPUDirect
  // RDMA) or, for a host buffer, for this read only.
  bool readDirect(const DirectRef& ref, void* dst, const std::function<void()>& grantFreed,
                  const std::atomic<bool>& stop, std::string* why) override {
    const VerbsApi& api = conn_->api();
    DeviceApi* device = deviceApi();
    const bool onDevice = device != nullptr && device->isDeviceMemory(dst);
    ibv_mr* mr = onDevice ? deviceRegistration(api, device, conn_->pd(), dst, ref.bytes, why)
                          : api.regMr(conn_->pd(), dst, ref.bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr) {
      if (!onDevice) *why = "cannot register the receive buffer: " + std::string(strerror(errno));
      return false;
    }
    const bool ok = conn_->read(mr, static_cast<char*>(dst), ref.address, ref.key, ref.bytes, markArrived(),
                                grantFreed, stop, why);
    if (!onDevice) api.deregMr(mr);
    return ok;
  }

 private:
  // Notes and immediates name the slot written (see receive()).
  std::function<void(uint64_t)> markArrived() {
    return [this](uint64_t i) {
      if (i >= arrived_.size() || arrived_[i] != 0) badIndex_ = true;
      else arrived_[i] = 1;
    };
  }

  std::unique_ptr<IbConnection> conn_;
  int listenFd_;
  std::unique_ptr<CmEndpoint> cmListener_;
  ConnectRequest req_;
  uint64_t token_;
  double timeoutSec_;
  std::vector<char> arrived_;  // per slot: written and announced, not yet received
  bool badIndex_ = false;
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

// LOOM_IB_QPS_PER_CONNECTION, checked: the receiving side publishes its count and the sender follows it.
loomResult_t qpsPerConnection(int* n) {
  const int64_t v = params().IB_QPS_PER_CONNECTION;
  if (v < 1 || v > kMaxQps)
    return setError(loomInvalidArgument, "LOOM_IB_QPS_PER_CONNECTION=%lld is out of range (1..%d)",
                    static_cast<long long>(v), kMaxQps);
  *n = static_cast<int>(v);
  return loomSuccess;
}

}  // namespace

loomResult_t IbTransport::createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) {
  const IbDevice& d = ibDevice();
  if (d.context == nullptr) return setError(loomSystemError, "ib: %s", d.error.c_str());
  int nqps = 1;
  LOOM_CHECK(qpsPerConnection(&nqps));
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
  *recv = std::make_unique<StagedRecvQueue>(
      std::make_unique<IbRecvWire>(std::move(conn), fd, std::move(listener), req, ci.token,
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
    return setError(loomInvalidUsage, "ib: rank %d has smaller slots than this rank (LOOM_SHM_SLOT_SIZE differs)",
                    req.peer);
  *send = std::make_unique<StagedSendQueue>(std::make_unique<IbSendWire>(std::move(conn)), shape, req.peer);
  return loomSuccess;
}

}  // namespace loom
