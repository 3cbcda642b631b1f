// The interface every transport implements (shm, socket, ucx, ib), and the description of a peer that
// transports and the selector read.
//
// A connection between two ranks is two one-way FIFOs of fixed-size slots.  The sender acquires a free
// slot, writes (or reduces) straight into it and posts it; the receiver waits for the next posted slot,
// reads (or reduces) straight from it and releases it.  Algorithms therefore never copy through an
// intermediate buffer, whatever the transport: for shm a slot is shared memory, for a network transport
// it is a buffer in this process.  Where a message is only copied (not reduced) and the wire can take bytes from
// anywhere, the slot is skipped on the way out (postFrom) and on the way in (receiveInto): zero copy.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/link_kind.h"
#include "base/wait.h"
#include "loom.h"

namespace loom {

// What each rank tells all others at init (fixed layout: it travels through the bootstrap allgather).
struct PeerInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;  // equal for ranks that share a host (same kernel boot and network namespace)
  uint64_t pidNamespace;  // inode of the pid namespace: pids are comparable only within one
  // Equal for ranks on one kernel (one boot): they share its cores, whatever namespaces they are in
  // (namespace hosts, containers on one machine).
  uint64_t machineHash;
  char hostName[64];
  int32_t cpuCount;
  int32_t reserved;
};

// Where the receiver takes a message the sender posted from its caller's memory: straight into its own
// caller's buffer (receiveInto: a copy collective, a receive) or where it lies in the slot (wait(): it
// reduces it).  A transport whose receiving thread reads ahead leaves the former in the wire until the
// receiver names its destination, so that the payload lands there and nowhere else.
enum class Landing { kCaller, kSlot };

class SendQueue {
 public:
  virtual ~SendQueue() = default;
  virtual size_t slotBytes() const = 0;
  // Waits for a free slot; *slot then points at slotBytes() writable bytes.
  virtual loomResult_t acquire(void** slot, const WaitContext& ctx) = 0;
  // The same without waiting: false when no slot is free yet.
  virtual bool tryAcquire(void** slot) = 0;
  // Hands the acquired slot, holding `bytes` bytes, to the receiver.  `signature` describes the call the
  // data belongs to (see runtime/collective.h); the receiver checks it against its own.
  virtual void post(size_t bytes, uint64_t signature) = 0;

  // Zero copy, where the transport offers it: after acquire(), instead of filling the slot and post(),
  // the message is the `bytes` (at most slotBytes()) at src, sent from where they lie.  The queue may read
  // src until flush() returns: the caller must not change it before the end of its call.  `landing` says
  // how the receiver takes it (the algorithm knows: both ends run the same step).
  virtual bool postsFromCaller() const { return false; }
  virtual void postFrom(const void* src, size_t bytes, uint64_t signature, Landing landing) {}

  // Single copy, where the transport offers it: instead of data, the acquired slot carries where `bytes`
  // bytes lie in this process, and the receiver copies them from there straight into its buffer.  The
  // source must stay untouched until directDone() says every direct post was read.  The smallest
  // message worth a direct post on this queue, the transport's own setting; 0: it offers none.
  virtual size_t directPostMin() const { return 0; }
  // GPUDirect RDMA: whether postDirect may name these bytes of device memory (the NIC reads them where
  // they lie), registering them with the NIC if that was not done yet.  The transport only offers it;
  // whether a call uses it is the topology's decision (device/gdr_path.h).
  virtual bool canPostDirectFrom(const void* device, size_t bytes) { return false; }
  virtual void postDirect(const void* src, size_t bytes, uint64_t signature) {}
  virtual bool directDone() { return true; }
  virtual loomResult_t waitDirectDone(const WaitContext& ctx) { return loomSuccess; }

  // Waits until every posted slot has left this process (a transport that sends from a thread); after
  // it, the data survives this process exiting.  Shared memory has nothing to wait for.
  virtual loomResult_t flush(const WaitContext& ctx) { return loomSuccess; }
  virtual bool needsFlush() const { return false; }
  // The communicator was aborted (or failed): what has not left yet is dropped, so that destroying the
  // queue does not wait for a peer that may never read it (a destroyed queue otherwise sends what was
  // posted first, bounded by LOOM_TIMEOUT).
  virtual void abandon() {}
  // Who moves the data: the peer rank itself (shm), or a thread of this process (network queues), which
  // a waiter must leave a core to (base/wait.h).
  virtual Producer producer() const { return Producer::kPeer; }
  // Waiting on many queues at once (algos/p2p.cc): appends the descriptors whose readiness lets this
  // queue move, so that the waiter sleeps in poll() and the data itself wakes it.  True when all of the
  // queue's progress shows there; false when some of it does not (a futex word, a thread of its own),
  // and the waiter then sleeps in short steps.
  virtual bool pollSet(std::vector<pollfd>* fds) { return false; }
  // True once the receiving end went away (its rank destroyed or aborted the communicator); transports
  // that see this as a closed connection anyway leave it false.  Read by the waits' liveness probe.
  virtual bool peerClosed() const { return false; }
};

class RecvQueue {
 public:
  virtual ~RecvQueue() = default;
  virtual size_t slotBytes() const = 0;
  // Waits for the next posted slot.
  virtual loomResult_t wait(const void** data, size_t* bytes, uint64_t* signature, const WaitContext& ctx) = 0;
  // The same without waiting: false when nothing was posted yet.
  virtual bool tryWait(const void** data, size_t* bytes, uint64_t* signature) = 0;
  // Gives the slot returned by the last wait() back to the sender.
  virtual void release() = 0;

  // Zero copy, where the transport offers it: waits for the next message and receives it straight into
  // dst, taking it (no release() follows).  A message larger than `capacity` is not written there: its
  // size in *bytes tells the caller, who refuses it.
  virtual bool receivesIntoCaller() const { return false; }
  virtual loomResult_t receiveInto(void* dst, size_t capacity, size_t* bytes, uint64_t* signature,
                                   const WaitContext& ctx) {
    return loomInternalError;
  }

  // The same without blocking, for callers that poll many queues (tryWait's zero-copy twin): names dst
  // as where the next message should land, and says whether it has (the queue may also deliver it to a
  // slot, when it arrived first: tryWait then returns it with landedInCaller() false).
  virtual void expectInto(void* dst, size_t capacity) {}
  virtual bool landedInCaller() const { return false; }

  // True once the sending end went away (see SendQueue::peerClosed).
  virtual bool peerClosed() const { return false; }
  virtual Producer producer() const { return Producer::kPeer; }  // as SendQueue::producer
  virtual bool pollSet(std::vector<pollfd>* fds) { return false; }  // as SendQueue::pollSet
  // Whether the slot returned by the last wait() is a direct post (its data pointer is then null) and,
  // if so, copies its `bytes` from the sender's memory to dst (device memory too, where the sender's
  // queue posts from device memory), before release().
  virtual bool isDirect() const { return false; }
  virtual loomResult_t readDirect(void* dst, const WaitContext& ctx) { return loomInternalError; }
  // GPUDirect RDMA: whether readDirect may write these bytes of device memory (as canPostDirectFrom).
  virtual bool canReadDirectInto(void* device, size_t bytes) { return false; }
};

// Bytes copied between a caller's buffer and a slot (the copies that zero copy avoids), by the
// algorithms and the transports of this process: tests count them per byte sent.
std::atomic<uint64_t>& slotCopyBytes();
inline void countSlotCopy(size_t bytes) { slotCopyBytes().fetch_add(bytes, std::memory_order_relaxed); }

// What a transport promises for a pair of ranks; the selector takes the best estimate.
struct TransportEstimate {
  double bandwidthGBs = 0;  // per direction
  double latencyUs = 0;     // one slot hand-over
};

// Opaque bytes a rank sends its peer during connection setup (segment names, addresses, keys).
struct ConnectInfo {
  char bytes[256];
};

struct ConnectRequest {
  int self = 0, peer = 0, channel = 0;
  uint64_t commKey = 0;  // unique per communicator: names shared resources
  const PeerInfo* selfInfo = nullptr;
  const PeerInfo* peerInfo = nullptr;
};

// The kinds of memory a transport moves (bits).
enum MemoryKinds : unsigned { kHostMemory = 1u, kDeviceMemory = 2u };

// What a transport can do, as a type: the runtime selects by these and by the estimates, never by name.
struct TransportCaps {
  LinkKind link;                 // the kind of link it makes, as the topology names it (topo/decisions.h)
  unsigned memory = kHostMemory;  // MemoryKinds its data may live in
  bool queues = true;            // offers the two-way FIFOs below (createRecv / connectSend)
  bool sendsFromThread = false;  // a thread of this process sends what is posted: calls end with flush()
  bool zeroCopy = false;         // its queues can post from and receive into the caller's memory
  bool mapsPeerMemory = false;   // maps a peer's buffers into this process (one-sided: transport/p2p)
  size_t directPostMin = 0;      // a message this large goes as a direct post where the peer allows (0: none)
  size_t slotBytes = 0;          // the slot of its queues: the largest piece one step moves over it
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual TransportCaps caps() const = 0;
  // Whether this transport links the two ranks, with its estimate, and why (or why not).
  virtual bool reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est,
                       std::string* reason) const = 0;
  // Connection setup in two phases, so that a rank can connect to many peers at once without deadlock:
  // createRecv() makes this rank's receiving side and describes it in *info (sent to the peer);
  // connectSend() attaches to the peer's receiving side from the peer's info.  Only where caps().queues.
  virtual loomResult_t createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) = 0;
  virtual loomResult_t connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                                   std::unique_ptr<SendQueue>* send) = 0;
};

}  // namespace loom
