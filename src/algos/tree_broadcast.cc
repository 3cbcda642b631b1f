// Pipelined broadcast along a tree of hosts: the first rank of each host (in the order that starts at
// the root) joins a binary tree of the hosts, and the ranks of a host follow their first in a chain.
// Every rank streams slot-sized slices from its parent to each of its children, as the chain does to
// its one next rank.  The first slice reaches the last host after log2(hosts) network hops where the
// chain takes hosts - 1, but a rank with two children sends every byte twice: the cost model
// (algos/selector.cc) picks it for small messages over many hosts and the chain for large ones.  On one
// or two hosts it is the chain, and the selector does not offer it.
#include <algorithm>
#include <memory>
#include <vector>

#include "algos/algorithms.h"
#include "algos/primitives.h"

namespace loom {

namespace {

// This rank's parent (-1 at the root) and children in the tree of hosts with chains inside them.
struct TreePlace {
  int parent = -1;
  std::vector<int> children;
};

TreePlace placeInHostTree(const loomComm* comm, int root) {
  const int n = comm->nranks;
  // Hosts (as the topology view has them, like hier and the selector) in the order they first appear
  // from the root on; each host's ranks in that order.
  const Cluster& c = *comm->cluster;
  std::vector<std::vector<int>> hosts;
  std::vector<int> slotOfHost(c.hosts.size(), -1);
  for (int i = 0; i < n; ++i) {
    const int r = (root + i) % n;
    int& slot = slotOfHost[static_cast<size_t>(c.ranks[r].host)];
    if (slot < 0) slot = static_cast<int>(hosts.size()), hosts.emplace_back();
    hosts[static_cast<size_t>(slot)].push_back(r);
  }
  TreePlace place;
  for (size_t h = 0; h < hosts.size(); ++h) {
    const std::vector<int>& ranks = hosts[h];
    const auto me = std::find(ranks.begin(), ranks.end(), comm->rank);
    if (me == ranks.end()) continue;
    const size_t pos = static_cast<size_t>(me - ranks.begin());
    if (pos > 0) place.parent = ranks[pos - 1];                          // inside the host: the chain
    else if (h > 0) place.parent = hosts[(h - 1) / 2].front();          // a host's first: the host tree
    if (pos + 1 < ranks.size()) place.children.push_back(ranks[pos + 1]);
    if (pos == 0) {
      for (size_t child : {2 * h + 1, 2 * h + 2})
        if (child < hosts.size()) place.children.push_back(hosts[child].front());
    }
  }
  return place;
}

}  // namespace

loomResult_t treeBroadcast(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, root = args.root;
  const size_t esize = typeSize(args.type);
  if (comm->rank == root && args.sendbuff != args.recvbuff)
    reduceKernels().copy(args.recvbuff, args.sendbuff, args.count * esize);
  if (n == 1) return loomSuccess;
  const TreePlace at = placeInHostTree(comm, root);
  std::vector<int> peers = at.children;
  if (at.parent >= 0) peers.push_back(at.parent);
  LOOM_CHECK(comm->connect(peers, 0));
  std::unique_ptr<Primitives> fromParent;
  std::vector<std::unique_ptr<Primitives>> toChild;
  size_t slice = SIZE_MAX;
  if (at.parent >= 0) {
    fromParent = std::make_unique<Primitives>(comm, -1, at.parent, 0, args, "broadcast (tree)");
    slice = fromParent->maxElems();
  }
  for (int c : at.children) {
    toChild.push_back(std::make_unique<Primitives>(comm, c, -1, 0, args, "broadcast (tree)"));
    slice = std::min(slice, toChild.back()->maxElems());
  }
  char* out = static_cast<char*>(args.recvbuff);
  for (size_t off = 0; off < args.count; off += slice) {
    const size_t len = std::min(slice, args.count - off);
    char* piece = out + off * esize;
    if (fromParent) LOOM_CHECK(fromParent->recv(piece, len));
    for (auto& down : toChild) LOOM_CHECK(down->sendFinal(piece, len, Landing::kCaller));  // final
  }
  return loomSuccess;
}

}  // namespace loom
