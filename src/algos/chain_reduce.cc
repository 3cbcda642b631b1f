// Pipelined chain reduce: the first rank of the chain starts each slot-sized slice, every rank on the way
// adds its own data and forwards it, and the last rank (the root) completes it into its output.
#include <algorithm>

#include "algos/algorithms.h"
#include "algos/primitives.h"

namespace loom {

loomResult_t chainReduceGroup(loomComm* comm, const CollArgs& args, const std::vector<int>& chain, int channel,
                              const void* input, void* output, int divisor) {
  const int n = static_cast<int>(chain.size());
  const size_t esize = typeSize(args.type);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  ChainPlace place;
  LOOM_CHECK(joinChain(comm, chain, channel, &place));
  if (place.position == n) return loomSuccess;
  if (n == 1) {  // callers divide by more than one rank only on longer chains
    if (in != out) reduceKernels().copy(out, in, args.count * esize);
    return loomSuccess;
  }
  const int position = place.position;
  Primitives prims(comm, place.next, place.prev, channel, args, "reduce (chain)");
  const size_t slice = prims.maxElems();
  for (size_t off = 0; off < args.count; off += slice) {
    const size_t len = std::min(slice, args.count - off), at = off * esize;
    // Sent from where it lies: a caller that writes the input afterwards (hier allreduce, in place) does it
    // with a result that needs this slice to have arrived.
    if (position == 0) LOOM_CHECK(prims.sendFinal(in + at, len, Landing::kSlot));
    else if (position < n - 1) LOOM_CHECK(prims.recvReduceSend(in + at, len));
    else LOOM_CHECK(prims.recvReduceCopy(in + at, out + at, len, divisor));
  }
  return loomSuccess;
}

loomResult_t chainReduce(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, root = args.root;
  if (n == 1) {
    if (args.sendbuff != args.recvbuff)
      reduceKernels().copy(args.recvbuff, args.sendbuff, args.count * typeSize(args.type));
    return loomSuccess;
  }
  std::vector<int> chain;
  for (int i = 1; i <= n; ++i) chain.push_back((root + i) % n);  // root+1, ..., root
  return chainReduceGroup(comm, args, chain, 0, args.sendbuff, args.recvbuff, args.op == loomAvg ? n : 0);
}

}  // namespace loom
