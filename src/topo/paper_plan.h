// "What would this machine do?" on paper: the textbook alpha-beta time of each allreduce algorithm
// over a planned cluster (loom-topo --plan SIZE), using the planned routes' bandwidths.  The live
// communicator's choice uses the fitted, probed model of algos/selector.h instead; this one needs no
// hardware, so a user can ask about 1024 hosts of a server they do not have.
#pragma once

#include <string>
#include <vector>

#include "topo/cluster.h"
#include "topo/routes.h"

namespace loom {

struct PaperEstimate {
  std::string algo;
  double us;
  std::string formula;
};

// Estimates for an allreduce of `bytes` per rank, fastest first.
std::vector<PaperEstimate> paperAllReduce(const Cluster& c, const RoutePlan& plan, double bytes);

}  // namespace loom
