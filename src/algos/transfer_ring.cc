// Ring reduce-scatter and allreduce made of point-to-point transfers only (algos/p2p.h), reducing where
// the buffers lie: with the device's kernels on GPU buffers, with the CPU's on host buffers.  Over
// GPUDirect RDMA the bytes go from GPU to GPU by RDMA and the CPU never touches them
// (device/gdr_path.h); the selector runs these on every rank when every rank may use GPUDirect RDMA
// (algos/selector.cc), host buffers included, since all ranks must run the same steps.
//
// Reduce-scatter, n ranks, chunk c of the input is rank c's share of the result.  At step s (0..n-2)
// rank r sends chunk (r-s-1) to r+1 and receives chunk (r-s-2) from r-1 into a scratch buffer, then
// adds its own input's chunk to it; what it adds becomes what it sends next.  After n-1 steps chunk r
// holds every rank's input: it is written to the output.  Two scratch buffers take turns, so the one
// being sent is never the one being received into.  Allreduce then gathers the chunks from their
// owners (every rank sends its chunk to every other, as the flat allgather does).
//
// Slower than ring_allreduce.cc on host memory (one step at a time, no fused receive-reduce-send in
// slot-sized slices), which is why it runs only where GPU buffers need it.
#include <vector>

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "algos/transfer_steps.h"
#include "runtime/comm.h"
#include "base/datatypes.h"
#include "device/device_call.h"

namespace loom {

namespace {

// The reduce-scatter phase: chunk r of the reduction of every rank's `in` lands in `out`.
loomResult_t reduceScatterSteps(loomComm* comm, const CollArgs& args, const Chunks& chunks, const char* in, char* out) {
  const int n = comm->nranks, r = comm->rank;
  const size_t es = typeSize(args.type);
  const uint64_t signature = callSignature(args);
  if (n == 1) return copyToSelf(comm, in, out, chunks.size(0) * es, signature, "reduce-scatter (one rank)");
  TwinScratch scratch;
  LOOM_CHECK(scratch.get(comm, out, chunks.size(0) * es));
  // Avg adds up along the ring and divides once, on the last addition.
  const loomRedOp_t along = args.op == loomAvg ? loomSum : args.op;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const char* sending = in + chunks.offset((r + n - 1) % n) * es;
  for (int s = 0; s < n - 1; ++s) {
    const int sent = (r - s - 1 + 2 * n) % n, received = (r - s - 2 + 2 * n) % n;
    char* landing = scratch[s % 2];
    LOOM_CHECK(runTransfers(comm,
                            {Transfer{next, true, const_cast<char*>(sending), chunks.size(sent) * es, signature},
                             Transfer{prev, false, landing, chunks.size(received) * es, signature}},
                            "reduce-scatter (point to point)"));
    const bool last = s == n - 2;  // then received == r
    char* sum = last ? out : landing;
    LOOM_CHECK(combineWhereItLies(comm, scratch.device(), sum, landing, in + chunks.offset(received) * es,
                                  chunks.size(received), args.type, last ? args.op : along, n));
    sending = sum;
  }
  return loomSuccess;
}

}  // namespace

loomResult_t transferRingReduceScatter(loomComm* comm, const CollArgs& args) {
  const Chunks chunks{args.count * static_cast<size_t>(comm->nranks), comm->nranks};
  return reduceScatterSteps(comm, args, chunks, static_cast<const char*>(args.sendbuff),
                            static_cast<char*>(args.recvbuff));
}

loomResult_t transferRingAllReduce(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const size_t es = typeSize(args.type);
  const Chunks chunks{args.count, n};
  char* out = static_cast<char*>(args.recvbuff);
  LOOM_CHECK(reduceScatterSteps(comm, args, chunks, static_cast<const char*>(args.sendbuff), out + chunks.offset(r) * es));
  // Every chunk from its owner.
  const uint64_t signature = callSignature(args);
  std::vector<Transfer> transfers;
  for (int i = 1; i < n; ++i) {
    const int to = (r + i) % n, from = (r - i + n) % n;
    transfers.push_back(Transfer{to, true, out + chunks.offset(r) * es, chunks.size(r) * es, signature});
    transfers.push_back(Transfer{from, false, out + chunks.offset(from) * es, chunks.size(from) * es, signature});
  }
  return runTransfers(comm, transfers, "allreduce (point to point): allgather");
}

}  // namespace loom
