// "What would this machine do?" on paper: the time of each allreduce algorithm over a planned cluster
// (loom-topo --plan SIZE), from the same per-algorithm shapes the live selector uses (model/cost_model.h:
// steps and bytes on the busiest link) with the planned routes' bandwidths and typical step latencies in
// place of the probed speeds.  It needs no hardware, so a user can ask about 1024 hosts of a server they
// do not have.
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
