// Collective algorithms.  Each reads top to bottom in its own file and is written only with the steps of
// algos/primitives.h, so it runs unchanged over every transport.
#pragma once

#include <vector>

#include "runtime/collective.h"

namespace loom {

// Reduce-scatter then allgather around a ring, pipelined in slot-sized slices: 2(n-1)/n of the data
// crosses each link, the bandwidth optimum.
loomResult_t ringAllReduce(loomComm* comm, const CollArgs& args);
// Other allreduce algorithms, each in its own file (see there for how it works and when it pays):
loomResult_t treeAllReduce(loomComm* comm, const CollArgs& args);     // double binary tree
loomResult_t rhdAllReduce(loomComm* comm, const CollArgs& args);      // recursive halving/doubling
loomResult_t oneShotAllReduce(loomComm* comm, const CollArgs& args);  // everyone reads everyone: small data
loomResult_t hierAllReduce(loomComm* comm, const CollArgs& args);     // reduce in host, across, broadcast

// The ring and chain steps over any ordered group of ranks on one channel, for the algorithms built from
// them (hierarchical): ranks outside the group return at once.  `divisor` > 0 divides the result (avg).
loomResult_t ringAllReduceGroup(loomComm* comm, const CollArgs& args, const std::vector<int>& group, int channel,
                                const void* input, void* output, int divisor);
loomResult_t chainReduceGroup(loomComm* comm, const CollArgs& args, const std::vector<int>& chain, int channel,
                              const void* input, void* output, int divisor);  // result on chain.back()
loomResult_t chainBroadcastGroup(loomComm* comm, const CollArgs& args, const std::vector<int>& chain, int channel,
                                 void* buffer);  // from chain.front()

// count = elements per rank.  Each block crosses n-1 links: (n-1)/n of the output per link.
loomResult_t ringAllGather(loomComm* comm, const CollArgs& args);
loomResult_t ringReduceScatter(loomComm* comm, const CollArgs& args);
// Slices stream along the ring from the root (broadcast) or towards it (reduce).
loomResult_t chainBroadcast(loomComm* comm, const CollArgs& args);
// Slices stream down a binary tree of the hosts, and along a chain inside each (tree_broadcast.cc).
loomResult_t treeBroadcast(loomComm* comm, const CollArgs& args);
loomResult_t chainReduce(loomComm* comm, const CollArgs& args);
// Every rank sends its block straight to each other rank: on one host each receiver makes a single copy
// from the owner's buffer (transport single-copy reads) instead of one per ring hop in and out of a FIFO.
loomResult_t flatAllGather(loomComm* comm, const CollArgs& args);
// count = elements per block; every pair exchanges its blocks directly (algos/p2p.h).
loomResult_t allToAll(loomComm* comm, const CollArgs& args);
// Ring reduce-scatter / allreduce of point-to-point transfers only, reducing where the buffers lie (GPU
// kernels on GPU buffers): what runs where GPU buffers cross hosts by GPUDirect RDMA (transfer_ring.cc).
loomResult_t transferRingReduceScatter(loomComm* comm, const CollArgs& args);
loomResult_t transferRingAllReduce(loomComm* comm, const CollArgs& args);
// Broadcast / reduce along the chain of the ring order in large chunks, of transfers only, for the same
// reason (transfer_chain.cc).
loomResult_t transferChainBroadcast(loomComm* comm, const CollArgs& args);
loomResult_t transferChainReduce(loomComm* comm, const CollArgs& args);

}  // namespace loom
