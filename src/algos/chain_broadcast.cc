// Pipelined chain broadcast: the root streams slot-sized slices to the next rank of the chain, every rank
// stores each slice and forwards it, the last rank only stores.  One pass over each link carries the
// whole message: bandwidth-optimal for large messages; the latency is n-1 hops for the first slice.
#include <algorithm>

#include "algos/algorithms.h"
#include "algos/primitives.h"

namespace loom {

loomResult_t chainBroadcastGroup(loomComm* comm, const CollArgs& args, const std::vector<int>& chain, int channel,
                                 void* buffer) {
  const int n = static_cast<int>(chain.size());
  ChainPlace at;
  LOOM_CHECK(joinChain(comm, chain, channel, &at));
  if (n <= 1 || at.position == n) return loomSuccess;
  const int position = at.position;
  Primitives prims(comm, at.next, at.prev, channel, args, "broadcast (chain)");
  const size_t slice = prims.maxElems(), esize = typeSize(args.type);
  char* out = static_cast<char*>(buffer);
  for (size_t off = 0; off < args.count; off += slice) {
    const size_t len = std::min(slice, args.count - off);
    char* piece = out + off * esize;
    if (position == 0) LOOM_CHECK(prims.sendFinal(piece, len, Landing::kCaller));  // the root's buffer stays as it is
    else if (position < n - 1) LOOM_CHECK(prims.recvCopySend(piece, len));
    else LOOM_CHECK(prims.recv(piece, len));
  }
  return loomSuccess;
}

loomResult_t chainBroadcast(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, root = args.root;
  if (comm->rank == root && args.sendbuff != args.recvbuff)
    reduceKernels().copy(args.recvbuff, args.sendbuff, args.count * typeSize(args.type));
  std::vector<int> chain;
  for (int i = 0; i < n; ++i) chain.push_back((root + i) % n);  // root, root+1, ..., root-1
  return chainBroadcastGroup(comm, args, chain, 0, args.recvbuff);
}

}  // namespace loom
