#include "algos/channels.h"

#include <algorithm>

#include "base/error.h"
#include "base/params.h"

namespace loom {

std::vector<int> planRingOrder(const loomComm* comm, int channel) {
  const int n = comm->nranks;
  const auto& rings = comm->routes.rings;
  if (!rings.empty()) {
    const std::vector<int>& planned = rings[static_cast<size_t>(channel) % rings.size()].ranks;
    std::vector<char> seen(n, 0);
    bool whole = static_cast<int>(planned.size()) == n;
    for (size_t i = 0; whole && i < planned.size(); ++i) {
      const int r = planned[i];
      whole = r >= 0 && r < n && !seen[r];
      if (whole) seen[r] = 1;
    }
    if (whole) return planned;
  }
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  return order;
}

int ringChannels(const loomComm* comm, size_t bytes, size_t slotBytes) {
  const long long wanted = params().NCHANNELS > 0 ? params().NCHANNELS
                                                  : static_cast<long long>(std::max<size_t>(comm->routes.rings.size(), 1));
  return channelsFor(wanted, bytes, comm->nranks, slotBytes, kMaxChannels);
}

}  // namespace loom
