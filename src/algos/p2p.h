// Point-to-point transfers: what loomSend/loomRecv, groups and alltoall are made of.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/collective.h"
#include "runtime/comm.h"

namespace loom {

struct Transfer {
  int peer;
  bool send;         // false: receive
  char* buffer;      // read from when sending, written to when receiving
  size_t bytes;
  uint64_t signature;  // the call's signature: both ends must agree (runtime/collective.h)
};

// The transfer a loomSend / loomRecv call stands for.
Transfer transferOf(const CollArgs& sendOrRecv);

// Completes every transfer.  They all progress together, so no order of sends and receives between
// any set of ranks can deadlock; transfers with the same peer and direction complete in list order and
// match the peer's in its order.  A transfer to this rank itself is a copy from the matching receive.
loomResult_t runTransfers(loomComm* comm, const std::vector<Transfer>& transfers, const char* what);

// Completes `receive` (its peer kAnySource) from whichever rank's next message is a send of its
// signature (count and type), found first; writes that rank to *source.  Messages of other calls are
// left in their queues for the receives they belong to.
loomResult_t receiveFromAny(loomComm* comm, Transfer receive, int* source);

}  // namespace loom
