// The algorithms' names and the cost model that chooses among them, kept apart from the selector
// (algos/selector.h) so that the communicator can hold a model without seeing the collective layer, and
// so that the what-if simulator (sim/simulate.h) prices a call with the very formulas the selector uses.
#pragma once

#include <cstddef>
#include <string>

namespace loom {

// The collectives, as the runtime runs them and the model prices them.
enum class CollType { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Send, Recv };

// Sizes at which the algorithms change how they use memory: they obey them, the model prices them.
// Gathered or received scratch beyond this is freed after the call (algos/scratch.h), so it is faulted
// in anew at every call.
constexpr size_t kScratchKeepBytes = 64u << 20;
// Calls from this size on write their final output with streaming stores (kernels/reduce_kernels.inc).
constexpr size_t kStreamingMinBytes = 8u << 20;

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
  double memCopyGBs = 5.0;     // copy bandwidth past the private caches (the probe copies 8 MB)
  double oversubscription = 1; // ranks per core on this host (>= 1): ranks share cores and memory bandwidth
  // Across hosts (probed when the job spans several): one hand-over between ranks on different hosts,
  // and the bandwidth of one connection streaming slot by slot one way (what it moves per second, copies
  // included: a broadcast or reduce chain).  The bandwidths are timed with every rank moving at once and
  // held as what a connection moves on a core of its own: the probe's figure times the ranks per core,
  // which predictUs divides by again.
  double netStepUs = 30;
  double netGBs = 1.2;
  // The same connection's speed each way while both ways stream at once (a ring's steps): a NIC's full
  // duplex gives netGBs again, but where the network is the hosts' own cores (TCP without offload, a
  // veth between namespaces) the two directions share them.
  double netDuplexGBs = 1.2;
  // Each way, both at once, for whole messages handed to the transport as one transfer (p2p: flat
  // allgather and alltoall, oneshot's gathering round, rhd's exchanges) rather than streamed slot by
  // slot: a socket moves large ones at a speed of its own, probed as 8 MB each way at once (on this
  // machine's veths 0.7-1.2 GB/s in eleven jobs, where a ring streamed 16 MB calls at 0.9-2.3 and rhd,
  // which moves 8 MB halves, at 0.8-1.0: docs/perf/sim.md); netSpeedGBs prices smaller ones.
  double netDirectGBs = 1.2;
  // What every call costs beside its steps and bytes (argument checks, the plan, the closing flush, the
  // ranks meeting at the first step), per rank sharing a core: fitted to perf/sim_validate.py's run of
  // 2026-12-05 (64 KB calls at 2-8 ranks and 2-4 hosts), not probed.  The same for every algorithm, so it
  // changes no choice; it makes the predicted times absolute.
  double callUs = 8;
  // The last-level cache's share per core (MB; the probe reads the machine's).  Calls whose buffers,
  // times the ranks sharing a core, outgrow it run from DRAM, slower than the 8 MB probe copy saw.
  double llcShareMB = 16;
  // The smallest message the same-host transport sends as a direct post (a single copy by the kernel);
  // 0: none.  The transport's setting, which the runtime copies in (transport.h, TransportCaps).
  size_t hostDirectPostMin = 0;
  bool probed = false;
  bool netProbed = false;
  std::string describe() const;
  // The speeds as "step=5.3,cache=12,mem=5,oversub=4,netstep=30,net=1.2,netduplex=1.2,netdirect=1.2,
  // call=8,llc=16": what INFO logs print and loom-sim --model reads back, so a simulation can price calls
  // with a real job's probed machine.
  std::string spec() const;
  // Sets the fields `text` names (any subset of spec()'s keys, comma separated); false with *why on
  // an unknown key or a value that is not a positive number.
  static bool parseSpec(const std::string& text, CostModel* inOut, std::string* why);
};

// One call's price, in parts: the selector adds them up (predictUs); the simulator keeps the latency
// and the memory work and replaces `netLinkBytes` by the load it routes onto every link.
struct CallCost {
  bool applies = true;      // false: `coll` has no such algorithm (or not for this many hosts)
  double latencyUs = 0;     // hand-overs x their latency
  double memoryUs = 0;      // memory passes on the ranks' cores (shared where ranks share cores)
  double netLinkBytes = 0;  // what the busiest connection between hosts carries, as a multiple of S
  bool bothWays = true;     // its connections move both ways at once (at netDuplexGBs), else one way (netGBs)
  // > 0: its bytes cross as whole-message transfers of this many bytes each (netSpeedGBs prices them).
  double wholeMessageBytes = 0;
  // >= 1: how much slower than the probe the connections move its bytes, as the buffers outgrow the
  // last-level cache (the kernel copies them out of and into the ranks' buffers; the probe's 4-8 MB
  // stay in cache), as the memory work slows.
  double netSlowdown = 1;
};

// `bytes` (S) is count x type size of the call, as the API takes it (per rank for allgather and
// reducescatter, one block for alltoall, the whole buffer for the others).  `rails`: the planned rings a
// ring algorithm spreads this call over across hosts, each leaving a host by its own NIC, so that each
// connection carries 1/rails of the ring's bytes (topo/routes.h; 1 where a host has one NIC).
CallCost callCost(const CostModel& m, Algo algo, CollType coll, size_t bytes, int nranks, int hosts, size_t slotBytes,
                  int rails = 1);
// The speed (GB/s) at which `c`'s connections between hosts move its bytes, before ranks share cores:
// streams both ways at netDuplexGBs, one way at netGBs, whole messages of 2 MB and more at
// netDirectGBs, and smaller ones faster, up to the streams' speed at 512 KB (they fit the sockets'
// buffers and stay in cache).
double netSpeedGBs(const CostModel& m, const CallCost& c);
// The selector's prediction: latency + memory + netLinkBytes x S at the probed network bandwidth, one way
// or both ways at once (shared where ranks share cores, slowed by netSlowdown); 1e30 where the algorithm
// does not apply, 0 for a single rank.
double predictUs(const CostModel& m, Algo algo, CollType coll, size_t bytes, int nranks, int hosts, size_t slotBytes,
                 int rails = 1);

// The rings a ring algorithm runs for `bytes` (algos/channels.h): up to `wanted`, but never so many
// that a ring's share is under one slot per rank.
int channelsFor(long long wanted, size_t bytes, int nranks, size_t slotBytes, int maxChannels);

// The shape of each allreduce algorithm's time (callCost reads it):
// Time = steps x step latency (the slowest hop's) + hostSteps x in-host step latency
//        + passes x S / copy bandwidth (memory work on the ranks' cores)
//        + linkBytes x S / bandwidth of the busiest connection between hosts.
struct AlgoShape {
  bool applies = true;  // false: not an allreduce algorithm (flat)
  double steps = 0, hostSteps = 0, passes = 0, linkBytes = 0;
};

// What the shape depends on.  `fromMemory` and `scratchSpills` describe where the data lies (caches).
struct ShapeCase {
  double bytes = 0;  // S, per rank
  int nranks = 1, hosts = 1;
  size_t slotBytes = 256u << 10;  // the pipelining step
  bool fromMemory = false;        // the ranks' data far exceeds the caches
  bool scratchSpills = false;     // oneshot's gathered inputs exceed what a thread keeps as scratch
};

AlgoShape allReduceShape(Algo algo, const ShapeCase& c);

}  // namespace loom
