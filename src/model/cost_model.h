// The algorithms' names and the cost model that chooses among them (algos/selector.h), kept apart from
// the selector so that the communicator can hold a model without seeing the collective layer.
#pragma once

#include <string>

namespace loom {

// Every algorithm, once: its enumerator and the name LOOM_ALGO, logs and loom-info use.
#define LOOM_ALGO_LIST(X) \
  X(Ring, "ring")         \
  X(Tree, "tree")         \
  X(Rhd, "rhd")           \
  X(OneShot, "oneshot")   \
  X(Hier, "hier")         \
  X(Flat, "flat")

enum class Algo {
#define LOOM_ALGO_ENUM(e, name) e,
  LOOM_ALGO_LIST(LOOM_ALGO_ENUM)
#undef LOOM_ALGO_ENUM
};
constexpr int kNumAlgos = 0
#define LOOM_ALGO_COUNT(e, name) +1
    LOOM_ALGO_LIST(LOOM_ALGO_COUNT)
#undef LOOM_ALGO_COUNT
    ;
const char* algoName(Algo a);
// "ring, tree, ...": every name, for messages and help texts.
std::string algoNames();

// The cost model of one communicator; identical on every rank (the probe's results are combined), so
// every rank picks the same algorithm.
struct CostModel {
  double stepUs = 2.0;         // one slot handed from a rank to the next, as the ranks of this job see it
  double cacheCopyGBs = 12.0;  // copy bandwidth while the data stays in cache (up to ~1 MB per rank)
  double memCopyGBs = 5.0;     // copy bandwidth from and to memory
  double oversubscription = 1; // ranks per core on this host (>= 1): ranks share cores and memory bandwidth
  // Across hosts (probed between two hosts when the job spans several): one hand-over between ranks on
  // different hosts, and the bandwidth of one connection (what it moves per second, copies included).
  double netStepUs = 30;
  double netGBs = 1.2;
  // The smallest message the same-host transport sends as a direct post (a single copy by the kernel);
  // 0: none.  The transport's setting, which the runtime copies in (transport.h, TransportCaps).
  size_t hostDirectPostMin = 0;
  bool probed = false;
  bool netProbed = false;
  std::string describe() const;
};

// The shape of each allreduce algorithm's time, one table for the two users of a cost model: the
// selector (algos/selector.cc: this communicator's probed step latency, copy and network speeds) and the
// paper planner (topo/paper_plan.cc: the planned routes' bandwidths, typical latencies, no hardware).
// Time = steps x step latency (the slowest hop's) + hostSteps x in-host step latency
//        + passes x S / copy bandwidth (memory work on the ranks' cores: the live model only)
//        + linkBytes x S / bandwidth of the busiest link (between hosts; in a host where there is one)
//        + hostLinkBytes x S / in-host bandwidth (hier's chains).
struct AlgoShape {
  bool applies = true;  // false: not an allreduce algorithm (flat)
  double steps = 0, hostSteps = 0, passes = 0, linkBytes = 0, hostLinkBytes = 0;
};

// What the shape depends on.  `fromMemory` and `scratchSpills` describe where the data lies (live model:
// caches; the planner leaves them false).
struct ShapeCase {
  double bytes = 0;  // S, per rank
  int nranks = 1, hosts = 1;
  size_t slotBytes = 256u << 10;  // the pipelining step
  bool fromMemory = false;        // the ranks' data far exceeds the caches
  bool scratchSpills = false;     // oneshot's gathered inputs exceed what a thread keeps as scratch
};

AlgoShape allReduceShape(Algo algo, const ShapeCase& c);

}  // namespace loom
