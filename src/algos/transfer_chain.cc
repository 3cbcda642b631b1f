// Broadcast and reduce along a chain of point-to-point transfers only, pipelined in chunks, reducing
// where the buffers lie (GPU kernels on GPU buffers, the CPU's on host ones): what runs where GPU
// buffers cross hosts by GPUDirect RDMA (device/gdr_path.h).  The selector runs these on every rank when
// every rank may use GPUDirect RDMA (algos/selector.cc), host buffers included, since all ranks must run
// the same steps.
//
// The chain is root, root+1, ..., root-1; a rank's position is its distance from the root.  The buffer
// goes in K chunks of about kChunkBytes.
//   Broadcast: the root sends every chunk to position 1.  At step t a rank receives chunk t from its
//   predecessor and passes chunk t-1 (received at step t-1) on to its successor, so chunk t leaves the
//   root at "time" t and reaches position p at time t+p: K + n - 2 steps for the whole chain.
//   Reduce: the same chain the other way.  The last position sends its input's chunks; at step t a
//   middle rank receives the partial sum of chunk t from its successor, adds its own input's chunk to it
//   (in one of two scratch buffers, taking turns) and passes the sum of chunk t-1 to its predecessor;
//   the root adds its input to what arrives and writes the result (avg divides there, once).
// Chunks, not slot-sized slices as chain_broadcast.cc: each transfer of a GPU buffer is one RDMA READ
// of the whole chunk, and a step costs a round trip, so chunks are large.
#include <vector>

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "algos/transfer_steps.h"
#include "runtime/comm.h"
#include "base/datatypes.h"
#include "device/device_call.h"

namespace loom {

namespace {

constexpr size_t kChunkBytes = size_t{4} << 20;

// The chunks of a call's buffer: K of about kChunkBytes, at least one element each.
Chunks chunksOf(const CollArgs& args) {
  const size_t bytes = args.count * typeSize(args.type);
  const size_t k = std::max<size_t>(1, std::min(args.count, (bytes + kChunkBytes - 1) / kChunkBytes));
  return Chunks{args.count, static_cast<int>(k)};
}

}  // namespace

loomResult_t transferChainBroadcast(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const int position = (r - args.root + n) % n, next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t es = typeSize(args.type);
  const uint64_t signature = callSignature(args);
  char* buffer = static_cast<char*>(args.recvbuff);
  if (position == 0)
    LOOM_CHECK(copyToSelf(comm, args.sendbuff, buffer, args.count * es, signature, "broadcast (root's copy)"));
  if (n == 1 || args.count == 0) return loomSuccess;
  const Chunks chunks = chunksOf(args);
  const int k = chunks.n;
  auto chunk = [&](int c, int peer, bool send) {
    return Transfer{peer, send, buffer + chunks.offset(c) * es, chunks.size(c) * es, signature};
  };
  if (position == 0) {  // every chunk, in order: the successor takes them as they come
    std::vector<Transfer> all;
    for (int c = 0; c < k; ++c) all.push_back(chunk(c, next, true));
    return runTransfers(comm, all, "broadcast (chain of transfers)");
  }
  for (int t = 0; t <= k; ++t) {
    std::vector<Transfer> step;
    if (t < k) step.push_back(chunk(t, prev, false));
    if (t >= 1 && position < n - 1) step.push_back(chunk(t - 1, next, true));
    if (!step.empty()) LOOM_CHECK(runTransfers(comm, step, "broadcast (chain of transfers)"));
  }
  return loomSuccess;
}

loomResult_t transferChainReduce(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const int position = (r - args.root + n) % n, next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t es = typeSize(args.type);
  const uint64_t signature = callSignature(args);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) return copyToSelf(comm, in, out, args.count * es, signature, "reduce (one rank)");
  if (args.count == 0) return loomSuccess;
  const Chunks chunks = chunksOf(args);
  const int k = chunks.n;
  if (position == n - 1) {  // the far end: its input as it is
    std::vector<Transfer> all;
    for (int c = 0; c < k; ++c)
      all.push_back(Transfer{prev, true, const_cast<char*>(in + chunks.offset(c) * es), chunks.size(c) * es, signature});
    return runTransfers(comm, all, "reduce (chain of transfers)");
  }
  TwinScratch scratch;
  LOOM_CHECK(scratch.get(comm, in, chunks.size(0) * es));
  // Avg adds up along the chain and divides once, at the root.
  const loomRedOp_t along = args.op == loomAvg ? loomSum : args.op;
  for (int t = 0; t <= k; ++t) {
    std::vector<Transfer> step;
    if (t < k) step.push_back(Transfer{next, false, scratch[t % 2], chunks.size(t) * es, signature});
    if (t >= 1 && position > 0)
      step.push_back(Transfer{prev, true, scratch[(t - 1) % 2], chunks.size(t - 1) * es, signature});
    LOOM_CHECK(runTransfers(comm, step, "reduce (chain of transfers)"));
    if (t == k) break;
    const size_t at = chunks.offset(t) * es;
    char* sum = position == 0 ? out + at : scratch[t % 2];
    LOOM_CHECK(combineWhereItLies(comm, scratch.device(), sum, scratch[t % 2], in + at, chunks.size(t), args.type,
                                  position == 0 ? args.op : along, n));
  }
  return loomSuccess;
}

}  // namespace loom
