// One-shot allreduce, for small messages: every rank sends its whole input to every other rank in one
// round of transfers, then reduces the n inputs itself.  One step of latency instead of the ring's
// 2(n-1); the price is n-1 copies of the data per rank, so it only pays for small messages.  The inputs
// are reduced in rank order on every rank, so all ranks get bit-identical results.
#include <vector>

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "algos/reduce_kernels.h"

namespace loom {

loomResult_t oneShotAllReduce(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const size_t bytes = args.count * typeSize(args.type);
  const ReduceKernels& k = reduceKernels();
  char* in = const_cast<char*>(static_cast<const char*>(args.sendbuff));
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) {
    if (in != out) k.copy(out, in, bytes);
    return loomSuccess;
  }
  std::vector<char> inputs(bytes * n);  // every rank's input, in rank order
  k.copy(inputs.data() + r * bytes, in, bytes);
  const uint64_t signature = callSignature(args);
  std::vector<Transfer> transfers;
  for (int i = 1; i < n; ++i) {
    const int to = (r + i) % n, from = (r - i + n) % n;
    transfers.push_back(Transfer{to, true, in, bytes, signature});
    transfers.push_back(Transfer{from, false, inputs.data() + from * bytes, bytes, signature});
  }
  LOOM_CHECK(runTransfers(comm, transfers, "allreduce (one-shot)"));
  const ReduceFn reduce = k.reduce[args.type][args.op == loomAvg ? loomSum : args.op < kNumBuiltinOps ? args.op : loomSum];
  for (int p = 1; p < n; ++p) {
    const void* acc = p == 1 ? inputs.data() : out;
    const char* next = inputs.data() + p * bytes;
    if (p == n - 1 && args.op == loomAvg) k.sumDivide[args.type](out, acc, next, args.count, n);
    else reduce(out, acc, next, args.count);
  }
  return loomSuccess;
}

}  // namespace loom
