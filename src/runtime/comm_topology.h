// The communicator's view of the machines it runs on: every rank's host model (exchanged through the
// bootstrap) and where each rank sits, then the topology's decisions for this communicator.
#pragma once

#include "loom.h"

struct loomComm;

namespace loom {

struct CommParent;

// Detects (or loads) this host's model, exchanges it with the other ranks and builds comm->cluster,
// comm->topoPolicy and comm->routes.  A bad LOOM_TOPO_FILE is loomInvalidArgument.
loomResult_t commBuildTopology(loomComm* comm);
// The same for a communicator made from another (split, shrink; runtime/comm.h): the parent's host
// models and rank places, nothing exchanged or detected again.
loomResult_t commInheritTopology(loomComm* comm, const CommParent& parent);

}  // namespace loom
