// loom-sim's engine: "what would this call cost on that machine?", with no hardware.  A call of an
// algorithm is priced as the selector prices it (model/cost_model.h callCost: hand-over latencies and
// the memory work on the ranks' cores) plus, in place of the selector's one network term, the traffic of
// the algorithm (sim/traffic.h) routed link by link over the planned cluster (topo/routes.h: the rings'
// NICs, each pair's best path inside a host): every phase lasts as long as its busiest link needs, and
// the links' busy time over the call is their utilisation.
//
// The network between hosts is taken as non-blocking (a full-bisection fabric): what limits a transfer
// across hosts is the NIC ports and the paths inside the hosts to them.
#pragma once

#include <string>
#include <vector>

#include "model/cost_model.h"
#include "topo/cluster.h"
#include "topo/routes.h"

namespace loom {

struct SimMachine {
  CostModel model;      // latencies, copy speeds, ranks per core, the network speed the selector assumes
  bool capNet = false;  // NIC ports carry at most the call's network speed (netSpeedGBs: one way, both
                        // ways, whole messages) / ranks per core (a measured machine, whose connections
                        // are slower than its NICs' line rate)
  // Whether the memory work runs beside the transfers (GPU kernels reduce while the copy engines and
  // NVLink move data: a call takes the longer of the two) or on the same cores (CPU ranks copy into and
  // out of the kernel's sockets and the shared-memory slots themselves: the two add up, as the
  // selector's model has it).
  bool overlap = false;
  std::string source;   // where the figures come from, for the output
};

// The machine a cluster implies without measurements: for GPU ranks typical GPU figures (hand-overs of
// 2 us in a host and 6 us across, copies and reductions at GPU memory speed, beside the transfers); for
// CPU ranks the cost model's constants with the ranks per core of the most crowded host.  Either way
// the selector's network speed is the slowest NIC port's line rate.
SimMachine defaultMachine(const Cluster& c);

struct LinkUse {
  std::string name;  // "a100-0 GPU0->NVS"
  double gbs = 0;    // what it carries per second (its bandwidth, or the measured cap)
  double units = 0;  // what crosses it over the call, x S
  double busyUs = 0;
};

struct SimEstimate {
  Algo algo = Algo::Ring;
  double us = 0;  // latencyUs + memoryUs + linkUs (the larger of the last two, where they overlap)
  double latencyUs = 0, memoryUs = 0, linkUs = 0;
  std::string pattern;
  std::vector<LinkUse> busiest;  // the most loaded links over the call, busiest first (at most 3)
  // What the library's selector predicts for it on this machine (model/cost_model.h predictUs), and
  // whether the selector picks it: the algorithm that runs when LOOM_ALGO is unset.
  double selectorUs = 0;
  bool chosen = false;
};

// The step a plan counts with (algos/primitives.h plannedStepBytes): LOOM_CHUNK_SIZE, else the
// shared-memory slot, across hosts the smaller of it and the network slot.
size_t simStepBytes(bool acrossHosts);

// Every algorithm loom has for `coll`, priced for `bytes` (count x type size, as the API takes it),
// fastest first; the one the selector would run is marked `chosen`.
std::vector<SimEstimate> simulate(const Cluster& c, const RoutePlan& plan, const SimMachine& m, CollType coll,
                                  size_t bytes);

}  // namespace loom
