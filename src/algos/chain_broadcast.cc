// Pipelined chain broadcast: the root streams slot-sized slices to root+1, every rank stores each slice
// and forwards it to the next, the last rank (root-1) only stores.  One pass over each link carries the
// whole message: bandwidth-optimal for large messages; the latency is n-1 hops for the first slice.
#include <algorithm>

#include "algos/algorithms.h"
#include "algos/primitives.h"

namespace loom {

loomResult_t chainBroadcast(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank, root = args.root;
  const size_t esize = typeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (r == root && in != out) reduceKernels().copy(out, in, args.count * esize);
  if (n == 1) return loomSuccess;

  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const int position = (r - root + n) % n;  // 0 for the root, n-1 for the end of the chain
  LOOM_CHECK(comm->connect({prev, next}, 0));
  Primitives prims(comm, position < n - 1 ? next : -1, position > 0 ? prev : -1, 0, args,
                   "broadcast (chain)");
  const size_t slice = prims.maxElems();

  for (size_t off = 0; off < args.count; off += slice) {
    const size_t len = std::min(slice, args.count - off);
    char* at = out + off * esize;
    if (position == 0) LOOM_CHECK(prims.send(at, len));
    else if (position < n - 1) LOOM_CHECK(prims.recvCopySend(at, len));
    else LOOM_CHECK(prims.recv(at, len));
  }
  return loomSuccess;
}

}  // namespace loom
