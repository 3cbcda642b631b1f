#include "transport/ucx/ucx_transport.h"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "base/socket.h"
#include "transport/net/hello.h"
#include "transport/net/relay_queue.h"
#include "transport/ucx/ucx_api.h"

namespace loom {

namespace {

constexpr uint32_t kUcxMagic = 0x4c4f4f55;  // "LOOU"
// A frame header of this length is the sender's goodbye (no frame is this large).
constexpr uint64_t kGoodbye = ~uint64_t{0};

// One UCP context per process, made on first use.  Each queue has its own worker, used only by one
// thread at a time (the rank's while it sets the queue up, then the queue's I/O thread, which also makes
// a sender's endpoint), so workers are single-threaded and need no locks.
struct UcxContext {
  ucp_context_h context = nullptr;
  std::string error;
};

const UcxContext& ucxContext() {
  static const UcxContext ctx = [] {
    UcxContext c;
    if (!ucx().error.empty()) {
      c.error = ucx().error;
      return c;
    }
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucx().ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) {
      c.error = std::string("ucp_config_read: ") + ucx().ucs_status_string(s);
      return c;
    }
    // UCX's registration cache installs memory hooks (mmap/munmap interception) at ucp_init; in a rank
    // forked from a test runner that install once deadlocked on UCX's own event lock (UCX 1.13, seen in
    // the collectives suite).  Loom hands UCX only its slot rings, which live as long as the
    // connection, so the cache buys little: off unless the user asks for it with UCX_RCACHE_ENABLE.
    if (std::getenv("UCX_RCACHE_ENABLE") == nullptr) ucx().ucp_config_modify(config, "RCACHE_ENABLE", "n");
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
    s = ucx().ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, config, &c.context);  // what ucp_init does
    ucx().ucp_config_release(config);
    if (s != UCS_OK) {
      c.context = nullptr;
      c.error = std::string("ucp_init: ") + ucx().ucs_status_string(s);
    }
    return c;
  }();
  return ctx;
}

// A worker, its wake-up descriptor and the endpoint it drives (one per queue).
class UcxWorker {
 public:
  ~UcxWorker() {
    closeEndpoint(false);
    for (ucp_conn_request_h r : pending_) ucx().ucp_listener_reject(listener_, r);
    if (listener_ != nullptr) ucx().ucp_listener_destroy(listener_);
    if (worker_ != nullptr) ucx().ucp_worker_destroy(worker_);
  }
  loomResult_t create() {
    const UcxContext& c = ucxContext();
    if (c.context == nullptr) return setError(loomSystemError, "UCX is unusable: %s", c.error.c_str());
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucs_status_t s = ucx().ucp_worker_create(c.context, &wp, &worker_);
    if (s == UCS_OK) s = ucx().ucp_worker_get_efd(worker_, &efd_);
    if (s != UCS_OK) return setError(loomSystemError, "UCX worker: %s", ucx().ucs_status_string(s));
    return loomSuccess;
  }
  // Receiver: listens on `addr` (port 0: any) and fills in the port it got.
  loomResult_t listen(SocketAddress* addr) {
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr->storage);
    lp.sockaddr.addrlen = addr->length;
    lp.conn_handler.cb = [](ucp_conn_request_h req, void* arg) {
      static_cast<UcxWorker*>(arg)->pending_.push_back(req);
    };
    lp.conn_handler.arg = this;
    ucs_status_t s = ucx().ucp_listener_create(worker_, &lp, &listener_);
    if (s != UCS_OK) return setError(loomSystemError, "UCX listener on %s: %s", addr->toString().c_str(),
                                     ucx().ucs_status_string(s));
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    s = ucx().ucp_listener_query(listener_, &attr);
    if (s != UCS_OK) return setError(loomSystemError, "UCX listener query: %s", ucx().ucs_status_string(s));
    std::memcpy(&addr->storage, &attr.sockaddr, sizeof attr.sockaddr);
    return loomSuccess;
  }
  // Sender: an endpoint to the peer's listener.
  bool connect(const SocketAddress& addr, std::string* why) {
    ucp_ep_params_t ep = endpointParams();
    ep.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr.storage);
    ep.sockaddr.addrlen = addr.length;
    ucs_status_t s = ucx().ucp_ep_create(worker_, &ep, &ep_);
    if (s != UCS_OK) return *why = "UCX connect to " + addr.toString() + ": " + ucx().ucs_status_string(s), false;
    return true;
  }
  // Receiver: waits for a connection request and accepts it.
  bool accept(const Deadline& deadline, const std::atomic<bool>& stop, std::string* why) {
    if (!progressUntil([&] { return !pending_.empty() || deadline.expired(); }, stop, why)) return false;
    if (pending_.empty()) return *why = "the peer never connected within the timeout", false;
    ucp_ep_params_t ep = endpointParams();
    ep.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep.conn_request = pending_.front();
    pending_.erase(pending_.begin());
    epError_.store(UCS_OK);
    ucs_status_t s = ucx().ucp_ep_create(worker_, &ep, &ep_);
    if (s != UCS_OK) return *why = std::string("UCX accept: ") + ucx().ucs_status_string(s), false;
    return true;
  }
  // A healthy endpoint closes gracefully (its data is delivered first); a failed one, or one being
  // abandoned mid-operation, is forced.
  void closeEndpoint(bool force = true) {
    if (ep_ == nullptr) return;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force || epError_.load() != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucx().ucp_ep_close_nbx(ep_, &p);
    ep_ = nullptr;
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
      const Deadline by = Deadline::afterSeconds(2);
      while (ucx().ucp_request_check_status(r) == UCS_INPROGRESS && !by.expired()) ucx().ucp_worker_progress(worker_);
      ucx().ucp_request_free(r);
    }
  }

  bool sendIov(ucp_dt_iov_t* iov, size_t n, const std::atomic<bool>& stop, std::string* why) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_iov();
    return complete(ucx().ucp_stream_send_nbx(ep_, iov, n, &p), false, stop, why);
  }
  bool recvAll(void* buf, size_t bytes, const std::atomic<bool>& stop, std::string* why,
               const Deadline* by = nullptr) {
    if (bytes == 0) return true;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
    size_t length = 0;
    return complete(ucx().ucp_stream_recv_nbx(ep_, buf, bytes, &length, &p), true, stop, why, by);
  }
  // Waits until everything sent on the endpoint reached the peer (so it survives this process exiting).
  bool flush(const std::atomic<bool>& stop, std::string* why) {
    ucp_request_param_t p{};
    return complete(ucx().ucp_ep_flush_nbx(ep_, &p), false, stop, why);
  }
  void wake() {
    if (worker_ != nullptr) ucx().ucp_worker_signal(worker_);
  }
  // Progresses the worker, then sleeps on its descriptor at most `ms` (ended early by wake()).
  void progressFor(int ms) {
    while (ucx().ucp_worker_progress(worker_) != 0) {
    }
    if (ucx().ucp_worker_arm(worker_) != UCS_OK) return;  // busy: something arrived meanwhile
    pollfd pfd{efd_, POLLIN, 0};
    poll(&pfd, 1, ms);
  }

 private:
  ucp_ep_params_t endpointParams() {
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t status) {
      static_cast<UcxWorker*>(arg)->epError_.store(status);
    };
    ep.err_handler.arg = this;
    return ep;
  }
  // Progresses the worker until done(), sleeping on its wake-up descriptor (never spinning for long):
  // stop (and the deadline `by`, if any) is checked every 100 ms, and an endpoint error ends the wait.
  template <typename Done>
  bool progressUntil(Done done, const std::atomic<bool>& stop, std::string* why, const Deadline* by = nullptr) {
    for (;;) {
      while (ucx().ucp_worker_progress(worker_) != 0) {
      }
      if (done()) return true;
      if (epError_.load() != UCS_OK)
        return *why = std::string("UCX endpoint failed: ") + ucx().ucs_status_string(epError_.load()), false;
      if (stop.load()) return *why = "stopped", false;
      if (by != nullptr && by->expired()) return *why = "no answer within the time allowed", false;
      ucs_status_t s = ucx().ucp_worker_arm(worker_);
      if (s == UCS_ERR_BUSY) continue;
      if (s != UCS_OK) return *why = std::string("ucp_worker_arm: ") + ucx().ucs_status_string(s), false;
      pollfd pfd{efd_, POLLIN, 0};
      poll(&pfd, 1, 100);
    }
  }
  bool complete(ucs_status_ptr_t r, bool isStreamRecv, const std::atomic<bool>& stop, std::string* why,
                const Deadline* by = nullptr) {
    if (r == nullptr) return true;
    if (UCS_PTR_IS_ERR(r)) return *why = std::string("UCX: ") + ucx().ucs_status_string(UCS_PTR_STATUS(r)), false;
    ucs_status_t status = UCS_INPROGRESS;
    auto finished = [&] {
      size_t length = 0;
      status = isStreamRecv ? ucx().ucp_stream_recv_request_test(r, &length) : ucx().ucp_request_check_status(r);
      return status != UCS_INPROGRESS;
    };
    bool ok = progressUntil(finished, stop, why, by);
    if (!ok) {
      // Stream receives cannot be cancelled on their own: closing the endpoint ends them (with an
      // error), and the request is released whether or not that took effect in time.
      closeEndpoint();
      const Deadline released = Deadline::afterSeconds(2);
      while (!finished() && !released.expired()) ucx().ucp_worker_progress(worker_);
    }
    ucx().ucp_request_free(r);
    if (ok && status != UCS_OK) return *why = std::string("UCX: ") + ucx().ucs_status_string(status), false;
    return ok;
  }

  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  ucp_listener_h listener_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  std::vector<ucp_conn_request_h> pending_;
  std::atomic<ucs_status_t> epError_{UCS_OK};
};

class UcxSendWire : public SendWire {
 public:
  UcxSendWire(std::unique_ptr<UcxWorker> worker, const SocketAddress& peer, NetHello hello)
      : worker_(std::move(worker)), peer_(peer), hello_(hello) {}
  // The endpoint is made with the first frame, not when the queue is: a direction no algorithm uses
  // (the ring connects both ways to its neighbours) then never connects.  Connecting it anyway is worse
  // than useless: UCX's wire-up reply sits unread on a worker nobody progresses, and UCX's async thread
  // spins on that readable socket (4 hosts: 0.08 GB/s); or the peer, done, destroys its listener while
  // the request arrives, which crashes UCX (openucx/ucx#11087).
  bool send(const Frame* frames, size_t n, const std::atomic<bool>& stop, std::string* why) override {
    headers_.resize(n);
    iov_.clear();
    if (!connected_) {
      if (!worker_->connect(peer_, why)) return false;
      connected_ = true;
      iov_.push_back(ucp_dt_iov_t{&hello_, sizeof hello_});
    }
    for (size_t k = 0; k < n; ++k) {
      headers_[k] = FrameHeader{frames[k].bytes | (frames[k].landsInCaller ? kLandsInCallerFrame : 0),
                                frames[k].signature};
      iov_.push_back(ucp_dt_iov_t{&headers_[k], sizeof(FrameHeader)});
      if (frames[k].bytes > 0) iov_.push_back(ucp_dt_iov_t{frames[k].data, frames[k].bytes});
    }
    return worker_->sendIov(iov_.data(), iov_.size(), stop, why);
  }
  // A frame's bytes go from wherever they lie (UCX reads them; the send completes once it no longer
  // needs them): the caller's buffer, with no copy into the slot.
  bool sendsFromCaller() const override { return true; }
  // A stream send completes once UCX holds the data, which may still be in this process.
  bool drain(const std::atomic<bool>& stop, std::string* why) override { return worker_->flush(stop, why); }
  void shutdown() override { worker_->wake(); }
  // UCX drops what a receiver has not read yet when its sender's endpoint closes (the receiver's stream
  // then fails with "connection reset"), so the sender announces the end and closes only once the
  // receiver's I/O thread has read up to it and answered (or after 2 s: a receiver that stopped reading).
  // After the answer nothing is left to deliver: the endpoint is closed at once (a graceful close would
  // wait for the receiver's worker, whose thread has ended).
  void finish() override {
    if (!connected_) return;  // nothing was ever sent
    const std::atomic<bool> never{false};
    const Deadline by = Deadline::afterSeconds(2);
    FrameHeader bye{kGoodbye, 0};
    ucp_dt_iov_t iov{&bye, sizeof bye};
    char answer = 0;
    std::string why;
    if (worker_->sendIov(&iov, 1, never, &why) && worker_->recvAll(&answer, 1, never, &why, &by))
      worker_->closeEndpoint(true);
    else
      LOOM_INFO(kNet, "ucx transport: closing without the receiver's goodbye (%s)", why.c_str());
  }

 private:
  std::unique_ptr<UcxWorker> worker_;
  SocketAddress peer_;
  NetHello hello_;
  bool connected_ = false;
  std::vector<FrameHeader> headers_;
  std::vector<ucp_dt_iov_t> iov_;
};

class UcxRecvWire : public RecvWire {
 public:
  UcxRecvWire(std::unique_ptr<UcxWorker> worker, const ConnectRequest& req, uint64_t token, double timeoutSec)
      : worker_(std::move(worker)), req_(req), token_(token), timeoutSec_(timeoutSec) {}
  bool open(const std::atomic<bool>& stop, std::string* why) override {
    const Deadline deadline = Deadline::afterSeconds(timeoutSec_);
    for (;;) {
      if (!worker_->accept(deadline, stop, why)) return false;
      NetHello h{};
      std::string helloWhy;
      if (worker_->recvAll(&h, sizeof h, stop, &helloWhy) && netHelloMatches(h, kUcxMagic, req_, token_, 1)) return true;
      if (stop.load()) return *why = "stopped", false;
      LOOM_WARN(kNet, "ucx transport: refused a connection that is not from rank %d (%s)", req_.peer,
                helloWhy.empty() ? "bad hello" : helloWhy.c_str());
      worker_->closeEndpoint();
    }
  }
  // The stream gives the header first: the queue then picks where the payload goes.
  bool readsHeaderFirst() const override { return true; }
  bool receive(size_t, void*, size_t, size_t*, uint64_t*, const std::function<void()>&, const std::atomic<bool>&,
               std::string* why) override {
    return *why = "ucx: frames are received header first", false;
  }
  bool receiveHeader(FrameHeader* h, const std::atomic<bool>& stop, std::string* why) override {
    if (!worker_->recvAll(h, sizeof *h, stop, why)) return false;
    if (h->bytes == kGoodbye) {
      // Everything before it was read: answer, so that the sender may close, and end like a closed socket.
      const char answer = 1;
      ucp_dt_iov_t iov{const_cast<char*>(&answer), 1};
      std::string ignored;
      if (worker_->sendIov(&iov, 1, stop, &ignored)) worker_->flush(stop, &ignored);
      return *why = "the peer closed the connection", false;
    }
    return true;
  }
  bool receivePayload(void* dst, size_t bytes, const std::atomic<bool>& stop, std::string* why) override {
    return worker_->recvAll(dst, bytes, stop, why);
  }
  // UCX takes what arrives into its own buffers while the worker progresses: the sender's stream sends
  // complete, whatever this rank is doing (without it, two ranks of an allgather that each send before
  // they receive waited on each other: 2 hosts, 16 MB, 0.09 GB/s).
  void awaitRank(int ms) override { worker_->progressFor(ms); }
  void interrupt() override { worker_->wake(); }
  void shutdown() override { worker_->wake(); }

 private:
  std::unique_ptr<UcxWorker> worker_;
  ConnectRequest req_;
  uint64_t token_;
  double timeoutSec_;
};

}  // namespace

bool UcxTransport::reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est,
                           std::string* reason) const {
  if (params().NET != "ucx") {
    *reason = "ucx: not chosen (LOOM_NET=ucx selects it)";
    return false;
  }
  const UcxContext& c = ucxContext();
  if (c.context == nullptr) {
    *reason = "ucx: unusable (" + c.error + ")";
    return false;
  }
  // Preferred over the socket transport when chosen: the estimate is UCX's business, not ours.
  est->bandwidthGBs = self.hostHash == peer.hostHash ? 2.5 : 1.5;
  est->latencyUs = 15;
  *reason = "ucx: UCP stream endpoint";
  return true;
}

loomResult_t UcxTransport::createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) {
  SocketAddress addr;
  std::string iface;
  LOOM_CHECK(findInterfaceAddress(&addr, &iface));
  auto worker = std::make_unique<UcxWorker>();
  LOOM_CHECK(worker->create());
  LOOM_CHECK(worker->listen(&addr));
  NetListenInfo ci;
  publishNetListenInfo(kUcxMagic, addr, 1, info, &ci);
  LOOM_TRACE(kNet, "ucx: rank %d <- %d channel %d listens on %s (%s)", req.self, req.peer, req.channel,
             addr.toString().c_str(), iface.c_str());
  *recv = std::make_unique<RelayRecvQueue>(
      std::make_unique<UcxRecvWire>(std::move(worker), req, ci.token, static_cast<double>(params().TIMEOUT)),
      netRingShape(), req.peer);
  return loomSuccess;
}

loomResult_t UcxTransport::connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                                       std::unique_ptr<SendQueue>* send) {
  NetListenInfo ci;
  SocketAddress addr;
  LOOM_CHECK(readNetListenInfo(peerInfo, kUcxMagic, 1, "ucx", req.peer, &ci, &addr));
  auto worker = std::make_unique<UcxWorker>();
  LOOM_CHECK(worker->create());
  *send = std::make_unique<RelaySendQueue>(
      std::make_unique<UcxSendWire>(std::move(worker), addr, makeNetHello(kUcxMagic, req, ci.token, 0, 1)),
      netRingShape(), req.peer);
  return loomSuccess;
}

}  // namespace loom
