// One-shot allreduce, for small messages: every rank sends its whole input to every other rank in one
// round of transfers, then reduces the n inputs itself.  One step of latency instead of the ring's
// 2(n-1); the price is n-1 copies of the data per rank, so it only pays for small messages.  The inputs
// are reduced in rank order on every rank, so all ranks get bit-identical results.
#include <algorithm>
#include <optional>
#include <vector>

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "algos/primitives.h"
#include "kernels/reduce_kernels.h"
#include "algos/scratch.h"

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
  // Data that fits in one slot goes straight through the slots: send to every peer, then add the peers'
  // slots in rank order (each in place, no gathering buffer).  One hand-over of latency.
  // Reused by the thread's next calls: a small call must not pay for allocations (two vectors were
  // 5% of an 8-byte call).
  thread_local std::vector<int> peers;
  thread_local std::vector<Primitives> prims;
  peers.clear();
  prims.clear();
  for (int p = 0; p < n; ++p)
    if (p != r) peers.push_back(p);
  LOOM_CHECK(comm->connect(peers, 0));
  prims.reserve(n - 1);
  size_t slotElems = SIZE_MAX;
  for (int p : peers) {
    prims.emplace_back(comm, p, p, 0, args, "allreduce (one-shot)");
    slotElems = std::min(slotElems, prims.back().maxElems());
  }
  auto with = [&](int p) -> Primitives& { return prims[p < r ? p : p - 1]; };
  if (args.count <= slotElems) {
    for (int p : peers) LOOM_CHECK(with(p).send(in, args.count));
    // In place, rank 0's data lands in our buffer before our own input is added: keep a copy of it.
    std::optional<ScratchLease> own;
    if (in == out && r != 0) {
      own.emplace(ScratchUse::kOwnInput, bytes);
      k.copy(own->data(), in, bytes);
      in = own->data();
    }
    // acc = x0 op x1 op ... in rank order on every rank (two-operand ops commute exactly, so the
    // primitive's "received op accumulated" equals "accumulated op received" bit for bit).
    const void* acc = in;
    for (int p = 0; p < n; ++p) {
      if (p == r) {
        if (p == 0) continue;  // our input starts the sum
        // Our own input joins the accumulation in its rank position.
        const bool last = p == n - 1;
        if (last && args.op == loomAvg) k.sumDivide[args.type](out, acc, in, args.count, n);
        else k.reduce[args.type][args.op == loomAvg || args.op >= kNumBuiltinOps ? loomSum : args.op](out, acc, in, args.count);
        acc = out;
        continue;
      }
      if (p == 0 && r != 0) {  // rank 0's input starts the sum: just take it
        LOOM_CHECK(with(p).recv(out, args.count));
        acc = out;
        continue;
      }
      const bool last = p == n - 1;
      LOOM_CHECK(with(p).recvReduceCopy(acc, out, args.count, last && args.op == loomAvg ? n : 0));
      acc = out;
    }
    return loomSuccess;
  }
  ScratchLease inputs(ScratchUse::kGathered, bytes * n);  // every rank's input, in rank order
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
