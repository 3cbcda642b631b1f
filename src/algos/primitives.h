// The steps every algorithm is written with.  A Primitives object joins one rank to the peer it sends to
// and the peer it receives from (ring neighbours, or tree parent/child) on one channel, and moves at most
// one slot per step.  Steps that receive read straight from the transport's slot and steps that send
// write straight into it, so "receive, reduce with my data, send on" touches each byte once.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/reduce_kernels.h"
#include "runtime/collective.h"
#include "runtime/comm.h"

namespace loom {

// Where this rank sits on a chain of ranks (algorithms over groups: chain reduce and broadcast):
// position is chain.size() when the rank is not on it; prev/next are -1 at the ends.  Connects to the
// neighbours on `channel`.
struct ChainPlace {
  int position = 0, prev = -1, next = -1;
};
loomResult_t joinChain(loomComm* comm, const std::vector<int>& chain, int channel, ChainPlace* place);

// Whether the byte ranges [a, a + aBytes) and [b, b + bBytes) share no byte.
inline bool disjoint(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const char *x = static_cast<const char*>(a), *y = static_cast<const char*>(b);
  return x + aBytes <= y || y + bBytes <= x;
}

// The step size a plan counts with before any connection exists (the cost model, the channel count):
// LOOM_CHUNK_SIZE when set, else the slot size (the smaller of the shm and the network one for a
// communicator across hosts).  Primitives::maxElems() is the exact one.
size_t plannedStepBytes(const loomComm* comm, bool acrossHosts);

// (kStreamingMinBytes, from which calls write their final output with streaming stores, is in
// model/cost_model.h: the model prices it.)

class Primitives {
 public:
  // sendPeer / recvPeer may be -1 when the algorithm never sends / receives through this object.
  // `call` gives the type, the op and the signature that every step sends and expects.
  Primitives(loomComm* comm, int sendPeer, int recvPeer, int channel, const CollArgs& call, const char* what);

  // Largest element count one step may carry.
  size_t maxElems() const { return maxElems_; }

  // next <- src.  src may change once send() returns: the data is copied into a slot.
  loomResult_t send(const void* src, size_t n);
  // next <- src, where src keeps its value until the call ends: a transport that sends from the
  // caller's memory takes it from there (zero copy).  `landing`: whether next copies it out (recv,
  // recvCopySend: Landing::kCaller) or reduces it (the recvReduce steps: Landing::kSlot).
  loomResult_t sendFinal(const void* src, size_t n, Landing landing);
  // next <- prev op local
  loomResult_t recvReduceSend(const void* local, size_t n);
  // out <- prev op local (divided by `divisor` when it is > 0: the end of loomAvg); next <- out.  `out` is
  // final: the call does not write it again (it is sent from there where the transport can).
  loomResult_t recvReduceCopySend(const void* local, void* out, size_t n, int divisor);
  // out <- prev op local (or divided); nothing sent
  loomResult_t recvReduceCopy(const void* local, void* out, size_t n, int divisor);
  // out <- prev; next <- prev.  `out` is final, as for recvReduceCopySend: over a network the data lands in
  // out and leaves from there.
  loomResult_t recvCopySend(void* out, size_t n);
  // out <- prev
  loomResult_t recv(void* out, size_t n);

 private:
  loomResult_t waitRecv(const void** data, size_t n);
  loomResult_t checkReceived(size_t bytes, uint64_t signature, size_t n);
  loomResult_t receiveInto(void* out, size_t n);
  loomResult_t acquireSend(void** slot);
  void postCopy(void* slot, const void* src, size_t n);
  void postFrom(void* slot, const void* src, size_t n, Landing landing);
  void reduceInto(void* dst, const void* a, const void* b, size_t n, int divisor) const;

  loomComm* comm_;
  int sendPeer_, recvPeer_;
  SendQueue* sendQ_ = nullptr;
  RecvQueue* recvQ_ = nullptr;
  size_t elemSize_;
  uint64_t signature_;
  size_t maxElems_;
  CopyFn copy_ = nullptr;
  CopyFn copyOut_ = nullptr;  // into the user's output: streaming stores for large calls
  ReduceFn reduce_ = nullptr;
  ReduceDivFn sumDivide_ = nullptr;
  WaitContext ctx_;
};

}  // namespace loom
