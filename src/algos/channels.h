// Channels: a large collective split into independent shares, each running its algorithm over its own
// ring of the topology's plan (comm->routes.rings: one per NIC rail across hosts, each host's ranks in
// device-locality order) on its own connections.  One rank thread advances every share in turn, one
// step each (algos/ring_allreduce.cc), so the transports of all channels carry data at once: their I/O
// threads and NICs work in parallel while the rank reduces.  Every rank interleaves the same steps in
// the same order, so the shares cannot wait on each other in a cycle.
#pragma once

#include <cstddef>
#include <vector>

#include "core/comm.h"

namespace loom {

constexpr int kMaxChannels = 16;

// The ring of `channel`: the planned ring (channels beyond the planned rings reuse them in turn), or
// rank order where the plan does not hold every rank of the communicator once.
std::vector<int> planRingOrder(const loomComm* comm, int channel);

// How many channels a ring call of `bytes` uses: LOOM_NCHANNELS (0: the number of planned rings), but
// never so many that a channel's share per rank is under one slot (small calls stay on one channel).
int ringChannels(const loomComm* comm, size_t bytes, size_t slotBytes);

// LOOM_NCHANNELS out of range is an error at init.
loomResult_t checkChannels();

}  // namespace loom
