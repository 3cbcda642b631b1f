// Pipelined chain reduce: the rank after the root starts each slot-sized slice, every rank on the way
// adds its own data and forwards it, and the root completes it (dividing, for avg) into recvbuff.
#include <algorithm>

#include "algos/algorithms.h"
#include "algos/primitives.h"

namespace loom {

loomResult_t chainReduce(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank, root = args.root;
  const size_t esize = typeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) {
    if (in != out) reduceKernels().copy(out, in, args.count * esize);
    return loomSuccess;
  }
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const int position = (r - root - 1 + 2 * n) % n;  // 0 starts the chain, n-1 is the root
  LOOM_CHECK(comm->connect({prev, next}, 0));
  Primitives prims(comm, position < n - 1 ? next : -1, position > 0 ? prev : -1, 0, args,
                   "reduce (chain)");
  const size_t slice = prims.maxElems();
  const int divisor = args.op == loomAvg ? n : 0;

  for (size_t off = 0; off < args.count; off += slice) {
    const size_t len = std::min(slice, args.count - off), at = off * esize;
    if (position == 0) LOOM_CHECK(prims.send(in + at, len));
    else if (position < n - 1) LOOM_CHECK(prims.recvReduceSend(in + at, len));
    else LOOM_CHECK(prims.recvReduceCopy(in + at, out + at, len, divisor));
  }
  return loomSuccess;
}

}  // namespace loom
