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
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/params.h"
#include "core/socket.h"
#include "core/wait.h"
#include "transport/net/hello.h"
#include "transport/net/staged_queue.h"

namespace loom {

namespace {

constexpr uint32_t kSocketMagic = 0x4c4f4f53;  // "LOOS"

constexpr int32_t kMaxSockets = 16;

// A connection is LOOM_NSOCKS sockets.  Each frame's header travels on socket 0; its payload is cut into
// one contiguous part per socket (all of it on socket 0 below kStripeMinBytes, where striping only adds
// system calls), so both ends derive the same cut from the frame's size alone.
constexpr size_t kStripeMinBytes = 64 << 10;

void stripe(size_t bytes, size_t nsocks, std::vector<std::pair<size_t, size_t>>* parts) {
  parts->assign(nsocks, {0, 0});
  if (bytes < kStripeMinBytes || nsocks == 1) {
    (*parts)[0] = {0, bytes};
    return;
  }
  const size_t per = ((bytes / nsocks) + 4095) & ~size_t{4095};
  for (size_t j = 0, off = 0; j < nsocks; ++j) {
    const size_t len = std::min(per, bytes - off);
    (*parts)[j] = {off, len};
    off += len;
  }
}

// Moves every socket's gather list, whichever socket is ready first (nonblocking, poll on all of them),
// until all are done; ended by `stop` (checked every 100 ms) or an error, returned as text rather than
// logged (a peer closing at teardown is normal).
bool transferAll(const std::vector<int>& fds, std::vector<std::vector<iovec>>* lists, bool sending,
                 const std::atomic<bool>& stop, std::string* why) {
  const size_t n = fds.size();
  std::vector<size_t> next(n, 0);
  std::vector<pollfd> pfds;
  std::vector<size_t> which;
  for (;;) {
    pfds.clear();
    which.clear();
    for (size_t j = 0; j < n; ++j) {
      auto& l = (*lists)[j];
      while (next[j] < l.size() && l[next[j]].iov_len == 0) ++next[j];
      if (next[j] < l.size()) {
        pfds.push_back(pollfd{fds[j], static_cast<short>(sending ? POLLOUT : POLLIN), 0});
        which.push_back(j);
      }
    }
    if (pfds.empty()) return true;
    if (stop.load()) return *why = "stopped", false;
    int r = poll(pfds.data(), pfds.size(), 100);
    if (r < 0 && errno != EINTR) return *why = std::string("poll: ") + strerror(errno), false;
    if (r <= 0) continue;
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (pfds[k].revents == 0) continue;
      const size_t j = which[k];
      auto& l = (*lists)[j];
      msghdr msg{};
      msg.msg_iov = &l[next[j]];
      msg.msg_iovlen = std::min<size_t>(l.size() - next[j], 1024);
      // With one socket left to serve, block in the call until its whole list moved: one system call
      // per batch instead of one per socket-buffer's worth (shutdown() at teardown ends the wait).
      const int flags = pfds.size() == 1 ? (sending ? 0 : MSG_WAITALL) : MSG_DONTWAIT;
      ssize_t got = sending ? ::sendmsg(fds[j], &msg, MSG_NOSIGNAL | flags) : ::recvmsg(fds[j], &msg, flags);
      if (got == 0 && !sending) return *why = "the peer closed the connection", false;
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return *why = strerror(errno), false;
      }
      // Skip what moved: whole pieces, then part of the next.
      size_t done = static_cast<size_t>(got);
      while (next[j] < l.size() && done >= l[next[j]].iov_len) done -= l[next[j]++].iov_len;
      if (next[j] < l.size()) {
        l[next[j]].iov_base = static_cast<char*>(l[next[j]].iov_base) + done;
        l[next[j]].iov_len -= done;
      }
    }
  }
}

class SocketSendWire : public SendWire {
 public:
  explicit SocketSendWire(std::vector<int> fds) : fds_(std::move(fds)), lists_(fds_.size()) {}
  ~SocketSendWire() override {
    for (int& fd : fds_) closeSocket(&fd);
  }
  bool send(const Frame* frames, size_t n, const std::atomic<bool>& stop, std::string* why) override {
    // One gather list per socket for the whole batch: a system call moves many frames.
    headers_.resize(n);
    for (auto& l : lists_) l.clear();
    for (size_t k = 0; k < n; ++k) {
      headers_[k] = FrameHeader{frames[k].bytes, frames[k].signature};
      lists_[0].push_back(iovec{&headers_[k], sizeof(FrameHeader)});
      stripe(frames[k].bytes, fds_.size(), &parts_);
      for (size_t j = 0; j < fds_.size(); ++j)
        lists_[j].push_back(iovec{static_cast<char*>(frames[k].data) + parts_[j].first, parts_[j].second});
    }
    return transferAll(fds_, &lists_, true, stop, why);
  }
  void shutdown() override {
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  std::vector<int> fds_;
  std::vector<FrameHeader> headers_;
  std::vector<std::vector<iovec>> lists_;
  std::vector<std::pair<size_t, size_t>> parts_;
};

class SocketRecvWire : public RecvWire {
 public:
  SocketRecvWire(int listenFd, const ConnectRequest& req, uint64_t token, int nsocks, double timeoutSec)
      : listenFd_(listenFd),
        req_(req),
        token_(token),
        timeoutSec_(timeoutSec),
        fds_(static_cast<size_t>(nsocks)),
        lists_(static_cast<size_t>(nsocks)) {
    for (auto& fd : fds_) fd.store(-1);
  }
  ~SocketRecvWire() override {
    closeSocket(&listenFd_);
    for (auto& a : fds_) {
      int fd = a.exchange(-1);
      closeSocket(&fd);
    }
  }
  // Accepts the peer's sockets, refusing any other connection (wrong token, communicator or queue).
  bool open(const std::atomic<bool>& stop, std::string* why) override {
    const Deadline acceptBy = Deadline::afterSeconds(timeoutSec_);
    for (size_t accepted = 0; accepted < fds_.size();) {
      int fd = -1;
      if (acceptSocket(listenFd_, acceptBy, &stop, &fd) != loomSuccess || fd < 0)
        return *why = "the peer never connected within the timeout", false;
      NetHello h{};
      if (recvAll(fd, &h, sizeof h, Deadline::afterSeconds(10), &stop, "socket hello") != loomSuccess ||
          !netHelloMatches(h, kSocketMagic, req_, token_, static_cast<int32_t>(fds_.size())) ||
          fds_[h.index].load() >= 0) {
        LOOM_WARN(kNet, "socket transport: refused a connection that is not from rank %d (bad hello)", req_.peer);
        closeSocket(&fd);
        continue;
      }
      fds_[h.index].store(fd);
      ++accepted;
    }
    closeSocket(&listenFd_);
    plain_.clear();
    for (auto& a : fds_) plain_.push_back(a.load());
    return true;
  }
  bool receive(size_t index, void* slot, size_t capacity, size_t* bytes, uint64_t* signature,
               const std::function<void()>& grantFreed, const std::atomic<bool>& stop, std::string* why) override {
    FrameHeader h{};
    for (auto& l : lists_) l.clear();
    lists_[0].push_back(iovec{&h, sizeof h});
    if (!transferAll(plain_, &lists_, false, stop, why)) return false;
    if (!frameFits(h, capacity, why)) return false;
    stripe(h.bytes, fds_.size(), &parts_);
    for (size_t j = 0; j < fds_.size(); ++j) {
      lists_[j].clear();
      lists_[j].push_back(iovec{static_cast<char*>(slot) + parts_[j].first, parts_[j].second});
    }
    if (!transferAll(plain_, &lists_, false, stop, why)) return false;
    *bytes = h.bytes;
    *signature = h.signature;
    return true;
  }
  void shutdown() override {
    for (auto& a : fds_) {
      int fd = a.load();
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    }
  }

 private:
  int listenFd_;
  ConnectRequest req_;
  uint64_t token_;
  double timeoutSec_;
  std::vector<std::atomic<int>> fds_;
  std::vector<int> plain_;
  std::vector<std::vector<iovec>> lists_;
  std::vector<std::pair<size_t, size_t>> parts_;
};

}  // namespace

bool SocketTransport::reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est,
                              std::string* reason) const {
  // TCP reaches any rank whose bootstrap reached us; a network is slower than shared memory.
  if (!params().NET.empty() && params().NET != "socket") {
    *reason = "socket: not chosen (LOOM_NET=" + params().NET + ")";
    return false;
  }
  est->bandwidthGBs = self.hostHash == peer.hostHash ? 2.0 : 1.2;
  est->latencyUs = 20;
  *reason = "socket: TCP";
  return true;
}

loomResult_t SocketTransport::createRecv(const ConnectRequest& req, ConnectInfo* info,
                                         std::unique_ptr<RecvQueue>* recv) {
  if (params().NSOCKS < 1 || params().NSOCKS > kMaxSockets)
    return setError(loomInvalidArgument, "LOOM_NSOCKS=%lld is out of range (1..%d)",
                    static_cast<long long>(params().NSOCKS), kMaxSockets);
  int fd = -1;
  NetListenInfo ci;
  LOOM_CHECK(listenAndPublish(kSocketMagic, static_cast<int32_t>(params().NSOCKS), info, &ci, &fd));
  *recv = std::make_unique<StagedRecvQueue>(
      std::make_unique<SocketRecvWire>(fd, req, ci.token, ci.count, static_cast<double>(params().TIMEOUT)),
      netRingShape(), req.peer);
  return loomSuccess;
}

loomResult_t SocketTransport::connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                                          std::unique_ptr<SendQueue>* send) {
  NetListenInfo ci;
  SocketAddress addr;
  LOOM_CHECK(readNetListenInfo(peerInfo, kSocketMagic, kMaxSockets, "socket", req.peer, &ci, &addr));
  const Deadline deadline = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
  std::vector<int> fds;
  loomResult_t r = loomSuccess;
  for (int32_t j = 0; j < ci.count && r == loomSuccess; ++j) {
    int fd = -1;
    // The receiver listened before it published the address: refused means it is gone.
    r = connectSocket(addr, deadline, nullptr, &fd, /*retryRefused=*/false);
    if (r != loomSuccess) {
      r = setError(r, "socket: rank %d cannot reach rank %d at %s: %s", req.self, req.peer, addr.toString().c_str(),
                   std::string(lastErrorDetail()).c_str());
      setLastErrorPeer(req.peer);
      break;
    }
    fds.push_back(fd);
    NetHello h = makeNetHello(kSocketMagic, req, ci.token, j, ci.count);
    r = sendAll(fd, &h, sizeof h, deadline, nullptr, "socket hello");
  }
  if (r != loomSuccess) {
    for (int& fd : fds) closeSocket(&fd);
    return r;
  }
  *send = std::make_unique<StagedSendQueue>(std::make_unique<SocketSendWire>(std::move(fds)),
                                            netRingShape(), req.peer);
  return loomSuccess;
}

}  // namespace loom
