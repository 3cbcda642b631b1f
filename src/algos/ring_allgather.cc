// Ring allgather: each rank's block travels n-1 hops around the ring.  The rank at position i of the
// ring sends its own block to position i+1, then for n-2 steps stores the block arriving from i-1 and
// passes it on, and finally stores the last block.  Blocks are walked in slot-sized slices so
// consecutive hops overlap.
//
// The ring is the topology's planned ring of each channel (algos/channels.h); a large call is split
// over channels, each channel carrying its share of every block's elements on its own connections.
#include <vector>

#include "algos/algorithms.h"
#include "algos/ring_walk.h"

namespace loom {

namespace {

// Elements [first, first + count) of every block, gathered around `ring` on `channel`.
class AllGatherShare : public RingWalk {
 public:
  using RingWalk::RingWalk;
  loomResult_t start() { return join("allgather (ring)"); }

  // Hop h of the current slice: 0 sends our block, 1..n-2 store the arriving block (i-h) and pass it
  // on, n-1 stores the last.
  loomResult_t step() {
    const size_t len = sliceElems();
    char* piece = static_cast<char*>(args_.recvbuff) + blockAt(i_ - hop_) + sliceAt();
    if (hop_ == 0) LOOM_CHECK(prims_->sendFinal(piece, len, Landing::kCaller));  // our own block, final
    else if (hop_ < n_ - 1) LOOM_CHECK(prims_->recvCopySend(piece, len));
    else LOOM_CHECK(prims_->recv(piece, len));
    advance();
    return loomSuccess;
  }
};

}  // namespace

loomResult_t ringAllGather(loomComm* comm, const CollArgs& args) {
  const size_t esize = typeSize(args.type), blockBytes = args.count * esize;
  char* mine = static_cast<char*>(args.recvbuff) + static_cast<size_t>(comm->rank) * blockBytes;
  if (args.sendbuff != mine) reduceKernels().copy(mine, args.sendbuff, blockBytes);  // in place: already there
  return runRingWalks<AllGatherShare>(comm, args);
}

}  // namespace loom
