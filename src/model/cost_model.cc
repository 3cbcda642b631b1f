#include "model/cost_model.h"

#include <algorithm>
#include <cmath>

namespace loom {

// The step counts follow each algorithm's structure; the memory passes (per byte, relative to one copy)
// were fitted to all_reduce_perf runs of each algorithm forced with LOOM_ALGO at 2, 4 and 8 ranks
// (perf/algos.py; docs/perf/algos.md); linkBytes counts what the busiest link carries.
AlgoShape allReduceShape(Algo algo, const ShapeCase& c) {
  const double S = c.bytes, n = c.nranks, hosts = std::max(c.hosts, 1);
  const double L = c.nranks <= 1 ? 0 : std::ceil(std::log2(n));
  const double slices = std::max(1.0, std::ceil(S / static_cast<double>(std::max<size_t>(c.slotBytes, 1))));
  const double local = std::max(1.0, n / hosts);  // ranks per host
  const bool net = c.hosts > 1, pow2 = (c.nranks & (c.nranks - 1)) == 0;
  AlgoShape s;
  switch (algo) {
    case Algo::Ring:  // reduce-scatter then allgather: n-1 hand-overs each, 2(n-1)/n S on every link
      s.steps = 2 * (n - 1), s.passes = 2.5, s.linkBytes = 2.0 * (n - 1) / n;
      break;
    case Algo::Tree:  // a rank receives its two children's partial sums up and sends the result to both
      s.steps = 3 * L + 1 + (slices - 1), s.passes = 4.6, s.linkBytes = 2.0;
      break;
    case Algo::Rhd: {  // halving then doubling with partners, the far ones on other hosts
      // Its rounds are exchanges of whole halves (p2p transfers).  On one host they go through the slots:
      // 3.5 steps' latency and 6.5 passes a round, fitted.  Across hosts each round is one exchange on
      // the wire (2 log2 n in all), received straight into scratch or the output (zero copy): the copy in,
      // the reductions and the folding leave about a ring's memory work.
      // (Across hosts counted exactly: log2 of the largest power of two, plus one fold where n is not one.)
      const double exactRounds = std::floor(std::log2(n)) + (pow2 ? 0 : 1);
      s.steps = net ? 2 * exactRounds : 3.5 * (L + (pow2 ? 0 : 1));
      s.passes = net ? (pow2 ? 3.0 : 4.0) : (pow2 ? 6.5 : 8.5);
      s.linkBytes = 2.0 * (n - 1) / n;
      break;
    }
    case Algo::OneShot: {
      // Within one slot: one hand-over through the slots; above: a transfer round (gathering every input
      // into scratch first, then reducing: more passes per byte).  Within a slot the n-1 inputs stay in
      // the first-level caches while small: 2.5 passes each at 4 KB, 4.5 at 256 KB (measured at 2, 4 and
      // 8 ranks).  Gathered inputs beyond what a thread keeps as scratch are faulted in anew at every
      // call: about 1.75x the passes (measured at 64 MB on 2, 4 and 8 ranks).
      const bool oneSlot = S <= static_cast<double>(c.slotBytes);
      const double perPeer = !oneSlot ? (c.scratchSpills ? 14.0 : c.fromMemory ? 8.0 : 5.0)
                                      : 2.5 + 2.0 * std::min(1.0, S / (256u << 10));
      s.steps = (oneSlot ? 1.0 : 1.5) + 0.35 * (n - 1), s.passes = perPeer * (n - 1);
      // Every rank reads every other's input: a host's links out carry S for each of its ranks to each
      // rank elsewhere; inside one host a rank's link carries the n-1 others'.
      s.linkBytes = net ? local * (n - local) : n - 1;
      break;
    }
    case Algo::Hier:
      // Chains inside each host (reduce, then broadcast) around a ring of the hosts.  The chains only
      // overlap their stages across slices: with few slices a slice waits for each rank of the chain in
      // turn (a 256 KB call at 2 ranks: 1.4-2.7x the ring here).
      s.hostSteps = 2 * (local - 1), s.passes = 3.0 * (1 + (local - 1) / (2 * slices)), s.hostLinkBytes = 2.0;
      if (net) s.steps = 2 * (hosts - 1), s.linkBytes = 2.0 * (hosts - 1) / hosts;
      break;
    default:
      s.applies = false;
  }
  return s;
}

}  // namespace loom
