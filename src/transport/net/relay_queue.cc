#include "transport/net/relay_queue.h"

#include <chrono>
#include <cstring>

#include "base/error.h"
#include "base/params.h"
#include "base/wait.h"

namespace loom {

// State shared by a queue and its I/O thread.  `produced` counts slots the producer side filled (the
// rank for a send queue, the thread for a receive queue), `consumed` those the other side emptied.
struct RelayRing {
  std::vector<void*> slots;
  std::vector<std::vector<char>> owned;  // storage for the slots the wire did not provide
  size_t slotBytes;
  std::vector<size_t> bytes;
  std::vector<uint64_t> signatures;
  std::vector<char> direct;  // per slot: it holds a DirectRef
  // Sending side, per slot: the caller's memory the frame is sent from (postFrom; null: the slot) and
  // whether it lands in the receiver's caller buffer.  Receiving side: whether the payload went
  // straight to the buffer the rank named (receiveInto) instead of the slot.
  std::vector<const void*> source;
  std::vector<char> inCaller;
  // Receiving side: the rank is ready for frame number intoAsked (counted from 1), to be received into
  // intoDst (intoCapacity bytes; null: its slot).  intoBusy: the I/O thread is writing into intoDst.
  void* intoDst = nullptr;
  size_t intoCapacity = 0;
  std::atomic<uint32_t> intoAsked{0};
  std::atomic<bool> intoBusy{false};
  std::atomic<uint32_t> threadAwaits{0};  // the I/O thread waits in RecvWire::awaitRank
  // Receiving side: the rank asks the I/O thread to read a direct frame (readsAsked), and waits until
  // it has (readsServed).
  DirectRef readRef{};
  void* readDst = nullptr;
  std::atomic<uint32_t> readsAsked{0}, readsServed{0};
  std::atomic<uint32_t> produced{0}, consumed{0};
  std::atomic<uint32_t> rankSleeping{0}, threadSleeping{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::mutex errorMutex;
  std::string error;

  RelayRing(size_t n, size_t slotSize, const std::function<void*(size_t)>& provided)
      : slots(n), owned(n), slotBytes(slotSize), bytes(n, 0), signatures(n, 0), direct(n, 0), source(n, nullptr),
        inCaller(n, 0) {
    for (size_t i = 0; i < n; ++i) {
      slots[i] = provided(i);
      if (slots[i] == nullptr) {
        owned[i].resize(slotSize);
        slots[i] = owned[i].data();
      }
    }
  }
  size_t size() const { return slots.size(); }
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
  // The I/O thread waits on a counter in 100 ms slices so that `stop` is seen.
  template <typename Ready>
  bool threadWait(std::atomic<uint32_t>* word, Ready ready) {
    while (!ready()) {
      if (stop.load()) return false;
      threadSleeping.store(1);
      uint32_t seen = word->load();
      if (!ready() && !stop.load()) futexWait(word, seen, 100);
      threadSleeping.store(0);
    }
    return true;
  }
};

bool frameFits(const FrameHeader& h, size_t capacity, std::string* why) {
  if (h.bytes <= capacity) return true;
  *why = "the peer sent a frame of " + std::to_string(h.bytes) + " bytes, larger than a slot";
  return false;
}

RingShape netRingShape() {
  return RingShape{static_cast<size_t>(params().NET_NSLOTS), static_cast<size_t>(params().NET_SLOT_SIZE)};
}

std::string explainNetFailure(const WaitContext& ctx, int peer, const char* direction, const std::string& why) {
  // A rank that stops because of an earlier failure announces it before its connections close, so the
  // announcement is at our listener, or a network round trip away, by the time we see the close: a few
  // looks over ~15 ms find it.  (Looking for 200 ms made every survivor of a death across hosts report
  // it 0.1-0.2 s late: the dead rank itself announces nothing.)
  if (ctx.probe != nullptr) {
    for (int i = 0; i < 4; ++i) {
      std::string gone = ctx.probe(ctx.probeArg, peer);
      if (!gone.empty()) return gone;
      if (i < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return std::string(direction) + " rank " + std::to_string(peer) + ": " + why;
}

loomResult_t netFailure(const WaitContext& ctx, int peer, const char* direction, const std::string& why) {
  setError(loomRemoteError, "%s", explainNetFailure(ctx, peer, direction, why).c_str());
  setLastErrorPeer(peer);
  return loomRemoteError;
}

// ---- sending side ----

RelaySendQueue::RelaySendQueue(std::unique_ptr<SendWire> wire, RingShape shape, int peer)
    : wire_(std::move(wire)),
      ring_(std::make_unique<RelayRing>(shape.nslots, shape.slotBytes,
                                         [this](size_t i) { return wire_->slotMemory(i); })),
      peer_(peer),
      thread_([this] { run(); }) {}

void RelaySendQueue::abandon() { ring_->fail("the connection was abandoned (communicator aborted)"); }

RelaySendQueue::~RelaySendQueue() {
  // A collective ends once its last slot is posted; the thread may still be sending it.  Let it finish
  // (bounded by LOOM_TIMEOUT, and over at once if the connection failed) before stopping it.
  RelayRing& r = *ring_;
  const Deadline flushBy = Deadline::afterSeconds(static_cast<double>(params().TIMEOUT));
  while (r.consumed.load() != posted_ && !r.failed.load() && !flushBy.expired()) {
    r.rankSleeping.store(1);
    uint32_t seen = r.consumed.load();
    if (seen != posted_ && !r.failed.load()) futexWait(&r.consumed, seen, 100);
    r.rankSleeping.store(0);
  }
  r.stop.store(true);
  publishAndWake(&r.produced, r.produced.load(), &r.threadSleeping);
  wire_->shutdown();
  thread_.join();
}

size_t RelaySendQueue::slotBytes() const { return ring_->slotBytes; }

bool RelaySendQueue::hasFree() const {
  return posted_ - ring_->consumed.load(std::memory_order_acquire) < ring_->size();
}

loomResult_t RelaySendQueue::acquire(void** slot, const WaitContext& ctx) {
  RelayRing& r = *ring_;
  LOOM_CHECK(waitUntil([&] { return hasFree() || r.failed.load(); }, &r.consumed, &r.rankSleeping, ctx, producer()));
  if (!hasFree()) return netFailure(ctx, peer_, "send to", r.why());
  *slot = r.slots[posted_ % r.size()];
  return loomSuccess;
}

bool RelaySendQueue::tryAcquire(void** slot) {
  if (!hasFree()) return false;
  *slot = ring_->slots[posted_ % ring_->size()];
  return true;
}

// Describes the next ring entry and hands it to the I/O thread.
void RelaySendQueue::publish(size_t bytes, uint64_t signature, bool direct, const void* source, bool inCaller) {
  RelayRing& r = *ring_;
  const size_t i = posted_ % r.size();
  r.bytes[i] = bytes;
  r.signatures[i] = signature;
  r.direct[i] = direct;
  r.source[i] = source;
  r.inCaller[i] = inCaller;
  publishAndWake(&r.produced, ++posted_, &r.threadSleeping);
}

void RelaySendQueue::post(size_t bytes, uint64_t signature) { publish(bytes, signature, false, nullptr, false); }

void RelaySendQueue::postFrom(const void* src, size_t bytes, uint64_t signature, Landing landing) {
  publish(bytes, signature, false, src, landing == Landing::kCaller);
}

void RelaySendQueue::postDirect(const void* src, size_t bytes, uint64_t signature) {
  DirectRef ref{};
  std::string why;
  if (!wire_->offerDirect(src, bytes, &ref, &why)) {
    directError_ = why;  // nothing posted: waitDirectDone reports it
    return;
  }
  std::memcpy(ring_->slots[posted_ % ring_->size()], &ref, sizeof ref);
  publish(sizeof ref, signature, true, nullptr, false);
}

bool RelaySendQueue::directDone() {
  return !directError_.empty() || ring_->consumed.load() == posted_ || ring_->failed.load();
}

loomResult_t RelaySendQueue::waitDirectDone(const WaitContext& ctx) {
  if (!directError_.empty()) {
    const std::string why = directError_;
    directError_.clear();
    return setError(loomSystemError, "direct send to rank %d: %s", peer_, why.c_str());
  }
  return flush(ctx);
}

loomResult_t RelaySendQueue::flush(const WaitContext& ctx) {
  RelayRing& r = *ring_;
  LOOM_CHECK(waitUntil([&] { return r.consumed.load() == posted_ || r.failed.load(); }, &r.consumed,
                       &r.rankSleeping, ctx, producer()));
  if (r.consumed.load() != posted_)
    return netFailure(ctx, peer_, "send to", r.why());
  return loomSuccess;
}

void RelaySendQueue::run() {
  RelayRing& r = *ring_;
  uint32_t sent = 0;
  std::vector<Frame> frames;
  std::string why;
  for (;;) {
    if (!r.threadWait(&r.produced, [&] { return r.produced.load() != sent; })) {
      if (!r.failed.load() && r.produced.load() == sent) wire_->finish();
      return;
    }
    // Everything posted so far goes to the wire at once: one system call (or one doorbell) for many slots.
    const uint32_t batch = r.produced.load() - sent;
    frames.clear();
    for (uint32_t k = 0; k < batch; ++k) {
      const size_t i = (sent + k) % r.size();
      void* data = r.source[i] != nullptr ? const_cast<void*>(r.source[i]) : r.slots[i];
      frames.push_back(Frame{data, r.bytes[i], r.signatures[i], i, r.direct[i] != 0, r.inCaller[i] != 0});
    }
    if (!wire_->send(frames.data(), frames.size(), r.stop, &why)) {
      if (!r.stop.load()) r.fail("connection lost: " + why);
      return;
    }
    sent += batch;
    bool direct = false;
    for (const Frame& f : frames) direct |= wire_->peerReadsLater(f);
    if (direct) {
      // A direct frame's bytes are the rank's own buffer: it is free again once the peer has read them.
      if (!wire_->awaitReleased(r.stop, &why)) {
        if (!r.stop.load()) r.fail("connection lost: " + why);
        return;
      }
      publishAndWake(&r.consumed, sent, &r.rankSleeping);
      continue;
    }
    if (r.produced.load() == sent) {
      // Idle: drain before the last slot counts as consumed, since flush() waits for exactly that.
      // The batch's other slots are free for the rank meanwhile.
      publishAndWake(&r.consumed, sent - 1, &r.rankSleeping);
      if (!wire_->drain(r.stop, &why)) {
        if (!r.stop.load()) r.fail("connection lost: " + why);
        return;
      }
    }
    publishAndWake(&r.consumed, sent, &r.rankSleeping);
  }
}

// ---- receiving side ----

RelayRecvQueue::RelayRecvQueue(std::unique_ptr<RecvWire> wire, RingShape shape, int peer)
    : wire_(std::move(wire)),
      ring_(std::make_unique<RelayRing>(shape.nslots, shape.slotBytes,
                                         [this](size_t i) { return wire_->slotMemory(i); })),
      peer_(peer),
      thread_([this] { run(); }) {}

RelayRecvQueue::~RelayRecvQueue() {
  RelayRing& r = *ring_;
  r.stop.store(true);
  publishAndWake(&r.consumed, r.consumed.load(), &r.threadSleeping);
  wire_->shutdown();
  thread_.join();
}

size_t RelayRecvQueue::slotBytes() const { return ring_->slotBytes; }

bool RelayRecvQueue::ready() const { return ring_->produced.load(std::memory_order_acquire) != released_; }

void RelayRecvQueue::take(const void** data, size_t* bytes, uint64_t* signature) {
  const size_t i = released_ % ring_->size();
  *data = ring_->slots[i];
  *bytes = ring_->bytes[i];
  *signature = ring_->signatures[i];
  if (ring_->direct[i]) {
    DirectRef ref;
    std::memcpy(&ref, ring_->slots[i], sizeof ref);
    *data = nullptr;
    *bytes = ref.bytes;
  }
}

bool RelayRecvQueue::landedInCaller() const { return ring_->inCaller[released_ % ring_->size()] != 0; }

bool RelayRecvQueue::isDirect() const { return ring_->direct[released_ % ring_->size()] != 0; }

loomResult_t RelayRecvQueue::readDirect(void* dst, const WaitContext& ctx) {
  RelayRing& r = *ring_;
  std::memcpy(&r.readRef, r.slots[released_ % r.size()], sizeof r.readRef);
  r.readDst = dst;
  const uint32_t ticket = r.readsAsked.load() + 1;
  r.readsAsked.store(ticket);
  publishAndWake(&r.consumed, r.consumed.load(), &r.threadSleeping);  // the I/O thread may sleep on it
  LOOM_CHECK(waitUntil([&] { return r.readsServed.load() == ticket || r.failed.load(); }, &r.readsServed,
                       &r.rankSleeping, ctx, producer()));
  if (r.readsServed.load() != ticket) return netFailure(ctx, peer_, "receive from", r.why());
  return loomSuccess;
}

bool RelayRecvQueue::serveRead(const std::function<void()>& grantFreed, std::string* why) {
  RelayRing& r = *ring_;
  const uint32_t asked = r.readsAsked.load();
  if (asked == r.readsServed.load() || r.failed.load()) return true;  // nothing asked, or no use trying
  if (!wire_->readDirect(r.readRef, r.readDst, grantFreed, r.stop, why)) return false;
  publishAndWake(&r.readsServed, asked, &r.rankSleeping);
  return true;
}

// The rank is ready for its next frame, into dst (null: the slot).  A frame the sender marked as
// landing in the caller's buffer waits in the wire for this.
void RelayRecvQueue::askFor(void* dst, size_t capacity) {
  RelayRing& r = *ring_;
  const bool askedAlready = r.intoAsked.load(std::memory_order_relaxed) == released_ + 1;
  if (!wire_->readsHeaderFirst() || askedAlready) return;
  r.intoDst = dst;
  r.intoCapacity = capacity;
  r.intoAsked.store(released_ + 1);
  publishAndWake(&r.consumed, r.consumed.load(), &r.threadSleeping);  // the I/O thread may sleep on it
  if (r.threadAwaits.load() != 0) wire_->interrupt();                 // or wait in the wire
}

loomResult_t RelayRecvQueue::receiveInto(void* dst, size_t capacity, size_t* bytes, uint64_t* signature,
                                          const WaitContext& ctx) {
  RelayRing& r = *ring_;
  askFor(dst, capacity);
  loomResult_t res =
      waitUntil([&] { return ready() || r.failed.load(); }, &r.produced, &r.rankSleeping, ctx, producer());
  if (res == loomSuccess && !ready()) res = netFailure(ctx, peer_, "receive from", r.why());
  if (res != loomSuccess) {
    // The I/O thread may be writing into dst: stop it before the caller gets its buffer back.
    r.fail("a receive was interrupted");
    r.stop.store(true);
    wire_->shutdown();
    const Deadline by = Deadline::afterSeconds(5);
    while (r.intoBusy.load() && !by.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return res;
  }
  const void* data;
  take(&data, bytes, signature);
  const size_t i = released_ % r.size();
  if (*bytes <= capacity) {
    if (r.direct[i]) {
      LOOM_CHECK(readDirect(dst, ctx));
    } else if (!r.inCaller[i]) {  // it arrived before this call asked for it
      if (*bytes > 0) std::memcpy(dst, data, *bytes);
      countSlotCopy(*bytes);
    }
  }
  release();
  return loomSuccess;
}

loomResult_t RelayRecvQueue::wait(const void** data, size_t* bytes, uint64_t* signature, const WaitContext& ctx) {
  RelayRing& r = *ring_;
  askFor(nullptr, 0);
  LOOM_CHECK(waitUntil([&] { return ready() || r.failed.load(); }, &r.produced, &r.rankSleeping, ctx, producer()));
  if (!ready())
    return netFailure(ctx, peer_, "receive from", r.why());
  take(data, bytes, signature);
  return loomSuccess;
}

bool RelayRecvQueue::tryWait(const void** data, size_t* bytes, uint64_t* signature) {
  askFor(nullptr, 0);  // unless expectInto() named a buffer for this frame
  if (!ready()) return false;
  take(data, bytes, signature);
  return true;
}

void RelayRecvQueue::release() { publishAndWake(&ring_->consumed, ++released_, &ring_->threadSleeping); }

void RelayRecvQueue::run() {
  RelayRing& r = *ring_;
  std::string why;
  if (!wire_->open(r.stop, &why)) {
    if (!r.stop.load()) r.fail(why);
    return;
  }
  uint32_t filled = 0, granted = 0;
  // Every slot the rank emptied is offered to the peer, before and while we wait for the next frame.
  const std::function<void()> grantFreed = [&] {
    for (const uint32_t free = r.consumed.load() + static_cast<uint32_t>(r.size()); granted != free; ++granted)
      wire_->grant(granted % r.size());
  };
  // While waiting for the next frame: grants, and the direct read the rank asked for (it holds the
  // frame before this one).  A failed read fails the queue; the rank sees it.
  const std::function<void()> between = [&] {
    grantFreed();
    std::string readWhy;
    if (!serveRead(grantFreed, &readWhy) && !r.stop.load()) r.fail("direct read: " + readWhy);
  };
  const auto readAsked = [&] { return r.readsAsked.load() != r.readsServed.load(); };
  for (;;) {
    if (!r.threadWait(&r.consumed, [&] { return filled - r.consumed.load() < r.size() || readAsked(); })) return;
    between();
    if (r.failed.load()) return;
    if (filled - r.consumed.load() >= r.size()) continue;  // woken for a read only
    const size_t i = filled % r.size();
    size_t bytes = 0;
    uint64_t signature = 0;
    if (!receiveFrame(i, filled + 1, between, &bytes, &signature, &why)) {
      if (!r.stop.load()) r.fail(why);
      return;
    }
    const bool direct = (bytes & kDirectFrame) != 0;
    bytes &= ~kDirectFrame;
    const bool malformed = direct && bytes != sizeof(DirectRef);
    if (malformed) why = "the peer sent a malformed direct frame";
    if (malformed || (!r.inCaller[i] && !frameFits(FrameHeader{bytes, signature}, r.slotBytes, &why))) {
      r.fail(why);
      return;
    }
    r.direct[i] = direct;
    r.bytes[i] = bytes;
    r.signatures[i] = signature;
    publishAndWake(&r.produced, ++filled, &r.rankSleeping);
  }
}

// Receives frame `number` (counted from 1) into slot i, or its payload straight into the buffer the
// rank named, when the sender marked it so and the wire reads headers first.
bool RelayRecvQueue::receiveFrame(size_t i, uint32_t number, const std::function<void()>& between, size_t* bytes,
                                   uint64_t* signature, std::string* why) {
  RelayRing& r = *ring_;
  r.inCaller[i] = 0;
  if (!wire_->readsHeaderFirst())
    return wire_->receive(i, r.slots[i], r.slotBytes, bytes, signature, between, r.stop, why);
  FrameHeader h{};
  if (!wire_->receiveHeader(&h, r.stop, why)) return false;
  const uint64_t size = h.bytes & ~(kDirectFrame | kLandsInCallerFrame);
  void* dst = r.slots[i];
  if ((h.bytes & kLandsInCallerFrame) != 0 && (h.bytes & kDirectFrame) == 0) {
    // Wait for the rank to name its buffer, keeping the wire moving (serving the rank's direct reads
    // meanwhile: they come first).
    for (;;) {
      between();
      if (r.intoAsked.load() == number || r.failed.load()) break;
      if (r.stop.load()) return *why = "stopped", false;
      r.threadAwaits.store(1);
      if (r.intoAsked.load() != number && r.readsAsked.load() == r.readsServed.load()) wire_->awaitRank(100);
      r.threadAwaits.store(0);
    }
    if (r.intoDst != nullptr && size <= r.intoCapacity) {
      dst = r.intoDst;
      r.inCaller[i] = 1;
    }
  }
  if (!r.inCaller[i] && !frameFits(FrameHeader{size, h.signature}, r.slotBytes, why)) return false;
  r.intoBusy.store(r.inCaller[i] != 0);
  const bool ok = wire_->receivePayload(dst, size, r.stop, why);
  r.intoBusy.store(false);
  *bytes = h.bytes & ~kLandsInCallerFrame;  // the direct flag stays for run() to see
  *signature = h.signature;
  return ok;
}

}  // namespace loom
