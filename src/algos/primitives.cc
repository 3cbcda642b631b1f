#include "algos/primitives.h"

#include <algorithm>
#include <cstring>

#include "base/params.h"

namespace loom {

loomResult_t joinChain(loomComm* comm, const std::vector<int>& chain, int channel, ChainPlace* place) {
  const int n = static_cast<int>(chain.size());
  place->position = static_cast<int>(std::find(chain.begin(), chain.end(), comm->rank) - chain.begin());
  if (place->position == n || n <= 1) return loomSuccess;
  place->prev = place->position > 0 ? chain[place->position - 1] : -1;
  place->next = place->position < n - 1 ? chain[place->position + 1] : -1;
  std::vector<int> peers;
  for (int p : {place->prev, place->next})
    if (p >= 0) peers.push_back(p);
  return comm->connect(peers, channel);
}

size_t plannedStepBytes(const loomComm* comm, bool acrossHosts) {
  if (params().CHUNK_SIZE > 0) return static_cast<size_t>(params().CHUNK_SIZE);
  return acrossHosts ? comm->netStepBytes : comm->hostStepBytes;
}

Primitives::Primitives(loomComm* comm, int sendPeer, int recvPeer, int channel, const CollArgs& call,
                       const char* what)
    : comm_(comm),
      sendPeer_(sendPeer),
      recvPeer_(recvPeer),
      elemSize_(typeSize(call.type)),
      signature_(callSignature(call)),
      ctx_(comm->waitContext(what)) {
  const loomDataType_t type = call.type;
  const loomRedOp_t op = call.op;
  // Every rank must cut the data into the same steps, whether it sends, receives or both: the step is
  // the slot size (the same on all ranks, from LOOM_SHM_SLOT_SIZE or LOOM_NET_SLOT_SIZE), rounded to
  // whole 64-byte blocks so that vector kernels run on whole chunks.
  size_t slot = SIZE_MAX;
  if (sendPeer >= 0) {
    sendQ_ = comm->connection(sendPeer, channel).send.get();
    slot = sendQ_->slotBytes();
  }
  if (recvPeer >= 0) {
    recvQ_ = comm->connection(recvPeer, channel).recv.get();
    slot = std::min(slot, recvQ_->slotBytes());
  }
  // A pipeline may cross both kinds of link (a chain from shared memory onto the network and back): all
  // its ranks must cut the same steps, so in a job that spans hosts they step by the smallest slot of
  // all (LOOM_SHM_SLOT_SIZE and LOOM_NET_SLOT_SIZE may differ).
  const bool spansHosts = comm->cluster != nullptr && comm->cluster->hosts.size() > 1;
  if (spansHosts && comm->netStepBytes > 0) slot = std::min(slot, comm->netStepBytes);
  if (params().CHUNK_SIZE > 0) slot = std::min(slot, static_cast<size_t>(params().CHUNK_SIZE));
  maxElems_ = std::max<size_t>(1, (slot / 64 * 64) / elemSize_);
  const ReduceKernels& k = reduceKernels();
  copy_ = k.copy;
  // Outputs far larger than the caches are not read again soon: write them past the cache.
  ctx_.callBytes = call.count * elemSize_;
  copyOut_ = ctx_.callBytes >= kStreamingMinBytes ? k.copyStreaming : k.copy;
  // avg and PreMulSum ops (their inputs arrive already scaled) add; avg divides at the end.
  reduce_ = op >= 0 && op < kNumBuiltinOps ? k.reduce[type][op] : k.reduce[type][loomSum];
  sumDivide_ = k.sumDivide[type];
}

loomResult_t Primitives::checkReceived(size_t bytes, uint64_t signature, size_t n) {
  if (signature != signature_)
    return setError(loomInvalidUsage, "mismatched calls: rank %d is in %s but %s sent data of %s", comm_->rank,
                    describeCall(signature_).c_str(), comm_->describe(recvPeer_).c_str(),
                    describeCall(signature).c_str());
  if (bytes != n * elemSize_)
    return setError(loomInvalidUsage, "%s: %s sent %zu bytes where rank %d expected %zu: the ranks called "
                    "different collectives, counts or types", ctx_.what, comm_->describe(recvPeer_).c_str(), bytes,
                    comm_->rank, n * elemSize_);
  return loomSuccess;
}

loomResult_t Primitives::waitRecv(const void** data, size_t n) {
  size_t bytes = 0;
  uint64_t signature = 0;
  ctx_.peer = recvPeer_;
  LOOM_CHECK(recvQ_->wait(data, &bytes, &signature, ctx_));
  return checkReceived(bytes, signature, n);
}

// out <- prev, straight from the wire where the transport can, else through its slot.
loomResult_t Primitives::receiveInto(void* out, size_t n) {
  if (!recvQ_->receivesIntoCaller()) {
    const void* in;
    LOOM_CHECK(waitRecv(&in, n));
    if (recvQ_->isDirect()) {  // a sender that offers its buffer to be read, to a receiver that copies
      LOOM_CHECK(recvQ_->readDirect(out, ctx_));
    } else {
      copyOut_(out, in, n * elemSize_);
      countSlotCopy(n * elemSize_);
    }
    recvQ_->release();
    return loomSuccess;
  }
  size_t bytes = 0;
  uint64_t signature = 0;
  ctx_.peer = recvPeer_;
  LOOM_CHECK(recvQ_->receiveInto(out, n * elemSize_, &bytes, &signature, ctx_));
  return checkReceived(bytes, signature, n);
}

// Posts the acquired slot with next <- src, copied into it.
void Primitives::postCopy(void* slot, const void* src, size_t n) {
  copy_(slot, src, n * elemSize_);
  countSlotCopy(n * elemSize_);
  sendQ_->post(n * elemSize_, signature_);
}

// Posts the acquired slot with next <- src: from src itself where the transport sends from the caller's
// memory (src is final), else copied into the slot.
void Primitives::postFrom(void* slot, const void* src, size_t n, Landing landing) {
  if (sendQ_->postsFromCaller()) sendQ_->postFrom(src, n * elemSize_, signature_, landing);
  else postCopy(slot, src, n);
}

loomResult_t Primitives::acquireSend(void** slot) {
  ctx_.peer = sendPeer_;
  return sendQ_->acquire(slot, ctx_);
}

void Primitives::reduceInto(void* dst, const void* a, const void* b, size_t n, int divisor) const {
  if (divisor > 0) sumDivide_(dst, a, b, n, divisor);
  else reduce_(dst, a, b, n);
}

loomResult_t Primitives::send(const void* src, size_t n) {
  void* slot;
  LOOM_CHECK(acquireSend(&slot));
  postCopy(slot, src, n);
  return loomSuccess;
}

loomResult_t Primitives::sendFinal(const void* src, size_t n, Landing landing) {
  void* slot;
  LOOM_CHECK(acquireSend(&slot));
  postFrom(slot, src, n, landing);
  return loomSuccess;
}

loomResult_t Primitives::recvReduceSend(const void* local, size_t n) {
  void* slot;
  const void* in;
  LOOM_CHECK(acquireSend(&slot));
  LOOM_CHECK(waitRecv(&in, n));
  reduce_(slot, in, local, n);
  recvQ_->release();
  sendQ_->post(n * elemSize_, signature_);
  return loomSuccess;
}

loomResult_t Primitives::recvReduceCopySend(const void* local, void* out, size_t n, int divisor) {
  void* slot;
  LOOM_CHECK(acquireSend(&slot));
  LOOM_CHECK(recvReduceCopy(local, out, n, divisor));
  // `out` is still in cache.  Ring allreduce is the one user: its next step copies (recvCopySend).
  postFrom(slot, out, n, Landing::kCaller);
  return loomSuccess;
}

loomResult_t Primitives::recvReduceCopy(const void* local, void* out, size_t n, int divisor) {
  const void* in;
  LOOM_CHECK(waitRecv(&in, n));
  reduceInto(out, in, local, n, divisor);
  recvQ_->release();
  return loomSuccess;
}

loomResult_t Primitives::recvCopySend(void* out, size_t n) {
  void* slot;
  LOOM_CHECK(acquireSend(&slot));
  if (recvQ_->receivesIntoCaller() || sendQ_->postsFromCaller()) {
    LOOM_CHECK(receiveInto(out, n));
    postFrom(slot, out, n, Landing::kCaller);  // next copies it on, or out
    return loomSuccess;
  }
  const void* in;
  LOOM_CHECK(waitRecv(&in, n));
  copy_(slot, in, n * elemSize_);  // both copies read the received slot, which is in cache
  copyOut_(out, in, n * elemSize_);
  countSlotCopy(2 * n * elemSize_);
  recvQ_->release();
  sendQ_->post(n * elemSize_, signature_);
  return loomSuccess;
}

loomResult_t Primitives::recv(void* out, size_t n) { return receiveInto(out, n); }

}  // namespace loom
