#include "transport/socket/socket_transport.h"

#include <poll.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/params.h"
#include "core/socket.h"
#include "core/wait.h"

namespace loom {

namespace {

constexpr uint32_t kMagic = 0x4c4f4f53;  // "LOOS"

// What the receiving side publishes: where to connect and the token the sender must present.
struct SocketConnectInfo {
  uint32_t magic;
  uint32_t addrLength;
  uint64_t token;
  sockaddr_storage addr;
};
static_assert(sizeof(SocketConnectInfo) <= sizeof(ConnectInfo), "socket connect info too large");

// The first bytes on every connection: who connects, for which communicator and queue.
struct Hello {
  uint32_t magic;
  int32_t from, to, channel;
  uint64_t commKey, token;
};

struct FrameHeader {
  uint64_t bytes;
  uint64_t signature;
};

struct Slot {
  std::vector<char> data;
  size_t bytes = 0;
  uint64_t signature = 0;
};

// State shared by a queue and its I/O thread.  `produced` counts slots the producer side filled
// (the rank for a send queue, the thread for a receive queue), `consumed` those the other side emptied.
struct Ring {
  std::vector<Slot> slots;
  std::atomic<uint32_t> produced{0}, consumed{0};
  std::atomic<uint32_t> rankSleeping{0}, threadSleeping{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::mutex errorMutex;
  std::string error;

  Ring(size_t n, size_t bytes) : slots(n) {
    for (Slot& s : slots) s.data.resize(bytes);
  }
  void fail(const std::string& why) {
    {
      std::lock_guard<std::mutex> g(errorMutex);
      if (error.empty()) error = why;
    }
    failed.store(true);
    // Wake the rank whichever counter it sleeps on (without writing them: the rank owns one of them).
    futexWake(&produced);
    futexWake(&consumed);
  }
  std::string why() {
    std::lock_guard<std::mutex> g(errorMutex);
    return error;
  }
};

// The I/O threads wait on the ring's counters in 100 ms slices so that `stop` is seen.
template <typename Ready>
bool threadWait(Ring& r, std::atomic<uint32_t>* word, Ready ready) {
  while (!ready()) {
    if (r.stop.load()) return false;
    r.threadSleeping.store(1);
    uint32_t seen = word->load();
    if (!ready() && !r.stop.load()) futexWait(word, seen, 100);
    r.threadSleeping.store(0);
  }
  return true;
}

// Whole gather-list write for the sender's thread (its batch of frames: one system call for many
// pieces), with the same stop and error rules as readAll.
bool writevAll(int fd, iovec* iov, int count, const std::atomic<bool>& stop, std::string* why) {
  while (count > 0) {
    if (stop.load()) return *why = "stopped", false;
    pollfd pfd{fd, POLLOUT, 0};
    int r = poll(&pfd, 1, 100);
    if (r < 0 && errno != EINTR) return *why = std::string("poll: ") + strerror(errno), false;
    if (r <= 0) continue;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return *why = strerror(errno), false;
    }
    // Skip what was written: whole pieces, then part of the next.
    size_t done = static_cast<size_t>(n);
    while (count > 0 && done >= iov->iov_len) {
      done -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + done;
      iov->iov_len -= done;
    }
  }
  return true;
}

std::string peerName(int rank) { return "rank " + std::to_string(rank); }

// A connection that closed almost always means its process is exiting: give the liveness probe a moment
// to see that, since its message also names every other rank already gone (the first one to die is
// usually the cause, and the others only followed).
std::string explainFailure(const WaitContext& ctx, int peer, const char* direction, const std::string& why) {
  if (ctx.probe != nullptr) {
    for (int i = 0; i < 20; ++i) {
      std::string gone = ctx.probe(ctx.probeArg, peer);
      if (!gone.empty()) return gone;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return std::string(direction) + " " + peerName(peer) + ": " + why;
}

// Whole-buffer socket read for the I/O threads: blocking, ended by `stop` (checked every 100 ms) or by
// an error, which is returned as text rather than logged (a peer closing at teardown is normal).
bool readAll(int fd, void* buf, size_t len, const std::atomic<bool>& stop, std::string* why) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    if (stop.load()) return *why = "stopped", false;
    pollfd pfd{fd, POLLIN, 0};
    int r = poll(&pfd, 1, 100);
    if (r < 0 && errno != EINTR) return *why = std::string("poll: ") + strerror(errno), false;
    if (r <= 0) continue;
    ssize_t n = ::recv(fd, p, len, MSG_WAITALL);
    if (n == 0) return *why = "the peer closed the connection", false;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return *why = strerror(errno), false;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

class SocketSendQueue : public SendQueue {
 public:
  SocketSendQueue(int fd, size_t nslots, size_t slotBytes, int peer)
      : fd_(fd), ring_(nslots, slotBytes), peer_(peer), thread_([this] { run(); }) {}
  ~SocketSendQueue() override {
    // A collective ends once its last slot is posted; the thread may still be writing it.  Let it finish
    // (bounded by LOOM_TIMEOUT, and over at once if the connection failed) before stopping it.
    const Deadline flushBy = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
    while (ring_.consumed.load() != posted_ && !ring_.failed.load() && !flushBy.expired()) {
      ring_.rankSleeping.store(1);
      uint32_t seen = ring_.consumed.load();
      if (seen != posted_ && !ring_.failed.load()) futexWait(&ring_.consumed, seen, 100);
      ring_.rankSleeping.store(0);
    }
    ring_.stop.store(true);
    publishAndWake(&ring_.produced, ring_.produced.load(), &ring_.threadSleeping);
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    closeSocket(&fd_);
  }
  size_t slotBytes() const override { return ring_.slots[0].data.size(); }
  loomResult_t acquire(void** slot, const WaitContext& ctx) override {
    LOOM_CHECK(waitUntil([&] { return hasFree() || ring_.failed.load(); }, &ring_.consumed, &ring_.rankSleeping, ctx));
    if (!hasFree()) return setError(loomRemoteError, "%s", explainFailure(ctx, peer_, "send to", ring_.why()).c_str());
    *slot = current().data.data();
    return loomSuccess;
  }
  bool tryAcquire(void** slot) override {
    if (!hasFree()) return false;
    *slot = current().data.data();
    return true;
  }
  bool needsFlush() const override { return true; }
  loomResult_t flush(const WaitContext& ctx) override {
    LOOM_CHECK(waitUntil([&] { return ring_.consumed.load() == posted_ || ring_.failed.load(); }, &ring_.consumed,
                         &ring_.rankSleeping, ctx));
    if (ring_.consumed.load() != posted_)
      return setError(loomRemoteError, "%s", explainFailure(ctx, peer_, "send to", ring_.why()).c_str());
    return loomSuccess;
  }
  void post(size_t bytes, uint64_t signature) override {
    Slot& s = current();
    s.bytes = bytes;
    s.signature = signature;
    publishAndWake(&ring_.produced, ++posted_, &ring_.threadSleeping);
  }

 private:
  bool hasFree() const { return posted_ - ring_.consumed.load(std::memory_order_acquire) < ring_.slots.size(); }
  Slot& current() { return ring_.slots[posted_ % ring_.slots.size()]; }

  void run() {
    uint32_t sent = 0;
    for (;;) {
      if (!threadWait(ring_, &ring_.produced, [&] { return ring_.produced.load() != sent; })) return;
      // Every slot posted so far goes out in one gather write: header and payload of each.
      const uint32_t batch = ring_.produced.load() - sent;
      std::vector<FrameHeader> headers(batch);
      std::vector<iovec> iov(2 * batch);
      for (uint32_t k = 0; k < batch; ++k) {
        Slot& s = ring_.slots[(sent + k) % ring_.slots.size()];
        headers[k] = FrameHeader{s.bytes, s.signature};
        iov[2 * k] = iovec{&headers[k], sizeof(FrameHeader)};
        iov[2 * k + 1] = iovec{s.data.data(), s.bytes};
      }
      std::string why;
      if (!writevAll(fd_, iov.data(), static_cast<int>(iov.size()), ring_.stop, &why)) {
        if (!ring_.stop.load()) ring_.fail("connection lost: " + why);
        return;
      }
      sent += batch;
      publishAndWake(&ring_.consumed, sent, &ring_.rankSleeping);
    }
  }

  int fd_;
  Ring ring_;
  int peer_;
  uint32_t posted_ = 0;
  std::thread thread_;
};

class SocketRecvQueue : public RecvQueue {
 public:
  SocketRecvQueue(int listenFd, size_t nslots, size_t slotBytes, const ConnectRequest& req, uint64_t token,
                  double timeoutSec)
      : listenFd_(listenFd),
        ring_(nslots, slotBytes),
        peer_(req.peer),
        self_(req.self),
        channel_(req.channel),
        commKey_(req.commKey),
        token_(token),
        timeoutSec_(timeoutSec),
        thread_([this] { run(); }) {}
  ~SocketRecvQueue() override {
    ring_.stop.store(true);
    publishAndWake(&ring_.consumed, ring_.consumed.load(), &ring_.threadSleeping);
    int fd = fd_.load();
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
    thread_.join();
    closeSocket(&listenFd_);
    fd = fd_.exchange(-1);
    closeSocket(&fd);
  }
  size_t slotBytes() const override { return ring_.slots[0].data.size(); }
  loomResult_t wait(const void** data, size_t* bytes, uint64_t* signature, const WaitContext& ctx) override {
    LOOM_CHECK(waitUntil([&] { return ready() || ring_.failed.load(); }, &ring_.produced, &ring_.rankSleeping, ctx));
    if (!ready())
      return setError(loomRemoteError, "%s", explainFailure(ctx, peer_, "receive from", ring_.why()).c_str());
    take(data, bytes, signature);
    return loomSuccess;
  }
  bool tryWait(const void** data, size_t* bytes, uint64_t* signature) override {
    if (!ready()) return false;
    take(data, bytes, signature);
    return true;
  }
  void release() override { publishAndWake(&ring_.consumed, ++released_, &ring_.threadSleeping); }

 private:
  bool ready() const { return ring_.produced.load(std::memory_order_acquire) != released_; }
  void take(const void** data, size_t* bytes, uint64_t* signature) {
    const Slot& s = ring_.slots[released_ % ring_.slots.size()];
    *data = s.data.data();
    *bytes = s.bytes;
    *signature = s.signature;
  }

  // Accepts the peer's connection (refusing any other), then reads frames into free slots.
  void run() {
    const Deadline acceptBy = Deadline::afterSeconds(timeoutSec_);
    int fd = -1;
    while (fd < 0) {
      if (acceptSocket(listenFd_, acceptBy, &ring_.stop, &fd) != loomSuccess || fd < 0) {
        if (!ring_.stop.load()) ring_.fail("the peer never connected within the timeout");
        return;
      }
      Hello h{};
      if (recvAll(fd, &h, sizeof h, Deadline::afterSeconds(10), &ring_.stop, "socket hello") != loomSuccess ||
          h.magic != kMagic || h.token != token_ || h.commKey != commKey_ || h.from != peer_ || h.to != self_ ||
          h.channel != channel_) {
        LOOM_WARN(kNet, "socket transport: refused a connection that is not from %s (bad hello)",
                  peerName(peer_).c_str());
        closeSocket(&fd);
      }
    }
    fd_.store(fd);
    closeSocket(&listenFd_);
    if (ring_.stop.load()) return;
    uint32_t filled = 0;
    std::string why;
    for (;;) {
      if (!threadWait(ring_, &ring_.consumed,
                      [&] { return filled - ring_.consumed.load() < ring_.slots.size(); }))
        return;
      Slot& s = ring_.slots[filled % ring_.slots.size()];
      FrameHeader h{};
      if (!readAll(fd, &h, sizeof h, ring_.stop, &why)) {
        if (!ring_.stop.load()) ring_.fail(why);
        return;
      }
      if (h.bytes > s.data.size()) {
        ring_.fail("the peer sent a frame of " + std::to_string(h.bytes) + " bytes, larger than a slot");
        return;
      }
      if (!readAll(fd, s.data.data(), h.bytes, ring_.stop, &why)) {
        if (!ring_.stop.load()) ring_.fail(why);
        return;
      }
      s.bytes = h.bytes;
      s.signature = h.signature;
      publishAndWake(&ring_.produced, ++filled, &ring_.rankSleeping);
    }
  }

  int listenFd_;
  std::atomic<int> fd_{-1};
  Ring ring_;
  int peer_, self_, channel_;
  uint64_t commKey_, token_;
  double timeoutSec_;
  uint32_t released_ = 0;
  std::thread thread_;
};

uint64_t randomToken() {
  static std::mutex mu;
  static std::mt19937_64 gen(std::random_device{}());
  std::lock_guard<std::mutex> g(mu);
  return gen();
}

}  // namespace

bool SocketTransport::reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est,
                              std::string* reason) const {
  // TCP reaches any rank whose bootstrap reached us; a network is slower than shared memory.
  est->bandwidthGBs = self.hostHash == peer.hostHash ? 2.0 : 1.2;
  est->latencyUs = 20;
  *reason = "socket: TCP";
  return true;
}

loomResult_t SocketTransport::createRecv(const ConnectRequest& req, ConnectInfo* info,
                                         std::unique_ptr<RecvQueue>* recv) {
  SocketAddress addr;
  std::string iface;
  LOOM_CHECK(findInterfaceAddress(&addr, &iface));
  int fd = -1;
  LOOM_CHECK(listenSocket(&addr, &fd));
  SocketConnectInfo ci{};
  ci.magic = kMagic;
  ci.addrLength = addr.length;
  ci.token = randomToken();
  std::memcpy(&ci.addr, &addr.storage, sizeof ci.addr);
  std::memcpy(info->bytes, &ci, sizeof ci);
  LOOM_TRACE(kNet, "socket: rank %d <- %d channel %d listens on %s (%s)", req.self, req.peer, req.channel,
             addr.toString().c_str(), iface.c_str());
  *recv = std::make_unique<SocketRecvQueue>(fd, static_cast<size_t>(params().SHM_NSLOTS),
                                            static_cast<size_t>(params().SHM_SLOT_SIZE), req, ci.token,
                                            static_cast<double>(params().TIMEOUT));
  return loomSuccess;
}

loomResult_t SocketTransport::connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                                          std::unique_ptr<SendQueue>* send) {
  SocketConnectInfo ci;
  std::memcpy(&ci, peerInfo.bytes, sizeof ci);
  if (ci.magic != kMagic || ci.addrLength > sizeof ci.addr)
    return setError(loomRemoteError, "socket: rank %d sent a malformed connection description", req.peer);
  SocketAddress addr{};
  std::memcpy(&addr.storage, &ci.addr, sizeof ci.addr);
  addr.length = ci.addrLength;
  int fd = -1;
  const Deadline deadline = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
  LOOM_CHECK(connectSocket(addr, deadline, nullptr, &fd));
  Hello h{kMagic, req.self, req.peer, req.channel, req.commKey, ci.token};
  loomResult_t r = sendAll(fd, &h, sizeof h, deadline, nullptr, "socket hello");
  if (r != loomSuccess) {
    closeSocket(&fd);
    return r;
  }
  *send = std::make_unique<SocketSendQueue>(fd, static_cast<size_t>(params().SHM_NSLOTS),
                                            static_cast<size_t>(params().SHM_SLOT_SIZE), req.peer);
  return loomSuccess;
}

}  // namespace loom
