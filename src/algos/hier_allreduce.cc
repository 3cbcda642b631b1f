// Hierarchical allreduce: inside each host the ranks reduce to their host's leader along a chain (shared
// memory, or NVLink for GPUs), the leaders allreduce among themselves around a ring (the network), and
// each leader broadcasts the result back along its host's chain.  Only one rank per host crosses the
// network, which is what matters when the network is the narrow link.  The hosts come from the
// communicator's topology view (runtime/comm_topology.h).
#include <vector>

#include "algos/algorithms.h"

namespace loom {

loomResult_t hierAllReduce(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const loom::Cluster& c = *comm->cluster;
  // My host's ranks, in rank order: the last one of the chain (the leader) is the lowest rank.
  std::vector<int> local, leaders;
  for (int q = 0; q < n; ++q) {
    if (c.sameHost(q, r)) local.push_back(q);
    bool first = true;
    for (int p = 0; p < q && first; ++p) first = !c.sameHost(p, q);
    if (first) leaders.push_back(q);
  }
  const int leader = local.front();
  std::vector<int> up(local.rbegin(), local.rend());  // ..., leader: the chain ends at the leader
  const int divisor = args.op == loomAvg ? n : 0;
  const bool oneHost = leaders.size() == 1;
  // Reduce inside the host (the divide happens here only when there is nothing more to add).
  LOOM_CHECK(chainReduceGroup(comm, args, up, 0, args.sendbuff, args.recvbuff, oneHost ? divisor : 0));
  if (r == leader && !oneHost) {
    LOOM_CHECK(ringAllReduceGroup(comm, args, leaders, 0, args.recvbuff, args.recvbuff, divisor));
  }
  std::vector<int> down(local.begin(), local.end());  // leader first
  return chainBroadcastGroup(comm, args, down, 0, args.recvbuff);
}

}  // namespace loom
