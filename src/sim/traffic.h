// What one call of an algorithm puts between its ranks: flows (a rank sends `units` x S to another, S
// being the call's count x type size), grouped in phases that run one after another (rhd's rounds,
// hier's three stages), each phase pipelined in itself.  The patterns follow the algorithms of
// src/algos as they run (their orders: the planned rings, the double binary tree, rank-order chains,
// hier's leaders), so the simulator routes what the library would send.
#pragma once

#include <string>
#include <vector>

#include "model/cost_model.h"
#include "topo/cluster.h"
#include "topo/routes.h"

namespace loom {

struct Flow {
  int from = 0, to = 0;
  double units = 0;  // x S
  int ring = -1;     // the planned ring it runs on: it leaves and enters hosts by that ring's NICs; -1:
                     // by the ranks' own NICs
};

struct Phase {
  std::vector<Flow> flows;
  // Every ordered pair of distinct ranks also exchanges this many units (the flat patterns), kept
  // aggregated: a job of 100k ranks has 10^10 pairs.
  double allPairsUnits = 0;
};

struct Traffic {
  bool applies = false;
  std::string pattern;  // what moves, in words ("2 rings, 1.75 S per hop")
  std::vector<Phase> phases;
};

// The traffic of `algo` running `coll` (root 0) over `c` with the routes of `plan`, `channels` rings
// for the ring algorithms.  Not applies where the collective has no such algorithm here.
Traffic trafficOf(CollType coll, Algo algo, const Cluster& c, const RoutePlan& plan, int channels);

// How many hosts have ranks.
int usedHosts(const Cluster& c);

}  // namespace loom
