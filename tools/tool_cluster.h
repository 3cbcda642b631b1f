// What loom-topo and loom-sim share: their whole-number flags, and the cluster they plan for (a loaded
// or detected host, replicated, its ranks placed and bound to NICs and its routes planned, as a
// communicator does).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "loom.h"
#include "topo/cluster.h"
#include "topo/decisions.h"
#include "topo/detect.h"
#include "topo/routes.h"

namespace loom::tools {

// A flag's value as a whole number from 1 to `max`; anything else ends the program with status 2.
inline int wholeNumber(const char* tool, const char* s, const char* what, int max) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < 1 || v > max) {
    std::fprintf(stderr, "%s: %s must be a whole number from 1 to %d, not '%s'\n", tool, what, max, s);
    std::exit(2);
  }
  return static_cast<int>(v);
}

struct PlannedCluster {
  std::vector<std::shared_ptr<const TopoSystem>> systems;
  Cluster cluster;
  RoutePlan plan;
};

// `topo` (a <system> or <cluster> file; empty: this machine, detected) over `hosts` hosts, `ranks` per
// host without GPUs (0: one per core), NICs bound under `policy`.  On failure prints why and returns 1.
inline int planCluster(const char* tool, const std::string& topo, int hosts, int ranks, const TopoPolicy& policy,
                       PlannedCluster* out) {
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "%s: %s: %s\n", tool, what, loomGetLastError(nullptr));
    return 1;
  };
  if (!topo.empty()) {
    if (loadCluster(topo, hosts, &out->systems) != loomSuccess) return fail("cannot load the topology");
  } else {
    std::shared_ptr<const TopoSystem> local;
    if (localTopology(&local) != loomSuccess) return fail("cannot detect this machine");
    out->systems.assign(hosts, local);
  }
  if (ranks == 0) {  // one rank per core, as a launcher would start on a host without GPUs
    const TopoSystem& s = *out->systems[0];
    for (int cpu : s.ofType(NodeType::Cpu)) ranks += s.nodes[cpu].cores;
    ranks = std::max(ranks, static_cast<int>(s.ofType(NodeType::Cpu).size()));
  }
  out->cluster = placeRanks(out->systems, ranks);
  assignNics(&out->cluster, policy);  // again, under the environment's NIC rules (LOOM_NET, LOOM_IB_HCA, ...)
  if (planRoutes(out->cluster, &out->plan) != loomSuccess) return fail("cannot plan routes");
  return 0;
}

}  // namespace loom::tools
