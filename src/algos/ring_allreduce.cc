// Ring allreduce.
//
// The buffer is cut into n segments, one per rank (sizes differ by at most one element).  Around the
// ring, in 2(n-1) steps, each rank:
//   reduce-scatter  step k = 0 .. n-1: receives segment (r-k) from its predecessor, adds its own data,
//                   passes it on; at k = n-1 segment r+1 is complete (and divided, for avg) and stored.
//   allgather       step j = 1 .. n-1: receives a complete segment, stores it, passes it on (but the last).
// Every segment is walked in slices of one transport slot, slice column by slice column, so the ring is
// a pipeline: a slice is being reduced on one link while the next slice is already in flight on another.
#include <algorithm>
#include <cstring>

#include "algos/algorithms.h"
#include "algos/primitives.h"

namespace loom {

loomResult_t ringAllReduceGroup(loomComm* comm, const CollArgs& args, const std::vector<int>& group, int channel,
                                const void* input, void* output, int divisor) {
  const int n = static_cast<int>(group.size());
  const int r = static_cast<int>(std::find(group.begin(), group.end(), comm->rank) - group.begin());
  const size_t esize = typeSize(args.type);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  if (r == n) return loomSuccess;  // not in the group
  if (n == 1) {
    if (in != out) std::memmove(out, in, args.count * esize);
    return loomSuccess;  // callers divide by more than one rank only on larger groups
  }
  const int next = group[(r + 1) % n], prev = group[(r + n - 1) % n];
  LOOM_CHECK(comm->connect({prev, next}, channel));
  Primitives prims(comm, next, prev, channel, args, "allreduce (ring)");

  // Segment s covers elements [segStart(s), segStart(s+1)).
  const size_t base = args.count / n, extra = args.count % n;
  auto segStart = [&](int s) { return s * base + std::min<size_t>(s, extra); };
  const size_t longest = base + (extra ? 1 : 0);
  const size_t slice = prims.maxElems();

  for (size_t col = 0; col * slice < longest; ++col) {
    // Offset and length of this column's slice of segment s (possibly empty: counts smaller than n).
    auto part = [&](int s, size_t* off, size_t* len) {
      s = ((s % n) + n) % n;
      size_t begin = segStart(s), end = segStart(s + 1);
      size_t lo = std::min(begin + col * slice, end);
      *off = lo * esize;
      *len = std::min(lo + slice, end) - lo;
    };
    size_t off, len;

    part(r, &off, &len);
    LOOM_CHECK(prims.send(in + off, len));
    for (int k = 1; k < n - 1; ++k) {
      part(r - k, &off, &len);
      LOOM_CHECK(prims.recvReduceSend(in + off, len));
    }
    part(r + 1, &off, &len);
    LOOM_CHECK(prims.recvReduceCopySend(in + off, out + off, len, divisor));

    for (int j = 1; j < n - 1; ++j) {
      part(r + 1 - j, &off, &len);
      LOOM_CHECK(prims.recvCopySend(out + off, len));
    }
    part(r + 2, &off, &len);
    LOOM_CHECK(prims.recv(out + off, len));
  }
  return loomSuccess;
}

loomResult_t ringAllReduce(loomComm* comm, const CollArgs& args) {
  std::vector<int> all(comm->nranks);
  for (int i = 0; i < comm->nranks; ++i) all[i] = i;
  return ringAllReduceGroup(comm, args, all, 0, args.sendbuff, args.recvbuff, args.op == loomAvg ? comm->nranks : 0);
}

}  // namespace loom
