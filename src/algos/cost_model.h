// The algorithms' names and the cost model that chooses among them (algos/selector.h), kept apart from
// the selector so that the communicator can hold a model without seeing the collective layer.
#pragma once

#include <string>

namespace loom {

enum class Algo { Ring, Tree, Rhd, OneShot, Hier, Flat };
const char* algoName(Algo a);

// The cost model of one communicator; identical on every rank (the probe's results are combined), so
// every rank picks the same algorithm.
struct CostModel {
  double stepUs = 2.0;       // one slot handed from a rank to the next (alpha of ring, tree, chain)
  double roundUs = 6.0;      // one round of the transfer engine (alpha of rhd, one-shot, flat)
  double copyGBs = 6.0;      // bytes copied through the transport per second (beta = 1 / this)
  double reduceGBs = 6.0;    // bytes reduced per second by the kernels
  double netGBs = 1.2;       // across hosts (used by hier and by any path between hosts)
  bool probed = false;
  std::string describe() const;
};

}  // namespace loom
