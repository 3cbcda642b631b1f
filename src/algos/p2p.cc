// The transfer engine.  Each peer has an ordered queue of outgoing and of incoming transfers; one loop
// polls them all without blocking (tryAcquire / tryWait), moving one slot at a time, and backs off
// (spin, yield, sleep) only when a whole pass moved nothing.  Because every queue advances whenever its
// peer does, there is no cycle of ranks each waiting for the next.
//
// Device buffers reach here only on the GPUDirect RDMA path (device/device_call.h decided it): the CPU
// never touches them.  A device send is one direct post (the NIC reads the buffer where it lies), a
// device receive reads a direct post into the buffer, or copies an ordinary slot in with the device's
// copy engine; copies to oneself are device copies.
#include "algos/p2p.h"

#include <algorithm>
#include <deque>
#include <map>

#include "algos/primitives.h"
#include "kernels/reduce_kernels.h"
#include "runtime/collective.h"
#include "base/log.h"
#include "base/params.h"
#include "device_runtime/device_api.h"
#include "device/device_call.h"

namespace loom {

namespace {

struct Pending {
  const Transfer* t;
  bool device = false;  // the buffer is device memory
  size_t done = 0;
  bool direct = false;  // posted as one direct slot: complete once the receiver has read it
};

bool onDevice(DeviceApi* dev, const void* p) { return dev != nullptr && dev->isDeviceMemory(p); }

// Transfers to and from oneself: the k-th send is copied into the k-th receive.
loomResult_t selfCopies(loomComm* comm, const std::vector<Transfer>& transfers) {
  std::deque<const Transfer*> sends, recvs;
  for (const Transfer& t : transfers)
    if (t.peer == comm->rank) (t.send ? sends : recvs).push_back(&t);
  if (sends.size() != recvs.size())
    return setError(loomInvalidUsage, "rank %d posted %zu sends to itself but %zu receives from itself", comm->rank,
                    sends.size(), recvs.size());
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->bytes != recvs[i]->bytes || sends[i]->signature != recvs[i]->signature)
      return setError(loomInvalidUsage, "rank %d sends itself %s but receives %s", comm->rank,
                      describeCall(sends[i]->signature).c_str(), describeCall(recvs[i]->signature).c_str());
    if (sends[i]->buffer == recvs[i]->buffer) continue;
    DeviceApi* dev = deviceApi();
    if (onDevice(dev, sends[i]->buffer) || onDevice(dev, recvs[i]->buffer))
      LOOM_CHECK(deviceCopy(comm, dev, recvs[i]->buffer, sends[i]->buffer, sends[i]->bytes, "a copy to oneself"));
    else
      reduceKernels().copy(recvs[i]->buffer, sends[i]->buffer, sends[i]->bytes);
  }
  return loomSuccess;
}

}  // namespace

Transfer transferOf(const CollArgs& a) {
  bool send = a.coll == CollType::Send;
  char* buf = send ? const_cast<char*>(static_cast<const char*>(a.sendbuff)) : static_cast<char*>(a.recvbuff);
  return Transfer{a.root, send, buf, a.count * typeSize(a.type), callSignature(a)};
}

loomResult_t runTransfers(loomComm* comm, const std::vector<Transfer>& transfers, const char* what) {
  LOOM_CHECK(selfCopies(comm, transfers));
  std::vector<int> peers;
  std::map<int, std::deque<Pending>> out, in;
  DeviceApi* dev = deviceApi();
  for (const Transfer& t : transfers) {
    if (t.peer == comm->rank || t.bytes == 0) continue;  // empty transfers carry nothing, on both ends
    peers.push_back(t.peer);
    (t.send ? out : in)[t.peer].push_back(Pending{&t, onDevice(dev, t.buffer)});
  }
  if (peers.empty()) return loomSuccess;
  LOOM_CHECK(comm->connect(peers, 0));
  for (auto& [peer, sends] : out)
    for (const Pending& p : sends)
      if (p.device && !comm->connection(peer, 0).send->canPostDirectFrom(p.t->buffer, p.t->bytes))
        return setError(loomInternalError, "%s: rank %d cannot send device memory to %s over %s (no GPUDirect RDMA)",
                        what, comm->rank, comm->describe(peer).c_str(), comm->connection(peer, 0).transport->name());
  const CopyFn copy = reduceKernels().copy, copyOut = reduceKernels().copyStreaming;
  WaitContext ctx = comm->waitContext(what);
  for (const Transfer& t : transfers) ctx.callBytes += t.bytes;
  // Polling many queues: spin only if no I/O thread of ours has to run for them to move.
  Producer producer = Producer::kPeer;
  for (int peer : peers) {
    const Connection& c = comm->connection(peer, 0);
    if (c.send->producer() == Producer::kOwnThread || c.recv->producer() == Producer::kOwnThread)
      producer = Producer::kOwnThread;
  }
  Backoff backoff(ctx, producer);
  // Peers sent to straight from a transfer's buffer: a buffer is the caller's again once runTransfers
  // returns (alltoall in place reuses its outgoing copy at the next step), so these are flushed first.
  std::vector<int> postedFrom;
  std::vector<pollfd> pollFds;

  while (!out.empty() || !in.empty()) {
    bool moved = false;
    for (auto it = out.begin(); it != out.end();) {
      SendQueue* q = comm->connection(it->first, 0).send.get();
      Pending& p = it->second.front();
      void* slot;
      const bool direct = p.device || (q->directPostMin() > 0 && p.t->bytes >= q->directPostMin());
      if (p.done == 0 && direct && q->tryAcquire(&slot)) {
        q->postDirect(p.t->buffer, p.t->bytes, p.t->signature);
        p.done = p.t->bytes;
        p.direct = true;
        moved = true;
      }
      while (!p.device && p.done < p.t->bytes && q->tryAcquire(&slot)) {
        size_t n = std::min(q->slotBytes(), p.t->bytes - p.done);
        if (q->postsFromCaller()) {  // sent from the buffer itself: flushed before the transfers end
          q->postFrom(p.t->buffer + p.done, n, p.t->signature, Landing::kCaller);
          if (std::find(postedFrom.begin(), postedFrom.end(), it->first) == postedFrom.end())
            postedFrom.push_back(it->first);
        } else {
          copy(slot, p.t->buffer + p.done, n);
          countSlotCopy(n);
          q->post(n, p.t->signature);
        }
        LOOM_TRACE(kTransport, "%s: rank %d -> %d: %zu bytes of %s", what, comm->rank, it->first, n,
                   describeCall(p.t->signature).c_str());
        p.done += n;
        moved = true;
      }
      if (p.done == p.t->bytes && (!p.direct || q->directDone())) {
        // A finished direct send is progress too: a failure noticed while waiting for its reader (who
        // may have closed its connection right after reading) must not be reported now.
        if (p.direct) {
          moved = true;
          LOOM_CHECK(q->waitDirectDone(ctx));  // at once: reports a post that could not be offered
        }
        it->second.pop_front();
      }
      it = it->second.empty() ? out.erase(it) : std::next(it);
    }
    for (auto it = in.begin(); it != in.end();) {
      RecvQueue* q = comm->connection(it->first, 0).recv.get();
      Pending& p = it->second.front();
      const void* data;
      size_t n;
      uint64_t signature;
      for (;;) {
        if (p.done == p.t->bytes) break;
        if (!p.device) q->expectInto(p.t->buffer + p.done, p.t->bytes - p.done);
        if (!q->tryWait(&data, &n, &signature)) break;
        if (signature != p.t->signature || n > p.t->bytes - p.done)
          return setError(loomInvalidUsage, "mismatched calls: rank %d is in %s but %s sent data of %s", comm->rank,
                          describeCall(p.t->signature).c_str(), comm->describe(it->first).c_str(),
                          describeCall(signature).c_str());
        if (q->isDirect()) LOOM_CHECK(q->readDirect(p.t->buffer + p.done, ctx));
        else if (q->landedInCaller()) {  // zero copy: nothing left to move
        } else if (p.device) LOOM_CHECK(deviceCopy(comm, dev, p.t->buffer + p.done, data, n, what));
        else {
          (p.t->bytes >= kStreamingMinBytes ? copyOut : copy)(p.t->buffer + p.done, data, n);
          countSlotCopy(n);
        }
        q->release();
        LOOM_TRACE(kTransport, "%s: rank %d <- %d: %zu bytes of %s", what, comm->rank, it->first, n,
                   describeCall(signature).c_str());
        p.done += n;
        moved = true;
      }
      if (p.done == p.t->bytes) it->second.pop_front();
      it = it->second.empty() ? in.erase(it) : std::next(it);
    }
    if (moved) {
      backoff.progressed();
    } else if (out.size() + in.size() == 1) {
      // One queue left: sleep on its own futex (a blocking wait consumes nothing; the next pass takes it).
      if (!out.empty()) {
        ctx.peer = out.begin()->first;
        SendQueue* q = comm->connection(ctx.peer, 0).send.get();
        void* slot;
        if (out.begin()->second.front().direct) LOOM_CHECK(q->waitDirectDone(ctx));
        else LOOM_CHECK(q->acquire(&slot, ctx));
      } else {
        ctx.peer = in.begin()->first;
        const void* data;
        size_t n;
        uint64_t signature;
        LOOM_CHECK(comm->connection(ctx.peer, 0).recv->wait(&data, &n, &signature, ctx));
      }
    } else {
      ctx.peer = !in.empty() ? in.begin()->first : out.begin()->first;
      // Where every queue shows its progress on sockets, the rank sleeps in poll() on all of them and
      // the data wakes it, instead of napping 10 us-1 ms between looks.
      pollFds.clear();
      bool complete = true;
      for (const auto& [peer, sends] : out) complete &= comm->connection(peer, 0).send->pollSet(&pollFds);
      for (const auto& [peer, recvs] : in) complete &= comm->connection(peer, 0).recv->pollSet(&pollFds);
      LOOM_CHECK(backoff.idle(&pollFds, complete));
    }
  }
  for (int peer : postedFrom) {
    ctx.peer = peer;
    LOOM_CHECK(comm->connection(peer, 0).send->flush(ctx));
  }
  return loomSuccess;
}

loomResult_t receiveFromAny(loomComm* comm, Transfer receive, int* source) {
  const char* what = "a receive from any source";
  std::vector<int> peers;
  for (int r = 0; r < comm->nranks; ++r)
    if (r != comm->rank) peers.push_back(r);
  if (peers.empty())
    return setError(loomInvalidUsage, "%s: rank %d is alone in its communicator: no rank can send to it", what, comm->rank);
  LOOM_CHECK(comm->connect(peers, 0));
  WaitContext ctx = comm->waitContext(what);
  Producer producer = Producer::kPeer;
  for (int peer : peers)
    if (comm->connection(peer, 0).recv->producer() == Producer::kOwnThread) producer = Producer::kOwnThread;
  Backoff backoff(ctx, producer);
  // Looks at the head of each queue without taking it (a slot stays at the head until release()), from
  // a starting peer that rotates call by call, so that no sender is always preferred.
  const size_t first = comm->anySourceTurn++ % peers.size();
  // A rank that sent its last message and left (destroyed its communicator, exited) is no failure: it
  // just cannot be the source any more.  The receive watches the others and fails only once every rank
  // has left; an abort or a failure announced by any rank still ends it at once.  A rank that left
  // stays in the scan: what it sent before leaving may still be arriving.
  std::vector<int> watched = peers;
  for (size_t round = 0;; ++round) {
    for (size_t k = 0; k < peers.size(); ++k) {
      const int peer = peers[(first + k) % peers.size()];
      const void* data;
      size_t n;
      uint64_t signature;
      if (comm->connection(peer, 0).recv->tryWait(&data, &n, &signature) && signature == receive.signature) {
        receive.peer = peer;
        LOOM_TRACE(kTransport, "%s: rank %d takes %s from %s", what, comm->rank, describeCall(signature).c_str(),
                   comm->describe(peer).c_str());
        LOOM_CHECK(runTransfers(comm, {receive}, what));
        *source = peer;
        return loomSuccess;
      }
    }
    // Each idle round watches one peer for failure, in turn.  The rank noticed gone was looked at by
    // a whole pass since (Backoff reports it one idle() late), so nothing it sent is left behind.
    ctx.peer = watched[round % watched.size()];
    loomResult_t rc;
    {
      QuietErrors quiet;  // a rank that left is no warning
      rc = backoff.idle();
    }
    if (rc == loomSuccess) continue;
    // Whom the failure is about (not always the peer watched now); read before the bootstrap is asked,
    // whose reads may reset it.  Only a failure is worth the question (a poll of its listener).
    const int gone = lastErrorPeer();
    int culprit = -1, from = -1;
    const bool left = rc == loomRemoteError && !comm->abortFlag.load() &&
                      !(comm->bootstrap != nullptr && comm->bootstrap->failureAnnounced(&culprit, &from));
    const auto at = std::find(watched.begin(), watched.end(), gone);
    if (left && watched.size() > 1 && at != watched.end()) {
      LOOM_INFO(kTransport, "%s: rank %d stops watching %s: %s", what, comm->rank, comm->describe(gone).c_str(),
                lastErrorDetail());
      watched.erase(at);
      clearLastError();
      backoff.progressed();
      continue;
    }
    setError(rc, "%s%s", lastErrorDetail(), left ? " (the last rank that could send)" : "");
    setLastErrorPeer(gone);
    return rc;
  }
}

}  // namespace loom
