// Recursive halving/doubling allreduce (Rabenseifner): a reduce-scatter by recursive halving, where at
// each of log2(p) steps a rank swaps half of its current segment with the partner whose rank differs in
// one bit and keeps the reduced other half, then an allgather by recursive doubling that retraces the
// steps.  2 log2(p) steps of latency with the ring's bandwidth term.
//
// With n not a power of two, the first 2(n-p) ranks pair up before and after: the even one of each
// pair hands its whole input to the odd one and sits the middle out, then gets the result back.
#include <algorithm>
#include <vector>

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "kernels/reduce_kernels.h"
#include "algos/scratch.h"

namespace loom {

loomResult_t rhdAllReduce(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const size_t esize = typeSize(args.type), count = args.count;
  const ReduceKernels& k = reduceKernels();
  const ReduceFn reduce = k.reduce[args.type][args.op == loomAvg ? loomSum : args.op < kNumBuiltinOps ? args.op : loomSum];
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (in != out) k.copy(out, in, count * esize);
  if (n == 1) return loomSuccess;
  const uint64_t sig = callSignature(args);
  auto exchange = [&](int peer, const char* send, size_t sendCount, char* recv, size_t recvCount) {
    return runTransfers(comm, {Transfer{peer, true, const_cast<char*>(send), sendCount * esize, sig},
                               Transfer{peer, false, recv, recvCount * esize, sig}},
                        "allreduce (rhd)");
  };
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  ScratchLease scratch(ScratchUse::kReceived, count * esize);
  // Fold the extra ranks in: among the first 2*rem ranks the even one gives its data to the odd one.
  int vr;  // rank among the p that take part in the middle, -1 for those that sit out
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      LOOM_CHECK(runTransfers(comm, {Transfer{r + 1, true, out, count * esize, sig}}, "allreduce (rhd)"));
      vr = -1;
    } else {
      LOOM_CHECK(runTransfers(comm, {Transfer{r - 1, false, scratch.data(), count * esize, sig}}, "allreduce (rhd)"));
      reduce(out, scratch.data(), out, count);
      vr = r / 2;
    }
  } else {
    vr = r - rem;
  }
  auto realRank = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  if (vr >= 0) {
    // Reduce-scatter by recursive halving: keep the half on the side of our bit, hand over the other.
    std::vector<std::pair<size_t, size_t>> segments;  // [lo, hi) before each step
    size_t lo = 0, hi = count;
    for (int mask = p / 2; mask >= 1; mask /= 2) {
      const int partner = realRank(vr ^ mask);
      const size_t mid = lo + (hi - lo) / 2;
      segments.emplace_back(lo, hi);
      const bool upper = (vr & mask) != 0;
      const size_t keepLo = upper ? mid : lo, keepHi = upper ? hi : mid;
      const size_t giveLo = upper ? lo : mid, giveHi = upper ? mid : hi;
      LOOM_CHECK(exchange(partner, out + giveLo * esize, giveHi - giveLo, scratch.data(), keepHi - keepLo));
      // Both partners add in the same order (lower rank's data first) so that results agree bit for bit.
      char* mine = out + keepLo * esize;
      const char* theirs = scratch.data();
      const bool last = mask == 1;
      const void* a = upper ? static_cast<const void*>(theirs) : mine;
      const void* b = upper ? static_cast<const void*>(mine) : theirs;
      if (last && args.op == loomAvg) k.sumDivide[args.type](mine, a, b, keepHi - keepLo, n);
      else reduce(mine, a, b, keepHi - keepLo);
      lo = keepLo;
      hi = keepHi;
    }
    // Allgather by recursive doubling: retrace the steps, swapping the complete halves.
    for (int mask = 1, step = static_cast<int>(segments.size()) - 1; mask < p; mask *= 2, --step) {
      const int partner = realRank(vr ^ mask);
      const size_t segLo = segments[step].first, segHi = segments[step].second;
      const size_t mid = segLo + (segHi - segLo) / 2;
      const bool upper = (vr & mask) != 0;
      const size_t haveLo = upper ? mid : segLo, haveHi = upper ? segHi : mid;
      const size_t getLo = upper ? segLo : mid, getHi = upper ? mid : segHi;
      LOOM_CHECK(exchange(partner, out + haveLo * esize, haveHi - haveLo, out + getLo * esize, getHi - getLo));
    }
  }
  // Unfold: the odd rank of each pair hands the result back.
  if (r < 2 * rem) {
    if (r % 2 == 1) LOOM_CHECK(runTransfers(comm, {Transfer{r - 1, true, out, count * esize, sig}}, "allreduce (rhd)"));
    else LOOM_CHECK(runTransfers(comm, {Transfer{r + 1, false, out, count * esize, sig}}, "allreduce (rhd)"));
  }
  return loomSuccess;
}

}  // namespace loom
