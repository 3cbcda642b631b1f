#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "base/log.h"
#include "base/params.h"
#include "base/socket.h"
#include "base/wait.h"
#include "transport/net/hello.h"
#include "transport/socket/socket_queues.h"

namespace loom {

SocketRecvQueue::SocketRecvQueue(int listenFd, const ConnectRequest& req, uint64_t token, int nsocks, RingShape shape)
    : listenFd_(listenFd),
      req_(req),
      token_(token),
      fds_(static_cast<size_t>(nsocks), -1),
      slot_(shape.slotBytes),
      io_(static_cast<size_t>(nsocks)) {}

SocketRecvQueue::~SocketRecvQueue() {
  closeSocket(&listenFd_);
  for (int& fd : fds_) closeSocket(&fd);
}

// Accepts the peer's sockets on first use, refusing any other connection (wrong token, communicator or
// queue).  By then the peer has connected them all: a communicator's connect() returns only once every
// peer attached to this rank's receiving side.
loomResult_t SocketRecvQueue::open(const WaitContext* ctx) {
  if (opened_) return loomSuccess;
  const double timeoutSec = static_cast<double>(params().TIMEOUT);
  const Deadline acceptBy = Deadline::afterSeconds(timeoutSec);
  const std::atomic<bool>* abort = ctx != nullptr ? ctx->abort : nullptr;
  for (size_t accepted = 0; accepted < fds_.size();) {
    int fd = -1;
    if (acceptSocket(listenFd_, acceptBy, abort, &fd) != loomSuccess || fd < 0) {
      failure_ = "the peer never connected within the timeout";
      return loomRemoteError;
    }
    NetHello h{};
    if (recvAll(fd, &h, sizeof h, Deadline::afterSeconds(10), abort, "socket hello") != loomSuccess ||
        !netHelloMatches(h, kSocketMagic, req_, token_, static_cast<int32_t>(fds_.size())) || fds_[h.index] >= 0) {
      LOOM_WARN(kNet, "socket transport: refused a connection that is not from rank %d (bad hello)", req_.peer);
      closeSocket(&fd);
      continue;
    }
    fds_[h.index] = fd;
    ++accepted;
  }
  closeSocket(&listenFd_);
  opened_ = true;
  return loomSuccess;
}

// Moves what the sockets hold now into the frame in progress: false once the connection failed.
bool SocketRecvQueue::advance() {
  if (!failure_.empty()) return false;
  for (;;) {
    switch (state_) {
      case State::kIdle:
        io_.clear();
        io_.add(0, &head_, sizeof head_);
        state_ = State::kHeader;
        break;
      case State::kHeader: {
        if (!io_.pass(fds_, false, &failure_)) return false;
        if (!io_.done()) return true;
        const bool direct = (head_.header.bytes & kDirectFrame) != 0;
        head_.header.bytes &= ~kDirectFrame;
        if (direct) {
          state_ = State::kDirect;
          return true;
        }
        inCaller_ = into_ != nullptr && head_.header.bytes <= intoCapacity_;
        inlined_ = head_.header.bytes <= kInlineBytes;
        if (inlined_) {  // the whole message came with its head
          if (inCaller_) {
            std::memcpy(into_, head_.inlined, head_.header.bytes);
            countSlotCopy(head_.header.bytes);
          }
          state_ = State::kMessage;
          return true;
        }
        if (!inCaller_ && !frameFits(head_.header, slot_.size(), &failure_)) return false;
        io_.clear();
        io_.addStriped(inCaller_ ? into_ : slot_.data(), head_.header.bytes);
        state_ = State::kPayload;
        break;
      }
      case State::kPayload:
      case State::kDirectPayload:
        if (!io_.pass(fds_, false, &failure_)) return false;
        if (!io_.done()) return true;
        state_ = state_ == State::kPayload ? State::kMessage : State::kDirectRead;
        return true;
      default:
        return true;  // a whole frame is held: nothing moves until release()
    }
  }
}

// Waits as base/wait.h does (spin, yield, then sleep with the same bounds), sleeping in poll() on the
// sockets, so that the data itself wakes the rank.
template <typename Done>
loomResult_t SocketRecvQueue::waitFor(Done done, const WaitContext& ctx) {
  bool failed = false;
  std::vector<pollfd> pfds;
  LOOM_CHECK(waitWith(
      [&] {
        // Look before reading: a read takes the socket's lock, and a segment arriving meanwhile waits in
        // the socket's backlog until the read returns (8-byte allreduce across 2 namespace hosts, median
        // of 8 runs: 20.8 -> 18.3 us; the spread of single runs is larger than that).
        pfds.clear();
        io_.pollSet(fds_, false, &pfds);
        if (!pfds.empty() && ::poll(pfds.data(), pfds.size(), 0) == 0) return false;
        return (failed = !advance()) || done();
      },
      [&](int ms) {
        pfds.clear();
        io_.pollSet(fds_, false, &pfds);
        ::poll(pfds.data(), pfds.size(), ms);
      },
      ctx, Producer::kPeer));
  return failed ? netFailure(ctx, req_.peer, "receive from", failure_) : loomSuccess;
}

void SocketRecvQueue::take(const void** data, size_t* bytes, uint64_t* signature) const {
  *data = state_ != State::kMessage ? nullptr : inlined_ ? head_.inlined : slot_.data();
  *bytes = head_.header.bytes;
  *signature = head_.header.signature;
}

loomResult_t SocketRecvQueue::wait(const void** data, size_t* bytes, uint64_t* signature, const WaitContext& ctx) {
  if (open(&ctx) != loomSuccess) return netFailure(ctx, req_.peer, "receive from", failure_);
  LOOM_CHECK(waitFor([&] { return holding(); }, ctx));
  take(data, bytes, signature);
  return loomSuccess;
}

bool SocketRecvQueue::tryWait(const void** data, size_t* bytes, uint64_t* signature) {
  // A failure is reported by the next blocking call (the callers of tryWait wait when nothing moves).
  if (open(nullptr) != loomSuccess || !advance() || !holding()) return false;
  take(data, bytes, signature);
  return true;
}

void SocketRecvQueue::release() { state_ = State::kIdle; }

bool SocketRecvQueue::isDirect() const {
  return state_ == State::kDirect || state_ == State::kDirectPayload || state_ == State::kDirectRead;
}

loomResult_t SocketRecvQueue::readDirect(void* dst, const WaitContext& ctx) {
  if (state_ != State::kDirect) return setError(loomInternalError, "socket: readDirect without a direct frame");
  io_.clear();
  io_.addStriped(dst, head_.header.bytes);
  state_ = State::kDirectPayload;
  const loomResult_t r = waitFor([&] { return state_ == State::kDirectRead; }, ctx);
  // A read cut short would go on writing into dst in a later call: the connection is done with.
  if (r != loomSuccess && failure_.empty()) failure_ = "a direct read was interrupted";
  return r;
}

loomResult_t SocketRecvQueue::receiveInto(void* dst, size_t capacity, size_t* bytes, uint64_t* signature,
                                          const WaitContext& ctx) {
  if (open(&ctx) != loomSuccess) return netFailure(ctx, req_.peer, "receive from", failure_);
  into_ = dst;
  intoCapacity_ = capacity;
  loomResult_t r = waitFor([&] { return holding(); }, ctx);
  into_ = nullptr;
  if (r != loomSuccess) {
    if (state_ == State::kPayload && inCaller_ && failure_.empty()) failure_ = "a receive was interrupted";
    return r;
  }
  *bytes = head_.header.bytes;
  *signature = head_.header.signature;
  if (head_.header.bytes <= capacity) {
    if (state_ == State::kDirect) {
      LOOM_CHECK(readDirect(dst, ctx));
    } else if (!inCaller_) {
      // The frame began arriving before this call (a tryWait read it into the slot).
      if (head_.header.bytes > 0) std::memcpy(dst, inlined_ ? head_.inlined : slot_.data(), head_.header.bytes);
      countSlotCopy(head_.header.bytes);
    }
  } else if (state_ == State::kDirect) {
    failure_ = "a direct frame larger than its receive was refused";  // its payload is still in the sockets
  }
  release();
  return loomSuccess;
}

}  // namespace loom
