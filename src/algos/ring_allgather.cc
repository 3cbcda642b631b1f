// Ring allgather: each rank's block travels n-1 hops around the ring.  Rank r sends its own block to
// r+1, then for n-2 steps stores the block arriving from r-1 and passes it on, and finally stores the
// last block.  Blocks are walked in slot-sized slices so consecutive hops overlap.
#include <algorithm>

#include "algos/algorithms.h"
#include "algos/primitives.h"

namespace loom {

loomResult_t ringAllGather(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const size_t esize = typeSize(args.type), blockBytes = args.count * esize;
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  const CopyFn copy = reduceKernels().copy;
  auto block = [&](int b) { return out + static_cast<size_t>(((b % n) + n) % n) * blockBytes; };

  if (in != block(r)) copy(block(r), in, blockBytes);  // in place when sendbuff is our block already
  if (n == 1) return loomSuccess;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  LOOM_CHECK(comm->connect({prev, next}, 0));
  Primitives prims(comm, next, prev, 0, args, "allgather (ring)");
  const size_t slice = prims.maxElems();

  for (size_t off = 0; off < args.count; off += slice) {
    const size_t len = std::min(slice, args.count - off), at = off * esize;
    LOOM_CHECK(prims.send(block(r) + at, len));
    for (int j = 1; j < n - 1; ++j) LOOM_CHECK(prims.recvCopySend(block(r - j) + at, len));
    LOOM_CHECK(prims.recv(block(r - (n - 1)) + at, len));
  }
  return loomSuccess;
}

}  // namespace loom
