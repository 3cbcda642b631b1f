#include "transport/ib/ib_wires.h"

#include <chrono>
#include <cstring>
#include <functional>

#include "base/log.h"
#include "base/params.h"
#include "base/socket.h"
#include "device_runtime/device_api.h"
#include "transport/ib/device_mr.h"
#include "transport/ib/host_mr.h"

namespace loom {

namespace {

class IbSendWire : public SendWire {
 public:
  explicit IbSendWire(std::unique_ptr<IbConnection> conn)
      : conn_(std::move(conn)), host_(hostRegion(conn_->api(), conn_->context(), conn_->pd())) {}
  void* slotMemory(size_t index) override { return conn_->slot(index) + kHeaderBytes; }
  // Zero copy where the device reaches every host address (transport/ib/host_mr.h).
  bool sendsFromCaller() const override { return host_ != nullptr; }
  // A frame from the caller's buffer that lands in the receiver's caller buffer, large enough that a
  // read round trip costs less than a copy: the receiver reads it where it lies (RDMA READ).
  bool peerReadsLater(const Frame& f) const override {
    return f.direct || (fromCaller(f) && f.landsInCaller && f.bytes >= static_cast<size_t>(params().IB_READ_MIN));
  }
  bool send(const Frame* frames, size_t n, const std::atomic<bool>& stop, std::string* why) override {
    for (size_t k = 0; k < n; ++k) {
      const Frame& f = frames[k];
      // Each credit frees the receiver's next slot in ring order.  Credits of different queue pairs may
      // arrive out of order, but a credit for slot s is only sent once every slot before s was granted,
      // so counting them is enough.
      if (!waitForPeer([&] { return credits_ > 0; }, stop, why)) return false;
      --credits_;
      char* slot = conn_->slot(f.slot);
      const size_t remote = written_ % conn_->peer().nslots;
      bool ok;
      if (!fromCaller(f)) {  // the slot holds the payload (or a direct post's DirectRef)
        const FrameHeader h{f.bytes | (f.direct ? kDirectFrame : 0), f.signature};
        std::memcpy(slot, &h, sizeof h);
        ok = conn_->postWrite(f.slot, remote, f.bytes, why);
      } else if (peerReadsLater(f)) {  // only where it lies is written: the receiver reads the rest
        const DirectRef ref{reinterpret_cast<uint64_t>(f.data), f.bytes, host_->rkey, 0};
        const FrameHeader h{sizeof ref | kDirectFrame, f.signature};
        std::memcpy(slot, &h, sizeof h);
        std::memcpy(slot + kHeaderBytes, &ref, sizeof ref);
        ok = conn_->postWrite(f.slot, remote, sizeof ref, why);
      } else {  // the header from the slot, the payload from the caller's buffer, in one write
        const FrameHeader h{f.bytes, f.signature};
        std::memcpy(slot, &h, sizeof h);
        const ibv_sge payload{reinterpret_cast<uint64_t>(f.data), static_cast<uint32_t>(f.bytes), host_->lkey};
        ok = conn_->postWrite(f.slot, remote, f.bytes, why, &payload);
      }
      if (!ok) return false;
      ++written_;
    }
    // The slots (and callers' buffers written from) are reusable once their writes completed: the data
    // then sits in the peer's memory.
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
  // A frame posted from the caller's buffer (zero copy; an empty one goes as an empty slot).
  bool fromCaller(const Frame& f) const {
    return host_ != nullptr && !f.direct && f.bytes > 0 && f.data != conn_->slot(f.slot) + kHeaderBytes;
  }
  std::unique_ptr<IbConnection> conn_;
  const ibv_mr* host_;  // every host address (implicit on-demand paging); null: callers' buffers are not offered
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
        arrived_(conn_->nslots(), 0),
        host_(hostRegion(conn_->api(), conn_->context(), conn_->pd())) {}
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
    *bytes = h.bytes;  // the relay queue reads the direct flag
    *signature = h.signature;
    return true;
  }

  // Direct frames are read straight into the rank's buffer; without on-demand paging each read would
  // register that buffer first, which costs more than the copy out of a slot.
  bool readsIntoCaller() const override { return host_ != nullptr; }
  bool acceptsDevice(void* dst, size_t bytes) override {
    std::string why;
    return deviceRegistration(conn_->api(), deviceApi(), conn_->pd(), dst, bytes, &why) != nullptr;
  }
  // A direct frame: RDMA READ from the sender's buffer into dst, registered as GPU memory (GPUDirect
  // RDMA), reached through on-demand paging, or else, for a host buffer, registered for this read only.
  bool readDirect(const DirectRef& ref, void* dst, const std::function<void()>& grantFreed,
                  const std::atomic<bool>& stop, std::string* why) override {
    const VerbsApi& api = conn_->api();
    DeviceApi* device = deviceApi();
    const bool onDevice = device != nullptr && device->isDeviceMemory(dst);
    const bool perRead = !onDevice && host_ == nullptr;
    const ibv_mr* mr = onDevice ? deviceRegistration(api, device, conn_->pd(), dst, ref.bytes, why)
                       : !perRead ? host_
                                  : api.regMr(conn_->pd(), dst, ref.bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr) {
      if (perRead) *why = "cannot register the receive buffer: " + std::string(strerror(errno));
      return false;
    }
    const bool ok = conn_->read(mr->lkey, static_cast<char*>(dst), ref.address, ref.key, ref.bytes, markArrived(),
                                grantFreed, stop, why);
    if (perRead) api.deregMr(const_cast<ibv_mr*>(mr));
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
  const ibv_mr* host_;  // as IbSendWire's
};

}  // namespace

std::unique_ptr<SendWire> makeIbSendWire(std::unique_ptr<IbConnection> conn) {
  return std::make_unique<IbSendWire>(std::move(conn));
}

std::unique_ptr<RecvWire> makeIbRecvWire(std::unique_ptr<IbConnection> conn, int listenFd,
                                         std::unique_ptr<CmEndpoint> cmListener, const ConnectRequest& req,
                                         uint64_t token, double timeoutSec) {
  return std::make_unique<IbRecvWire>(std::move(conn), listenFd, std::move(cmListener), req, token, timeoutSec);
}

}  // namespace loom
