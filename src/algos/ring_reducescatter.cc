// Ring reduce-scatter: the block of the rank at ring position b is started by position b+1, reduced on
// by every rank it passes, and completed (and divided, for avg) at position b after n-1 hops.  Position
// i sends block i-1, then for n-2 steps reduces the arriving block (i-k-1) with its own and passes it
// on, then completes block i into the output.  Blocks are walked in slot-sized slices.
//
// The ring is the topology's planned ring of each channel (algos/channels.h); a large call is split
// over channels, each channel carrying its share of every block's elements on its own connections.
#include <vector>

#include "algos/algorithms.h"
#include "algos/ring_walk.h"

namespace loom {

namespace {

// Elements [first, first + count) of every block, reduced around `ring` on `channel`.
class ReduceScatterShare : public RingWalk {
 public:
  using RingWalk::RingWalk;
  loomResult_t start() { return join("reducescatter (ring)"); }

  // Hop h of the current slice: 0 starts block i-1, 1..n-2 add to the arriving block (i-h-1) and pass
  // it on, n-1 completes our block into the output.
  loomResult_t step() {
    const size_t len = sliceElems(), at = sliceAt();
    const char* in = static_cast<const char*>(args_.sendbuff);
    if (hop_ == 0) {
      // The input block is final unless it shares bytes with the output (in place: our own block).
      const char* piece = in + blockAt(i_ - 1) + at;
      if (disjoint(piece, len * esize_, args_.recvbuff, args_.count * esize_))
        LOOM_CHECK(prims_->sendFinal(piece, len, Landing::kSlot));
      else LOOM_CHECK(prims_->send(piece, len));
    } else if (hop_ < n_ - 1) {
      LOOM_CHECK(prims_->recvReduceSend(in + blockAt(i_ - hop_ - 1) + at, len));
    } else {
      const int divisor = args_.op == loomAvg ? comm_->nranks : 0;
      LOOM_CHECK(prims_->recvReduceCopy(in + blockAt(i_) + at, static_cast<char*>(args_.recvbuff) + at, len, divisor));
    }
    advance();
    return loomSuccess;
  }
};

}  // namespace

loomResult_t ringReduceScatter(loomComm* comm, const CollArgs& args) {
  const size_t blockBytes = args.count * typeSize(args.type);
  if (comm->nranks == 1) {
    if (args.recvbuff != args.sendbuff) reduceKernels().copy(args.recvbuff, args.sendbuff, blockBytes);
    return loomSuccess;
  }
  return runRingWalks<ReduceScatterShare>(comm, args);
}

}  // namespace loom
