// The relay queue, the mechanism the UCX and verbs transports share (the socket transport shares its
// frames and ring shape, and moves its own frames): each end of a one-way connection keeps a ring of
// slots in its own memory, and one I/O thread per queue relays filled slots across the wire.  The
// ranks' own threads only ever touch the ring (acquire/post, wait/release) and so never block in a
// network call, and no cycle of full network buffers can deadlock a ring algorithm.
//
// A transport supplies only its wire: how a batch of frames leaves this process (SendWire) and how the
// next frame arrives into a given slot (RecvWire).  Credits, ordering, flushing, teardown, error
// reporting and the waits' bounds live here, once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/transport.h"

namespace loom {

// One slot's content as the wire sees it.
struct Frame {
  void* data;
  size_t bytes;
  uint64_t signature;
  size_t slot;  // index of the slot in the sender's ring
  bool direct = false;  // the payload is a DirectRef (see below)
  bool landsInCaller = false;  // posted from the caller's memory with Landing::kCaller (transport.h)
};

// What every wire sends ahead of a frame's payload (or, for ib, writes at the start of the slot).
struct FrameHeader {
  uint64_t bytes;  // kDirectFrame set: the payload is a DirectRef
  uint64_t signature;
};
constexpr uint64_t kDirectFrame = uint64_t{1} << 63;
// Set: the receiver copies the payload into its caller's buffer (Landing::kCaller), so a wire that
// reads headers first leaves the payload in the wire until the receiver names that buffer.
constexpr uint64_t kLandsInCallerFrame = uint64_t{1} << 62;

// A direct post on a wire that offers them (rendezvous): instead of the bytes, the frame carries where
// they lie in the sender's registered memory, and the receiver reads them from there into its buffer
// (an RDMA READ for ib; from device memory where it lies: GPUDirect RDMA).  The sender's slot counts as
// consumed only once the receiver released the frame, i.e. finished reading.
struct DirectRef {
  uint64_t address;
  uint64_t bytes;
  uint32_t key;
  uint32_t reserved;
};
// A header from the peer announcing more than a slot holds is refused, with this reason.
bool frameFits(const FrameHeader& h, size_t capacity, std::string* why);

// Ring geometry of every network connection: LOOM_NET_NSLOTS slots of LOOM_NET_SLOT_SIZE bytes.
struct RingShape {
  size_t nslots;
  size_t slotBytes;
};
RingShape netRingShape();

// Both wires are driven by their queue's I/O thread only.  `stop` is raised when the queue is destroyed;
// a wire checks it at least every 100 ms and then returns false with *why = "stopped".
class SendWire {
 public:
  virtual ~SendWire() = default;
  // Memory for slot i of the sender's ring (registered memory, for RDMA); null: the queue allocates it.
  virtual void* slotMemory(size_t index) { return nullptr; }
  // Whether a frame's data may lie anywhere in this process (Frame::data outside the slots: zero copy,
  // SendQueue::postFrom), and not only in slotMemory.
  virtual bool sendsFromCaller() const { return false; }
  // Sends frames[0..n) in order.  Returning true means the slots may be reused.
  virtual bool send(const Frame* frames, size_t n, const std::atomic<bool>& stop, std::string* why) = 0;
  // Called when everything posted was sent: returns once it has left this process, so that it survives
  // the process exiting (a kernel socket buffer has; a library's own buffers may not have).
  virtual bool drain(const std::atomic<bool>& stop, std::string* why) { return true; }
  // Called once the queue stops (before the thread exits): unblock anything in flight.
  virtual void shutdown() {}
  // Direct posts (see DirectRef), for wires that offer them from device memory.  Both run on the rank's
  // thread: offersDevice says whether these bytes can be offered (registering them), offerDirect
  // registers the bytes for the peer's read and describes them.
  virtual bool offersDevice(const void* src, size_t bytes) { return false; }
  virtual bool offerDirect(const void* src, size_t bytes, DirectRef* ref, std::string* why) {
    return *why = "this transport has no direct posts", false;
  }
  // Whether the peer reads this frame's payload from our memory after send() returned (a direct post,
  // or a caller's buffer offered for reading): its memory is free only once the peer released it.
  virtual bool peerReadsLater(const Frame& f) const { return f.direct; }
  // After a batch holding such a frame: returns once the receiver released every frame sent so far.
  virtual bool awaitReleased(const std::atomic<bool>& stop, std::string* why) { return true; }
  // Called by the I/O thread last, when the queue was destroyed with everything it posted sent: a wire
  // whose connection could drop data still in flight when it closes says goodbye first.
  virtual void finish() {}
};

class RecvWire {
 public:
  virtual ~RecvWire() = default;
  virtual void* slotMemory(size_t index) { return nullptr; }
  // Waits for the peer to connect (and checks that it is the expected peer).
  virtual bool open(const std::atomic<bool>& stop, std::string* why) { return true; }
  // Slot `index` is empty: the peer may now write into it (a credit, for transports that write remotely).
  virtual void grant(size_t index) {}
  // Receives the next frame into slot `index` (capacity `capacity`): fills *bytes and *signature.
  // A wire whose peer needs credits calls grantFreed() while it waits: it grants the slots the rank
  // emptied meanwhile (else a peer that ran out of credits would wait for us, and we for it).
  virtual bool receive(size_t index, void* slot, size_t capacity, size_t* bytes, uint64_t* signature,
                       const std::function<void()>& grantFreed, const std::atomic<bool>& stop,
                       std::string* why) = 0;
  // A wire that reads a frame's header before its payload (a stream) lets the queue choose where the
  // payload goes: receiveHeader(), then receivePayload() into the slot or straight into the rank's
  // buffer (zero copy, RecvQueue::receiveInto).  receive() is then not called.
  virtual bool readsHeaderFirst() const { return false; }
  // Whether a frame the sender posted from its caller's memory (Landing::kCaller) reaches the rank's
  // buffer with no copy by the rank: the wire reads headers first (above), or it reads direct frames
  // from the sender's memory into any host buffer (RDMA READ).
  virtual bool readsIntoCaller() const { return readsHeaderFirst(); }
  virtual bool receiveHeader(FrameHeader* h, const std::atomic<bool>& stop, std::string* why) { return false; }
  virtual bool receivePayload(void* dst, size_t bytes, const std::atomic<bool>& stop, std::string* why) {
    return false;
  }
  // While a payload waits for the rank to name its buffer, the wire must keep moving (else the peer's
  // sends, waiting on this end, could wait on this rank, which waits on them): waits at most `ms`,
  // taking in what arrives meanwhile (the wire's own buffers), and returns early on interrupt(), which
  // any thread may call.
  virtual void awaitRank(int ms) {}
  virtual void interrupt() {}
  virtual void shutdown() {}
  // Whether direct frames can be read into these bytes of device memory (registering them); on the
  // rank's thread.
  virtual bool acceptsDevice(void* dst, size_t bytes) { return false; }
  // Reads a direct frame's bytes from the sender's memory into dst (host or device memory), on the I/O
  // thread; like receive(), calls grantFreed() while it waits.
  virtual bool readDirect(const DirectRef& ref, void* dst, const std::function<void()>& grantFreed,
                          const std::atomic<bool>& stop, std::string* why) {
    return *why = "this transport has no direct posts", false;
  }
};

// A connection that failed almost always means its peer is exiting: asks the liveness probe (which also
// names every other rank already gone) before falling back to the wire's own reason.
std::string explainNetFailure(const WaitContext& ctx, int peer, const char* direction, const std::string& why);
// Records it (setError, loomRemoteError) with `peer` as the rank lost, and returns the code.
loomResult_t netFailure(const WaitContext& ctx, int peer, const char* direction, const std::string& why);

struct RelayRing;

class RelaySendQueue : public SendQueue {
 public:
  RelaySendQueue(std::unique_ptr<SendWire> wire, RingShape shape, int peer);
  ~RelaySendQueue() override;
  size_t slotBytes() const override;
  loomResult_t acquire(void** slot, const WaitContext& ctx) override;
  bool tryAcquire(void** slot) override;
  void post(size_t bytes, uint64_t signature) override;
  bool needsFlush() const override { return true; }
  Producer producer() const override { return Producer::kOwnThread; }
  bool postsFromCaller() const override { return wire_->sendsFromCaller(); }
  void postFrom(const void* src, size_t bytes, uint64_t signature, Landing landing) override;
  loomResult_t flush(const WaitContext& ctx) override;
  void abandon() override;
  bool canPostDirectFrom(const void* device, size_t bytes) override { return wire_->offersDevice(device, bytes); }
  void postDirect(const void* src, size_t bytes, uint64_t signature) override;
  bool directDone() override;
  loomResult_t waitDirectDone(const WaitContext& ctx) override;

 private:
  bool hasFree() const;
  void publish(size_t bytes, uint64_t signature, bool direct, const void* source, bool inCaller);
  void run();

  std::unique_ptr<SendWire> wire_;
  std::unique_ptr<RelayRing> ring_;
  int peer_;
  uint32_t posted_ = 0;
  std::string directError_;  // the last direct post could not be offered
  std::thread thread_;
};

class RelayRecvQueue : public RecvQueue {
 public:
  RelayRecvQueue(std::unique_ptr<RecvWire> wire, RingShape shape, int peer);
  ~RelayRecvQueue() override;
  size_t slotBytes() const override;
  loomResult_t wait(const void** data, size_t* bytes, uint64_t* signature, const WaitContext& ctx) override;
  bool tryWait(const void** data, size_t* bytes, uint64_t* signature) override;
  void release() override;
  Producer producer() const override { return Producer::kOwnThread; }
  bool isDirect() const override;
  loomResult_t readDirect(void* dst, const WaitContext& ctx) override;
  bool canReadDirectInto(void* device, size_t bytes) override { return wire_->acceptsDevice(device, bytes); }
  bool receivesIntoCaller() const override { return wire_->readsIntoCaller(); }
  loomResult_t receiveInto(void* dst, size_t capacity, size_t* bytes, uint64_t* signature,
                           const WaitContext& ctx) override;
  void expectInto(void* dst, size_t capacity) override { askFor(dst, capacity); }
  bool landedInCaller() const override;

 private:
  bool ready() const;
  void askFor(void* dst, size_t capacity);
  bool receiveFrame(size_t i, uint32_t number, const std::function<void()>& between, size_t* bytes,
                    uint64_t* signature, std::string* why);
  void take(const void** data, size_t* bytes, uint64_t* signature);
  void run();
  bool serveRead(const std::function<void()>& grantFreed, std::string* why);

  std::unique_ptr<RecvWire> wire_;
  std::unique_ptr<RelayRing> ring_;
  int peer_;
  uint32_t released_ = 0;
  std::thread thread_;
};

}  // namespace loom
