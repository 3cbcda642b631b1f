// Text and Graphviz views of a cluster model and its plan, for loom-topo and the INFO log.
#pragma once

#include <string>

#include "topo/cluster.h"
#include "topo/decisions.h"
#include "topo/routes.h"

namespace loom {

// The host's nodes as an indented tree (CPU > PCI switches > GPUs / NICs > ports), with link bandwidths.
std::string renderTree(const TopoSystem& s);
// Path type and bandwidth between every pair of GPUs, NICs and CPUs, like `nvidia-smi topo -m`.
std::string renderPathMatrix(const TopoSystem& s);
// Ranks with their devices and NICs, transports between ring neighbours (all pairs up to 16 ranks),
// GDR per GPU rank, the rings and the trees, each with its reason.
std::string renderPlan(const Cluster& c, const RoutePlan& plan, const TopoPolicy& policy);
// Graphviz: each host (up to maxHosts) as a cluster of its nodes and links; ring 0 drawn over it.
std::string renderDot(const Cluster& c, const RoutePlan& plan, int maxHosts = 4);

}  // namespace loom
