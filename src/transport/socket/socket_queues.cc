// The socket transport's two queue ends, the last step of a call's path (docs/architecture.md): the
// sending rank writes its own frames (header and payload in one sendmsg, striped over the sockets) and a
// helper thread takes only what the kernel did not accept at once; the receiving rank polls and reads
// its own sockets, straight into its destination where the frame lands in the caller's buffer.
#include <poll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstring>

#include "base/log.h"
#include "base/params.h"
#include "base/socket.h"
#include "base/wait.h"
#include "transport/net/hello.h"
#include "transport/socket/socket_queues.h"

namespace loom {

// ---- The sending end ----

SocketSendQueue::SocketSendQueue(std::vector<int> fds, RingShape shape, int peer)
    : fds_(std::move(fds)),
      slotBytes_(shape.slotBytes),
      peer_(peer),
      slots_(shape.nslots),
      entries_(shape.nslots),
      io_(fds_.size()) {
  for (auto& s : slots_) s.resize(slotBytes_);
}

SocketSendQueue::~SocketSendQueue() {
  // Everything posted reaches the kernel first (the helper moves it; bounded by LOOM_TIMEOUT, and over
  // at once if the connection failed): a call ends once its last frame is posted.
  const Deadline flushBy = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
  while (written_.load() != posted_ && !failed_.load() && !flushBy.expired()) {
    rankSleeping_.store(1);
    const uint32_t seen = written_.load();
    if (seen != posted_ && !failed_.load()) futexWait(&written_, seen, 100);
    rankSleeping_.store(0);
  }
  stop_.store(true);
  publishAndWake(&helpAsked_, helpAsked_.load() + 1, &helperSleeping_);
  if (helper_.joinable()) helper_.join();
  for (int& fd : fds_) {
    if (fd >= 0) ::shutdown(fd, SHUT_WR);  // after the data the kernel still holds, the peer reads an end
    closeSocket(&fd);
  }
}

void SocketSendQueue::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> g(errorMutex_);
    if (error_.empty()) error_ = why;
  }
  failed_.store(true);
  futexWake(&written_);
}

std::string SocketSendQueue::why() {
  std::lock_guard<std::mutex> g(errorMutex_);
  return error_;
}

// Moves frames, oldest first, as far as the sockets take them now: returns with every frame posted so
// far written, or with one loaded that the sockets cannot take now.  False once the connection failed.
bool SocketSendQueue::pushLocked() {
  uint32_t w = written_.load(std::memory_order_relaxed);
  while (w != postedShared_.load(std::memory_order_acquire)) {
    if (!loaded_) {
      const Entry& e = entries_[w % entries_.size()];
      header_ = FrameHeader{e.bytes, e.signature};
      io_.clear();
      // Header and payload in one system call; a small payload in the frame head's room (SocketFrameHead),
      // a large one after it (the room left as it is: the receiver ignores it).
      io_.add(0, &header_, sizeof header_);
      static char room[kInlineBytes];
      if (e.bytes <= kInlineBytes) {
        io_.add(0, const_cast<void*>(e.data), e.bytes);
        io_.add(0, room, kInlineBytes - e.bytes);
      } else {
        io_.add(0, room, kInlineBytes);
        io_.addStriped(const_cast<void*>(e.data), e.bytes);
      }
      loaded_ = true;
    }
    std::string reason;
    if (!io_.pass(fds_, true, &reason)) {
      if (!stop_.load()) fail("connection lost: " + reason);
      return false;
    }
    if (!io_.done()) return true;
    loaded_ = false;
    publishAndWake(&written_, ++w, &rankSleeping_);
  }
  return true;
}

bool SocketSendQueue::tryPush(std::vector<pollfd>* waitOn) {
  if (!wireMutex_.try_lock()) return false;
  const bool ok = pushLocked();
  if (ok && waitOn) io_.pollSet(fds_, true, waitOn);
  wireMutex_.unlock();
  return ok;
}

void SocketSendQueue::askHelp() {
  if (!helper_.joinable()) {
    const uint32_t seen = helpAsked_.load();
    helper_ = std::thread([this, seen] { helperLoop(seen); });
  }
  publishAndWake(&helpAsked_, helpAsked_.load() + 1, &helperSleeping_);
}

// The helper sleeps until asked, then moves frames while the sockets take them, sleeping in poll()
// while they are full, until nothing posted is left.
void SocketSendQueue::helperLoop(uint32_t seen) {
  std::vector<pollfd> pfds;
  for (;;) {
    while (helpAsked_.load() == seen) {
      if (stop_.load()) return;
      helperSleeping_.store(1);
      if (helpAsked_.load() == seen && !stop_.load()) futexWait(&helpAsked_, seen, 100);
      helperSleeping_.store(0);
    }
    seen = helpAsked_.load();
    for (;;) {
      pfds.clear();
      {
        std::lock_guard<std::mutex> g(wireMutex_);
        if (!pushLocked()) return;
        if (written_.load() == postedShared_.load()) break;
        io_.pollSet(fds_, true, &pfds);
      }
      if (stop_.load()) return;
      // Nothing to wait for: a frame was posted after the push looked (poll on no socket would sleep the
      // whole 100 ms: 100-200 ms stalls of a 16 MB broadcast along 4 hosts).
      if (pfds.empty()) continue;
      ::poll(pfds.data(), pfds.size(), 100);
    }
  }
}

void SocketSendQueue::enqueue(const void* data, size_t bytes, uint64_t signature) {
  entries_[posted_ % entries_.size()] = Entry{data, bytes, signature};
  postedShared_.store(++posted_, std::memory_order_release);
  // The rank writes its own frame when no one else is writing: a small message leaves in this one
  // system call.  What does not fit now goes to the helper.
  const bool pending = !tryPush(nullptr) || written_.load() != posted_;
  if (pending && !failed_.load()) askHelp();
}

loomResult_t SocketSendQueue::acquire(void** slot, const WaitContext& ctx) {
  LOOM_CHECK(drive([&] { return hasFree(); }, ctx));
  *slot = slots_[posted_ % slots_.size()].data();
  return loomSuccess;
}

bool SocketSendQueue::tryAcquire(void** slot) {
  if (!hasFree()) tryPush(nullptr);  // the caller moves its own frames when it waits for a slot
  if (!hasFree()) return false;
  *slot = slots_[posted_ % slots_.size()].data();
  return true;
}

void SocketSendQueue::post(size_t bytes, uint64_t signature) {
  enqueue(slots_[posted_ % slots_.size()].data(), bytes, signature);
}

void SocketSendQueue::postFrom(const void* src, size_t bytes, uint64_t signature, Landing) {
  enqueue(src, bytes, signature);
}

loomResult_t SocketSendQueue::flush(const WaitContext& ctx) {
  return drive([&] { return written_.load() == posted_; }, ctx);
}

bool SocketSendQueue::pollSet(std::vector<pollfd>* fds) {
  if (written_.load() == posted_ || failed_.load()) return true;  // nothing left to move
  const size_t had = fds->size();
  const uint32_t before = written_.load();
  // False when the helper is writing: its progress shows on no socket of ours.
  if (!tryPush(fds)) return false;
  if (written_.load() == before) return true;
  fds->resize(had);  // a frame that left just now freed a slot: the caller has work at once, no sleep is complete
  return false;
}

// A rank waiting on its own frames moves them itself, sleeping in poll() until the sockets take more,
// instead of handing them to the helper and sleeping until it reports (a thread hand-over costs tens of
// microseconds here).  The helper may be moving them at the same time: whoever holds the wire writes.
template <typename Done>
loomResult_t SocketSendQueue::drive(Done done, const WaitContext& ctx) {
  std::vector<pollfd> pfds;
  LOOM_CHECK(waitWith(
      [&] {
        if (done() || failed_.load()) return true;
        tryPush(nullptr);
        return done() || failed_.load();
      },
      [&](int ms) {
        pfds.clear();
        rankSleeping_.store(1);
        const uint32_t seen = written_.load();
        tryPush(&pfds);
        if (!done() && !failed_.load()) {
          // Nothing of ours to poll: the helper holds the wire, so sleep until it reports.
          if (pfds.empty()) futexWait(&written_, seen, ms);
          else ::poll(pfds.data(), pfds.size(), ms);
        }
        rankSleeping_.store(0);
      },
      ctx, streamOr(ctx, Producer::kPeer)));
  if (!done()) return netFailure(ctx, peer_, "send to", why());
  return loomSuccess;
}

// ---- The receiving end ----

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

// A connection carries frames one way only, so its ACKs can never ride on data going back: the kernel
// sends each as a packet of its own, and on a small message it sends one at once (its quick-ACK mode).
// Leaving quick-ACK mode after each small frame lets it ACK every other one instead (tcpdump /
// nstat, 8-byte allreduce across 2 hosts: 4 -> 3 segments per call and host), which also spares the
// sender's core the path of each ACK through veth and bridge: medians of 4-6 alternating runs of 3000
// calls, 14-15 -> 12 us (OpenMPI, whose one connection per pair carries its ACKs on data, 11-13 us).
// The setting does not stay (tcp(7)), hence once per frame.  Large frames keep the kernel's choice:
// after one of them the ACK must not wait for a timer (2-host alltoall 1-16 MB was 10-20% slower).
void SocketRecvQueue::delayAcks() {
  int zero = 0;
  setsockopt(fds_[0], IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof zero);
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
        inCaller_ = into_ != nullptr && head_.header.bytes <= intoCapacity_;
        inlined_ = head_.header.bytes <= kInlineBytes;
        if (inlined_) {  // the whole message came with its head
          delayAcks();
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
        if (!io_.pass(fds_, false, &failure_)) return false;
        if (!io_.done()) return true;
        state_ = State::kMessage;
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
      ctx, streamOr(ctx, Producer::kPeer)));
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

void SocketRecvQueue::release() {
  state_ = State::kIdle;
  into_ = nullptr;  // expectInto names the destination of one frame
}

void SocketRecvQueue::expectInto(void* dst, size_t capacity) {
  into_ = dst;
  intoCapacity_ = capacity;
}

bool SocketRecvQueue::pollSet(std::vector<pollfd>* fds) {
  if (!opened_ || !failure_.empty()) return false;
  io_.pollSet(fds_, false, fds);
  return true;
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
  if (head_.header.bytes <= capacity && !inCaller_) {
    // The frame began arriving before this call (a tryWait read it into the slot).
    if (head_.header.bytes > 0) std::memcpy(dst, inlined_ ? head_.inlined : slot_.data(), head_.header.bytes);
    countSlotCopy(head_.header.bytes);
  }
  release();
  return loomSuccess;
}

}  // namespace loom
