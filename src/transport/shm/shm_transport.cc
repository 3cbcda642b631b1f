#include "transport/shm/shm_transport.h"

#include <sys/uio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "base/log.h"
#include "base/params.h"
#include "transport/shm/shm_segment.h"

namespace loom {

namespace {

constexpr uint64_t kFifoMagic = 0x4f4649466d6f6f6cull;  // "loomFIFO"
constexpr size_t kLine = 64;
constexpr size_t kMaxSlots = 64;
constexpr size_t kSlotAlign = 4096;

// Layout of one FIFO.  Each cache line is written by one side only: no false sharing between sender and
// receiver.  Counters are free-running 32-bit (unsigned difference works across wrap-around).
struct FifoHeader {
  // Written by the sender.
  alignas(kLine) std::atomic<uint32_t> head;      // slots posted
  std::atomic<uint32_t> senderSleeping;           // sender waits on `tail`
  // Written by the receiver.
  alignas(kLine) std::atomic<uint32_t> tail;      // slots released
  std::atomic<uint32_t> receiverSleeping;         // receiver waits on `head`
  std::atomic<uint32_t> directReads;              // direct posts read (the sender waits on it too)
  // Raised by each end when it goes away (destroy or abort), so that the other end's waits end with an
  // error at once instead of at the timeout; the process may well live on.
  alignas(kLine) std::atomic<uint32_t> senderClosed;
  std::atomic<uint32_t> receiverClosed;
  // Written once by the creator.
  alignas(kLine) uint64_t magic;
  uint32_t nslots;
  uint32_t slotBytes;
  // Written by the sender: the byte count and call signature of each posted slot.
  struct Posted {
    uint64_t bytes;
    uint64_t signature;
    uint64_t source;  // direct post: where the bytes lie in the sender's memory; 0: they are in the slot
  };
  alignas(kLine) Posted posted[kMaxSlots];
};

// Slots start at a different offset within a page for each direction of a pair (and differ between the
// FIFO a rank reads from and the one it writes to in a ring): a kernel reducing from one slot into
// another would otherwise see every load alias a store on the low 12 address bits, which costs ~25%.
size_t slotOffset(int sender, int receiver) {
  return kSlotAlign + static_cast<size_t>((sender + 2 * receiver) % 8) * 512;
}
size_t fifoBytes(uint32_t nslots, uint32_t slotBytes) {
  static_assert(sizeof(FifoHeader) <= kSlotAlign, "FIFO header must fit its page");
  return kSlotAlign + 7 * 512 + static_cast<size_t>(nslots) * slotBytes;  // room for the largest offset
}

struct ShmConnectInfo {
  char name[96];
  uint32_t nslots;
  uint32_t slotBytes;
  uint32_t slotOffset;
  uint64_t magicAddress;  // where the receiver's mapping holds FifoHeader::magic (the single-copy probe)
};
static_assert(sizeof(ShmConnectInfo) <= sizeof(ConnectInfo), "shm connect info too large");

// The peer closed its end (destroyed or aborted its communicator) while this rank waits on it.
loomResult_t peerGone(const WaitContext& ctx, const char* side) {
  if (ctx.peer < 0)
    return setError(loomRemoteError, "%s: the %s closed its end of the shared-memory connection", ctx.what, side);
  const loomResult_t r = setError(loomRemoteError, "%s: the %s (rank %d) closed its end of the shared-memory "
                                  "connection", ctx.what, side, ctx.peer);
  setLastErrorPeer(ctx.peer);
  return r;
}

// Copies `bytes` from address `source` of process `pid` (this process: a plain copy) into dst.
loomResult_t readFromProcess(pid_t pid, uint64_t source, void* dst, size_t bytes) {
  if (pid == getpid()) {
    std::memcpy(dst, reinterpret_cast<const void*>(source), bytes);
    return loomSuccess;
  }
  size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(dst) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(source + done), bytes - done};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return setError(loomRemoteError, "shm: reading %zu bytes from process %d failed: %s", bytes, static_cast<int>(pid),
                      n < 0 ? strerror(errno) : "no progress");
    }
    done += static_cast<size_t>(n);
  }
  return loomSuccess;
}

class ShmRecvQueue : public RecvQueue {
 public:
  ShmRecvQueue(std::unique_ptr<ShmSegment> seg, size_t offset, pid_t sender, int peer)
      : seg_(std::move(seg)),
        h_(static_cast<FifoHeader*>(seg_->data())),
        slots_(static_cast<char*>(seg_->data()) + offset),
        sender_(sender),
        peer_(peer) {}

  ~ShmRecvQueue() override {
    h_->receiverClosed.store(1, std::memory_order_release);
    futexWake(&h_->tail);
    futexWake(&h_->directReads);
  }

  size_t slotBytes() const override { return h_->slotBytes; }
  bool peerClosed() const override { return h_->senderClosed.load(std::memory_order_acquire) != 0; }

  loomResult_t wait(const void** data, size_t* bytes, uint64_t* signature, const WaitContext& ctx) override {
    if (!ready()) {
      // A sender that closed its end posts nothing more: the wait ends at once instead of at the timeout
      // (what it posted before closing is still read first).
      LOOM_CHECK(waitUntil([&] { return ready() || peerClosed(); }, &h_->head, &h_->receiverSleeping, ctx));
      if (!ready()) return peerGone(ctx, "sender");
    }
    take(data, bytes, signature);
    return loomSuccess;
  }

  bool tryWait(const void** data, size_t* bytes, uint64_t* signature) override {
    if (!ready()) return false;
    take(data, bytes, signature);
    return true;
  }

  void release() override { publishAndWake(&h_->tail, ++tail_, &h_->senderSleeping); }

  bool isDirect() const override { return source_ != 0; }

  loomResult_t readDirect(void* dst, const WaitContext&) override {
    if (readFromProcess(sender_, source_, dst, bytes_) != loomSuccess) {
      const loomResult_t r = setError(loomRemoteError, "shm: cannot read rank %d's data (pid %d): %s", peer_,
                                      static_cast<int>(sender_), std::string(lastErrorDetail()).c_str());
      setLastErrorPeer(peer_);
      return r;
    }
    publishAndWake(&h_->directReads, ++directReads_, &h_->senderSleeping);
    return loomSuccess;
  }

 private:
  bool ready() { return tail_ != headSeen_ || tail_ != (headSeen_ = h_->head.load(std::memory_order_acquire)); }
  void take(const void** data, size_t* bytes, uint64_t* signature) {
    uint32_t idx = tail_ % h_->nslots;
    source_ = h_->posted[idx].source;
    bytes_ = h_->posted[idx].bytes;
    *data = source_ != 0 ? nullptr : slots_ + static_cast<size_t>(idx) * h_->slotBytes;
    *bytes = bytes_;
    *signature = h_->posted[idx].signature;
  }

  std::unique_ptr<ShmSegment> seg_;
  FifoHeader* h_;
  char* slots_;
  uint32_t tail_ = 0;      // our copy of h_->tail
  uint32_t headSeen_ = 0;  // last head value read
  pid_t sender_;
  int peer_;               // the sender's rank, for messages
  uint64_t source_ = 0;    // of the slot taken last
  size_t bytes_ = 0;
  uint32_t directReads_ = 0;
};

class ShmSendQueue : public SendQueue {
 public:
  ShmSendQueue(std::unique_ptr<ShmSegment> seg, size_t offset, bool direct)
      : seg_(std::move(seg)),
        h_(static_cast<FifoHeader*>(seg_->data())),
        slots_(static_cast<char*>(seg_->data()) + offset),
        direct_(direct) {}

  ~ShmSendQueue() override {
    h_->senderClosed.store(1, std::memory_order_release);
    futexWake(&h_->head);
  }

  size_t slotBytes() const override { return h_->slotBytes; }
  bool peerClosed() const override { return h_->receiverClosed.load(std::memory_order_acquire) != 0; }

  loomResult_t acquire(void** slot, const WaitContext& ctx) override {
    if (!free()) {
      LOOM_CHECK(waitUntil([&] { return free() || peerClosed(); }, &h_->tail, &h_->senderSleeping, ctx));
      if (!free()) return peerGone(ctx, "receiver");
    }
    *slot = slotAt(head_);
    return loomSuccess;
  }

  bool tryAcquire(void** slot) override {
    if (!free()) return false;
    *slot = slotAt(head_);
    return true;
  }

  void post(size_t bytes, uint64_t signature) override {
    h_->posted[head_ % h_->nslots] = {bytes, signature, 0};
    publishAndWake(&h_->head, ++head_, &h_->receiverSleeping);
  }

  // LOOM_SHM_DIRECT_MIN, where the receiver can read this process (0 turns it off).
  size_t directPostMin() const override { return direct_ ? static_cast<size_t>(params().SHM_DIRECT_MIN) : 0; }

  void postDirect(const void* src, size_t bytes, uint64_t signature) override {
    h_->posted[head_ % h_->nslots] = {bytes, signature, reinterpret_cast<uint64_t>(src)};
    ++directPosted_;
    publishAndWake(&h_->head, ++head_, &h_->receiverSleeping);
  }

  bool directDone() override { return h_->directReads.load(std::memory_order_acquire) == directPosted_; }

  loomResult_t waitDirectDone(const WaitContext& ctx) override {
    return waitUntil([&] { return directDone(); }, &h_->directReads, &h_->senderSleeping, ctx);
  }

 private:
  bool free() {
    const uint32_t n = h_->nslots;
    return head_ - tailSeen_ < n || head_ - (tailSeen_ = h_->tail.load(std::memory_order_acquire)) < n;
  }
  char* slotAt(uint32_t i) const { return slots_ + static_cast<size_t>(i % h_->nslots) * h_->slotBytes; }

  std::unique_ptr<ShmSegment> seg_;
  FifoHeader* h_;
  char* slots_;
  uint32_t head_ = 0;
  uint32_t tailSeen_ = 0;
  bool direct_;
  uint32_t directPosted_ = 0;
};

// Single copy needs the receiver to read our memory: the same process, or process_vm_readv allowed
// (same user, no Yama or seccomp restriction).  Tried once per connection by reading the receiver's
// FIFO magic from its address space (the permission check is the same in both directions).
bool directReadWorks(const PeerInfo& self, const PeerInfo& peer, uint64_t magicAddress) {
  if (peer.pid == self.pid) return true;
  if (peer.pidNamespace != self.pidNamespace || magicAddress == 0) return false;
  uint64_t magic = 0;
  iovec local{&magic, sizeof(magic)};
  iovec remote{reinterpret_cast<void*>(magicAddress), sizeof(magic)};
  return process_vm_readv(peer.pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(magic)) &&
         magic == kFifoMagic;
}

std::string segmentName(uint64_t key, int sender, int receiver, int channel) {
  char buf[96];
  snprintf(buf, sizeof(buf), "/loom-%016" PRIx64 "-%d-%d-%d", key, sender, receiver, channel);
  return buf;
}
std::string segmentName(const ConnectRequest& req, int sender, int receiver) {
  return segmentName(req.commKey, sender, receiver, req.channel);
}

}  // namespace

void removeShmLeftovers(uint64_t key, int self, const std::vector<int>& localPeers, int channels) {
  for (int c = 0; c < channels; ++c)
    for (int p : localPeers) shm_unlink(segmentName(key, self, p, c).c_str());
}

TransportCaps ShmTransport::caps() const {
  TransportCaps c{LinkKind::kSharedMemory};
  c.directPostMin = static_cast<size_t>(params().SHM_DIRECT_MIN);  // the receiver reads the sender's memory
  c.slotBytes = static_cast<size_t>(params().SHM_SLOT_SIZE);
  return c;
}

bool ShmTransport::reaches(const PeerInfo& self, const PeerInfo& peer, TransportEstimate* est,
                           std::string* reason) const {
  if (self.hostHash != peer.hostHash) {
    *reason = "shm: different hosts";
    return false;
  }
  if (params().SHM_DISABLE != 0) {
    *reason = "shm: disabled by LOOM_SHM_DISABLE";
    return false;
  }
  // One memory copy in, one out: about a single core's memcpy bandwidth; a futex hand-over at worst.
  est->bandwidthGBs = 8;
  est->latencyUs = 1;
  *reason = "shm: same host";
  return true;
}

loomResult_t ShmTransport::createRecv(const ConnectRequest& req, ConnectInfo* info, std::unique_ptr<RecvQueue>* recv) {
  // Both in the ranges base/params.h declares (checked at init): nslots <= kMaxSlots, 64-byte slots.
  const int64_t nslots = params().SHM_NSLOTS, slotBytes = params().SHM_SLOT_SIZE;
  ShmConnectInfo ci{};
  std::string name = segmentName(req, req.peer, req.self);
  snprintf(ci.name, sizeof(ci.name), "%s", name.c_str());
  ci.nslots = static_cast<uint32_t>(nslots);
  ci.slotBytes = static_cast<uint32_t>(slotBytes);
  ci.slotOffset = static_cast<uint32_t>(slotOffset(req.peer, req.self));
  auto seg = std::make_unique<ShmSegment>();
  LOOM_CHECK(seg->create(name, fifoBytes(ci.nslots, ci.slotBytes)));
  auto* h = new (seg->data()) FifoHeader();
  h->magic = kFifoMagic;
  h->nslots = ci.nslots;
  h->slotBytes = ci.slotBytes;
  ci.magicAddress = reinterpret_cast<uint64_t>(&h->magic);
  std::memset(info, 0, sizeof(*info));
  std::memcpy(info->bytes, &ci, sizeof(ci));
  *recv = std::make_unique<ShmRecvQueue>(std::move(seg), ci.slotOffset, static_cast<pid_t>(req.peerInfo->pid),
                                         req.peer);
  LOOM_TRACE(kTransport, "shm: rank %d receives from rank %d in %s (%u x %u B)", req.self, req.peer, ci.name,
             ci.nslots, ci.slotBytes);
  return loomSuccess;
}

loomResult_t ShmTransport::connectSend(const ConnectRequest& req, const ConnectInfo& peerInfo,
                                       std::unique_ptr<SendQueue>* send) {
  ShmConnectInfo ci{};
  std::memcpy(&ci, peerInfo.bytes, sizeof(ci));
  ci.name[sizeof(ci.name) - 1] = '\0';
  if (std::string(ci.name) != segmentName(req, req.self, req.peer) || ci.nslots < 2 || ci.nslots > kMaxSlots ||
      ci.slotBytes == 0 || ci.slotOffset != slotOffset(req.self, req.peer))
    return setError(loomRemoteError, "shm: rank %d sent malformed connection info", req.peer);
  auto seg = std::make_unique<ShmSegment>();
  LOOM_CHECK(seg->open(ci.name, fifoBytes(ci.nslots, ci.slotBytes)));
  seg->unlinkName();  // both sides now hold the mapping; a crash can no longer leak the name
  auto* h = static_cast<FifoHeader*>(seg->data());
  if (h->magic != kFifoMagic || h->nslots != ci.nslots || h->slotBytes != ci.slotBytes)
    return setError(loomRemoteError, "shm: segment %s from rank %d has a bad header", ci.name, req.peer);
  bool direct = directReadWorks(*req.selfInfo, *req.peerInfo, ci.magicAddress);
  LOOM_TRACE(kTransport, "shm: rank %d -> %d single copy %s", req.self, req.peer, direct ? "on" : "off");
  *send = std::make_unique<ShmSendQueue>(std::move(seg), ci.slotOffset, direct);
  return loomSuccess;
}

}  // namespace loom
