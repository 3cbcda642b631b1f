// Double binary tree allreduce.  The data is split in two halves; half t is reduced up tree t to its
// root and broadcast back down it (topo/routes.h builds the two trees so that a rank that is interior
// in one is a leaf in the other, which evens out the work).  Tree t runs on its own channel.  Both
// trees stream slot-sized slices: first every slice goes up, then every slice comes down, each a
// pipeline, so the latency is 2 log2(n) hops where the ring has 2(n-1).
#include <algorithm>
#include <memory>
#include <vector>

#include "algos/algorithms.h"
#include "algos/primitives.h"
#include "topo/routes.h"

namespace loom {

namespace {

struct TreeSide {
  int parent = -1;
  std::vector<int> children;
  size_t begin = 0, end = 0;  // the half of the data (elements) this tree carries
  std::vector<std::unique_ptr<Primitives>> fromChild, toChild;
  std::unique_ptr<Primitives> toParent, fromParent;
};

}  // namespace

loomResult_t treeAllReduce(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const size_t esize = typeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  if (n == 1) {
    if (in != out) reduceKernels().copy(out, in, args.count * esize);
    return loomSuccess;
  }
  std::vector<int> parents[2];
  doubleBinaryTree(n, parents);
  const int divisor = args.op == loomAvg ? n : 0;
  TreeSide side[2];
  size_t slice = SIZE_MAX;
  for (int t = 0; t < 2; ++t) {
    TreeSide& s = side[t];
    s.parent = parents[t][r];
    for (int q = 0; q < n; ++q)
      if (parents[t][q] == r) s.children.push_back(q);
    s.begin = t == 0 ? 0 : args.count / 2;
    s.end = t == 0 ? args.count / 2 : args.count;
    std::vector<int> peers = s.children;
    if (s.parent >= 0) peers.push_back(s.parent);
    LOOM_CHECK(comm->connect(peers, t));
    for (int c : s.children) {
      s.fromChild.push_back(std::make_unique<Primitives>(comm, -1, c, t, args, "allreduce (tree up)"));
      s.toChild.push_back(std::make_unique<Primitives>(comm, c, -1, t, args, "allreduce (tree down)"));
      slice = std::min({slice, s.fromChild.back()->maxElems(), s.toChild.back()->maxElems()});
    }
    if (s.parent >= 0) {
      s.toParent = std::make_unique<Primitives>(comm, s.parent, -1, t, args, "allreduce (tree up)");
      s.fromParent = std::make_unique<Primitives>(comm, -1, s.parent, t, args, "allreduce (tree down)");
      slice = std::min({slice, s.toParent->maxElems(), s.fromParent->maxElems()});
    }
  }
  // Up: for each slice of each half, add the children's partial sums to our input and pass it on; the
  // root completes (and divides, for avg).
  const size_t longest = std::max(side[0].end - side[0].begin, side[1].end - side[1].begin);
  for (size_t off = 0; off < longest; off += slice) {
    for (TreeSide& s : side) {
      const size_t lo = std::min(s.begin + off, s.end), len = std::min(s.begin + off + slice, s.end) - lo;
      if (len == 0) continue;
      const char* local = in + lo * esize;
      char* acc = out + lo * esize;
      for (size_t c = 0; c < s.children.size(); ++c) {
        const bool last = c + 1 == s.children.size();
        LOOM_CHECK(s.fromChild[c]->recvReduceCopy(c == 0 ? local : acc, acc, len, last && s.parent < 0 ? divisor : 0));
      }
      // Sent from where it lies: in place (or in `acc`) it is overwritten only by the result, which comes
      // down after the parent has received this.
      if (s.parent >= 0) LOOM_CHECK(s.toParent->sendFinal(s.children.empty() ? local : acc, len, Landing::kSlot));
    }
  }
  // Down: the root's result flows back to every rank.
  for (size_t off = 0; off < longest; off += slice) {
    for (TreeSide& s : side) {
      const size_t lo = std::min(s.begin + off, s.end), len = std::min(s.begin + off + slice, s.end) - lo;
      if (len == 0) continue;
      char* acc = out + lo * esize;
      if (s.parent >= 0) LOOM_CHECK(s.fromParent->recv(acc, len));
      for (auto& down : s.toChild) LOOM_CHECK(down->sendFinal(acc, len, Landing::kCaller));  // the result: final
    }
  }
  return loomSuccess;
}

}  // namespace loom
