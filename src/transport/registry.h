// The transports this build has, in no particular order: the communicator asks each that offers queues
// (caps()) whether it reaches a peer and takes the best estimate (no per-transport if-chains anywhere
// else); the p2p transport maps device buffers per call for the device path instead.
#pragma once

#include <vector>

#include "transport/transport.h"

namespace loom {
const std::vector<Transport*>& transports();
// LOOM_NET names a network transport of this build (or is empty): else loomInvalidArgument, listing them.
loomResult_t checkNetChoice();
}
