// Route search: the rings and the two complementary trees a collective runs over, chosen to maximise
// the bottleneck bandwidth.  Inside a host the order follows NVLink/PCIe locality (every order of up to
// 10 devices is tried, each link's bandwidth shared by the hops that cross it); across hosts ring c
// leaves and enters every host through the host's c-th NIC, so each ring stays on one rail.
#pragma once

#include <string>
#include <vector>

#include "topo/cluster.h"

namespace loom {

struct Ring {
  std::vector<int> ranks;        // ranks[i] sends to ranks[i+1], the last to the first
  std::vector<int> nicOfHost;    // per host: the NIC the ring crosses (-1 on one host)
  double bw = 0;                 // GB/s its narrowest link gives it
  std::string reason;
};

struct Tree {
  int root = -1;
  std::vector<int> parent;                 // -1 for the root
  std::vector<std::vector<int>> children;
};

struct RoutePlan {
  std::vector<Ring> rings;  // one per channel
  Tree trees[2];            // every rank is interior in at most one of them
  double treeBw = 0;
  std::string treeReason;
  double searchSeconds = 0;
};

loomResult_t planRoutes(const Cluster& c, RoutePlan* out);

// The two complementary binary trees over n positions: parent[t][i] (-1 for a root).
void doubleBinaryTree(int n, std::vector<int> parent[2]);

}  // namespace loom
