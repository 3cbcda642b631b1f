// The two ends of a socket-transport connection, driven by the ranks' own threads.
//
// Receiving: the waiting rank reads its sockets itself (no I/O thread, no hand-over between threads:
// a futex wake-up costs tens of microseconds on a VM, more than the message takes).  A message lands
// in the queue's one slot for wait() (where a reduction reads it: a cache-sized chunk), or straight in
// the caller's buffer for receiveInto() (copy collectives and receives: no copy but the kernel's).
//
// Sending: post() writes the frame to the sockets at once, from the slot or (postFrom) from the
// caller's own buffer.  Whatever the sockets cannot take now is left to a helper thread,
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
  // No direct posts: a large transfer goes as slot-sized frames from the caller's buffer, which land in
  // the receiver's (expectInto), so that one thread per rank moves both directions, alternating as the
  // sockets allow.  A direct post (one frame of the whole message) left the sending to the helper thread
  // while the rank blocked reading.  With the poll() wait of algos/p2p.cc, 2 hosts, alltoall medians of
  // 5 alternating rounds: 4 MB 1.48 -> 1.11 ms, 16 MB 7.06 -> 6.66, 64 MB 25.3 -> 23.5; 4-host broadcast
  // and 2-host allreduce unchanged within their spread.
  loomResult_t flush(const WaitContext& ctx) override;
  bool needsFlush() const override { return true; }
  bool pollSet(std::vector<pollfd>* fds) override;

 private:
  struct Entry {
    const void* data;
    size_t bytes;
    uint64_t signature;
  };
  bool hasFree() const { return posted_ - written_.load(std::memory_order_acquire) < entries_.size(); }
  void enqueue(const void* data, size_t bytes, uint64_t signature);
  bool pushLocked();
  // Whoever holds the wire writes: pushes unless another thread holds it.  False when it does or the
  // connection failed; otherwise adds to `waitOn` (when given) the sockets that the frames left wait for.
  bool tryPush(std::vector<pollfd>* waitOn);
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
  bool receivesIntoCaller() const override { return true; }
  loomResult_t receiveInto(void* dst, size_t capacity, size_t* bytes, uint64_t* signature,
                           const WaitContext& ctx) override;
  void expectInto(void* dst, size_t capacity) override;
  bool landedInCaller() const override { return inCaller_; }
  bool pollSet(std::vector<pollfd>* fds) override;

 private:
  // kIdle: between frames.  kHeader, kPayload: a frame arriving.  kMessage: a whole frame, held until
  // release().
  enum class State { kIdle, kHeader, kPayload, kMessage };
  loomResult_t open(const WaitContext* ctx);
  bool advance();
  void delayAcks();
  bool holding() const { return state_ == State::kMessage; }
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
  SocketFrameHead head_{};  // once whole: the frame's header and its inlined payload
  bool inlined_ = false;    // the payload is head_.inlined
  void* into_ = nullptr;  // where the next frame lands: receiveInto's destination, or expectInto's until release()
  size_t intoCapacity_ = 0;
  bool inCaller_ = false;  // the frame's payload goes (went) to into_, not the slot
  std::string failure_;    // the connection failed: every later call reports it
};

}  // namespace loom
