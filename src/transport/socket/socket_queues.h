// The two ends of a socket-transport connection, driven by the ranks' own threads.
//
// Receiving: the waiting rank reads its sockets itself (no I/O thread, no hand-over between threads:
// a futex wake-up costs tens of microseconds on a VM, more than the message takes).  A message lands
// in the queue's one slot for wait() (where a reduction reads it: a cache-sized chunk), or straight in
// the caller's buffer for receiveInto() (copy collectives and receives: no copy but the kernel's).
//
// Sending: post() writes the frame to the sockets at once, from the slot or (postFrom, postDirect)
// from the caller's own buffer.  Whatever the sockets cannot take now is left to a helper thread,
// started on first need, so that a rank never blocks in a socket call: two ranks sending each other
// more than the kernel buffers hold would otherwise wait for each other forever.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/net/relay_queue.h"
#include "transport/socket/striped_io.h"
#include "transport/transport.h"

namespace loom {

constexpr uint32_t kSocketMagic = 0x4c4f4f53;  // "LOOS": the hello of every socket-transport stream

// What precedes every frame on the stream: its header and room for a small payload.  A payload of up to
// kInlineBytes rides in it, so that the receiver takes a small message in one read instead of two
// (strace of an 8-byte allreduce across 2 hosts: 2.0 -> 1.2 reads per call); a larger frame leaves the
// room unused (48 bytes more on the wire per frame).
constexpr size_t kInlineBytes = 48;
constexpr size_t kDirectPostMin = 64u << 10;  // see SocketSendQueue::directPostMin
struct SocketFrameHead {
  FrameHeader header;
  char inlined[kInlineBytes];
};
static_assert(sizeof(SocketFrameHead) == 64, "one cache line per frame head");

class SocketSendQueue : public SendQueue {
 public:
  SocketSendQueue(std::vector<int> fds, RingShape shape, int peer);
  ~SocketSendQueue() override;
  size_t slotBytes() const override { return slotBytes_; }
  void abandon() override { fail("the connection was abandoned (communicator aborted)"); }
  loomResult_t acquire(void** slot, const WaitContext& ctx) override;
  bool tryAcquire(void** slot) override;
  void post(size_t bytes, uint64_t signature) override;
  bool postsFromCaller() const override { return true; }
  // The sockets deliver in order to a receiver that reads them itself: `landing` changes nothing here.
  void postFrom(const void* src, size_t bytes, uint64_t signature, Landing landing) override;
  // A direct post is one frame of any size sent from the caller's buffer; the receiver reads it into
  // its destination with readDirect.  From 64 KB on (the threshold it shared with shm before each
  // transport had its own): with slot frames instead from one slot up, 2-host allreduce at 1 MB fell
  // from 2.0-2.5 to 1.2-2.3 GB/s.
  size_t directPostMin() const override { return kDirectPostMin; }
  void postDirect(const void* src, size_t bytes, uint64_t signature) override;
  bool directDone() override;
  loomResult_t waitDirectDone(const WaitContext& ctx) override { return flush(ctx); }
  loomResult_t flush(const WaitContext& ctx) override;
  bool needsFlush() const override { return true; }

 private:
  struct Entry {
    const void* data;
    size_t bytes;
    uint64_t signature;
    bool direct;
  };
  bool hasFree() const { return posted_ - written_.load(std::memory_order_acquire) < entries_.size(); }
  void enqueue(const void* data, size_t bytes, uint64_t signature, bool direct);
  bool pushLocked();
  void askHelp();
  template <typename Done>
  loomResult_t drive(Done done, const WaitContext& ctx);
  void helperLoop(uint32_t seen);
  void fail(const std::string& why);
  std::string why();

  std::vector<int> fds_;
  size_t slotBytes_;
  int peer_;
  std::vector<std::vector<char>> slots_;
  std::vector<Entry> entries_;
  uint32_t posted_ = 0;  // the rank's count; published as postedShared_ once the entry is filled
  std::atomic<uint32_t> postedShared_{0}, written_{0}, helpAsked_{0};
  std::atomic<uint32_t> rankSleeping_{0}, helperSleeping_{0};
  std::atomic<bool> stop_{false}, failed_{false};
  std::mutex wireMutex_;  // whoever holds it writes: the sockets, io_, loaded_ and header_
  StripedIo io_;
  bool loaded_ = false;  // io_ holds what is left of frame written_
  FrameHeader header_{};
  std::mutex errorMutex_;
  std::string error_;
  std::thread helper_;
};

class SocketRecvQueue : public RecvQueue {
 public:
  SocketRecvQueue(int listenFd, const ConnectRequest& req, uint64_t token, int nsocks, RingShape shape);
  ~SocketRecvQueue() override;
  size_t slotBytes() const override { return slot_.size(); }
  loomResult_t wait(const void** data, size_t* bytes, uint64_t* signature, const WaitContext& ctx) override;
  bool tryWait(const void** data, size_t* bytes, uint64_t* signature) override;
  void release() override;
  bool isDirect() const override;
  loomResult_t readDirect(void* dst, const WaitContext& ctx) override;
  bool receivesIntoCaller() const override { return true; }
  loomResult_t receiveInto(void* dst, size_t capacity, size_t* bytes, uint64_t* signature,
                           const WaitContext& ctx) override;

 private:
  // kIdle: between frames.  kHeader, kPayload: a frame arriving.  kMessage: a whole frame, held until
  // release().  kDirect: a direct frame's header, its payload still in the sockets; kDirectPayload:
  // readDirect() moving it; kDirectRead: moved, held until release().
  enum class State { kIdle, kHeader, kPayload, kMessage, kDirect, kDirectPayload, kDirectRead };
  loomResult_t open(const WaitContext* ctx);
  bool advance();
  bool holding() const { return state_ == State::kMessage || state_ == State::kDirect; }
  template <typename Done>
  loomResult_t waitFor(Done done, const WaitContext& ctx);
  void take(const void** data, size_t* bytes, uint64_t* signature) const;

  int listenFd_;
  ConnectRequest req_;
  uint64_t token_;
  std::vector<int> fds_;
  bool opened_ = false;
  std::vector<char> slot_;
  StripedIo io_;
  State state_ = State::kIdle;
  SocketFrameHead head_{};  // its header's bytes without the direct flag, once the head is whole
  bool inlined_ = false;    // the payload is head_.inlined
  void* into_ = nullptr;  // receiveInto's destination while it waits
  size_t intoCapacity_ = 0;
  bool inCaller_ = false;  // the frame's payload goes (went) to into_, not the slot
  std::string failure_;    // the connection failed: every later call reports it
};

}  // namespace loom
