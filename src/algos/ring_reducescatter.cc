// Ring reduce-scatter: block b is started by rank b+1, reduced on by every rank it passes, and
// completed (and divided, for avg) on rank b after n-1 hops.  Rank r sends block r-1, then for n-2
// steps reduces the arriving block (r-k-1) with its own and passes it on, then completes block r.
#include <algorithm>

#include "algos/algorithms.h"
#include "algos/primitives.h"

namespace loom {

loomResult_t ringReduceScatter(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const size_t esize = typeSize(args.type), blockBytes = args.count * esize;
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  auto block = [&](int b) { return in + static_cast<size_t>(((b % n) + n) % n) * blockBytes; };

  if (n == 1) {
    if (out != in) reduceKernels().copy(out, in, blockBytes);
    return loomSuccess;
  }
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  LOOM_CHECK(comm->connect({prev, next}, 0));
  Primitives prims(comm, next, prev, 0, args, "reducescatter (ring)");
  const size_t slice = prims.maxElems();
  const int divisor = args.op == loomAvg ? n : 0;

  for (size_t off = 0; off < args.count; off += slice) {
    const size_t len = std::min(slice, args.count - off), at = off * esize;
    LOOM_CHECK(prims.send(block(r - 1) + at, len));
    for (int k = 1; k < n - 1; ++k) LOOM_CHECK(prims.recvReduceSend(block(r - k - 1) + at, len));
    LOOM_CHECK(prims.recvReduceCopy(block(r) + at, out + at, len, divisor));
  }
  return loomSuccess;
}

}  // namespace loom
