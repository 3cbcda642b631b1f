// Channels: a large collective split into independent shares, each running its algorithm over its own
// ring of the topology's plan (comm->routes.rings: one per NIC rail across hosts, each host's ranks in
// device-locality order) on its own connections.  One rank thread advances every share in turn, one
// step each (algos/ring_allreduce.cc), so the transports of all channels carry data at once: their I/O
// threads and NICs work in parallel while the rank reduces.  Every rank interleaves the same steps in
// the same order, so the shares cannot wait on each other in a cycle.
#pragma once

#include <cstddef>
#include <vector>

#include "algos/primitives.h"
#include "runtime/comm.h"
#include "base/error.h"

namespace loom {

constexpr int kMaxChannels = 16;

// The ring of `channel`: the planned ring (channels beyond the planned rings reuse them in turn), or
// rank order where the plan does not hold every rank of the communicator once.
std::vector<int> planRingOrder(const loomComm* comm, int channel);

// How many channels a ring call of `bytes` uses: LOOM_NCHANNELS (0: the number of planned rings), but
// never so many that a channel's share per rank is under one slot (small calls stay on one channel).
int ringChannels(const loomComm* comm, size_t bytes, size_t slotBytes);


// Runs a call's shares (one per channel): starts each, then advances every share by one step in turn
// until all are done, in the same order on every rank.  A Share has loomResult_t start(), step() and
// bool done() const; start() may finish a share that has nothing to do.
template <typename Share>
loomResult_t runShares(std::vector<Share>& shares) {
  for (Share& s : shares) LOOM_CHECK(s.start());
  for (bool left = true; left;) {
    left = false;
    for (Share& s : shares) {
      if (s.done()) continue;
      LOOM_CHECK(s.step());
      left = left || !s.done();
    }
  }
  return loomSuccess;
}

// Splits a ring call of `bytes` in all over its channels (ringChannels) and runs the shares:
// make(c, ring, first, count) builds channel c's Share over c's planned ring, carrying elements
// [first, first + count) of the `elements` each block (or the whole buffer) holds.
template <typename Share, typename Make>
loomResult_t runChannelShares(loomComm* comm, size_t elements, size_t bytes, Make make) {
  const bool acrossHosts = comm->cluster && comm->cluster->hosts.size() > 1;
  const int channels = ringChannels(comm, bytes, plannedStepBytes(comm, acrossHosts));
  std::vector<Share> shares;
  shares.reserve(channels);
  for (int c = 0; c < channels; ++c) {
    const size_t k = static_cast<size_t>(channels);
    const size_t first = elements * static_cast<size_t>(c) / k, end = elements * static_cast<size_t>(c + 1) / k;
    shares.push_back(make(c, planRingOrder(comm, c), first, end - first));
  }
  return runShares(shares);
}

}  // namespace loom
