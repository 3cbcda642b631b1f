#include <poll.h>
#include <sys/socket.h>

#include "base/params.h"
#include "base/socket.h"
#include "base/wait.h"
#include "transport/socket/socket_queues.h"

namespace loom {

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
      header_ = FrameHeader{e.bytes | (e.direct ? kDirectFrame : 0), e.signature};
      io_.clear();
      // Header and payload in one system call; a small payload in the frame head's room (SocketFrameHead),
      // a large one after it (the room left as it is: the receiver ignores it).
      io_.add(0, &header_, sizeof header_);
      static char room[kInlineBytes];
      if (!e.direct && e.bytes <= kInlineBytes) {
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

void SocketSendQueue::enqueue(const void* data, size_t bytes, uint64_t signature, bool direct) {
  entries_[posted_ % entries_.size()] = Entry{data, bytes, signature, direct};
  postedShared_.store(++posted_, std::memory_order_release);
  // The rank writes its own frame when no one else is writing: a small message leaves in this one
  // system call.  What does not fit now goes to the helper.
  bool pending = true;
  if (wireMutex_.try_lock()) {
    pending = pushLocked() && written_.load() != posted_;
    wireMutex_.unlock();
  }
  if (pending && !failed_.load()) askHelp();
}

loomResult_t SocketSendQueue::acquire(void** slot, const WaitContext& ctx) {
  LOOM_CHECK(drive([&] { return hasFree(); }, ctx));
  *slot = slots_[posted_ % slots_.size()].data();
  return loomSuccess;
}

bool SocketSendQueue::tryAcquire(void** slot) {
  if (!hasFree()) return false;
  *slot = slots_[posted_ % slots_.size()].data();
  return true;
}

void SocketSendQueue::post(size_t bytes, uint64_t signature) {
  enqueue(slots_[posted_ % slots_.size()].data(), bytes, signature, false);
}

void SocketSendQueue::postFrom(const void* src, size_t bytes, uint64_t signature, Landing) {
  enqueue(src, bytes, signature, false);
}

void SocketSendQueue::postDirect(const void* src, size_t bytes, uint64_t signature) {
  enqueue(src, bytes, signature, true);
}

bool SocketSendQueue::directDone() { return written_.load() == posted_ || failed_.load(); }

loomResult_t SocketSendQueue::flush(const WaitContext& ctx) {
  return drive([&] { return written_.load() == posted_; }, ctx);
}

// A rank waiting on its own frames moves them itself, sleeping in poll() until the sockets take more,
// instead of handing them to the helper and sleeping until it reports (a thread hand-over costs tens of
// microseconds here).  The helper may be moving them at the same time: whoever holds the wire writes.
template <typename Done>
loomResult_t SocketSendQueue::drive(Done done, const WaitContext& ctx) {
  std::vector<pollfd> pfds;
  auto push = [&](bool collectPoll) {
    if (!wireMutex_.try_lock()) return;
    if (pushLocked() && collectPoll) io_.pollSet(fds_, true, &pfds);
    wireMutex_.unlock();
  };
  LOOM_CHECK(waitWith(
      [&] {
        if (done() || failed_.load()) return true;
        push(false);
        return done() || failed_.load();
      },
      [&](int ms) {
        pfds.clear();
        rankSleeping_.store(1);
        const uint32_t seen = written_.load();
        push(true);
        if (!done() && !failed_.load()) {
          // Nothing of ours to poll: the helper holds the wire, so sleep until it reports.
          if (pfds.empty()) futexWait(&written_, seen, ms);
          else ::poll(pfds.data(), pfds.size(), ms);
        }
        rankSleeping_.store(0);
      },
      ctx, Producer::kPeer));
  if (!done()) return netFailure(ctx, peer_, "send to", why());
  return loomSuccess;
}

}  // namespace loom
