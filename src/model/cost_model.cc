#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace loom {

namespace {
const char* const kNames[] = {
#define LOOM_ALGO_NAME(e, name) name,
    LOOM_ALGO_LIST(LOOM_ALGO_NAME)
#undef LOOM_ALGO_NAME
};
}  // namespace

const char* algoName(Algo a) { return kNames[static_cast<int>(a)]; }

std::string algoNames() {
  std::string all;
  for (const char* n : kNames) all += std::string(all.empty() ? "" : ", ") + n;
  return all;
}

std::string CostModel::describe() const {
  char b[448];
  snprintf(b, sizeof b, "step %.1f us, copy %.2f GB/s in cache, %.2f GB/s from memory (%.0f MB of last-level "
           "cache a core), %.1f ranks per core (%s); across hosts step %.1f us, %.2f GB/s one way, %.2f GB/s "
           "each way both at once, %.2f GB/s for whole messages (%s)", stepUs, cacheCopyGBs, memCopyGBs,
           llcShareMB, oversubscription, probed ? "probed" : "constants", netStepUs, netGBs, netDuplexGBs,
           netDirectGBs, netProbed ? "probed" : "constants");
  return b;
}

namespace {
// What a byte costs from DRAM over the probe's 8 MB copy (which a 16-32 MB last-level cache still holds).
constexpr double kBeyondCacheSlowdown = 1.4;
// spec()'s keys and the fields they name.
struct SpecKey {
  const char* key;
  double CostModel::*field;
};
const SpecKey kSpecKeys[] = {{"step", &CostModel::stepUs},         {"cache", &CostModel::cacheCopyGBs},
                             {"mem", &CostModel::memCopyGBs},      {"oversub", &CostModel::oversubscription},
                             {"netstep", &CostModel::netStepUs},   {"net", &CostModel::netGBs},
                             {"netduplex", &CostModel::netDuplexGBs}, {"netdirect", &CostModel::netDirectGBs},
                             {"call", &CostModel::callUs},         {"llc", &CostModel::llcShareMB}};
}  // namespace

std::string CostModel::spec() const {
  std::string out;
  for (const SpecKey& k : kSpecKeys) {
    char b[64];
    snprintf(b, sizeof b, "%s%s=%.4g", out.empty() ? "" : ",", k.key, this->*k.field);
    out += b;
  }
  return out;
}

bool CostModel::parseSpec(const std::string& text, CostModel* m, std::string* why) {
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const SpecKey* found = nullptr;
    for (const SpecKey& k : kSpecKeys)
      if (key == k.key) found = &k;
    if (found == nullptr || eq == std::string::npos) {
      *why = "'" + item +
             "' is not KEY=VALUE with KEY one of step, cache, mem, oversub, netstep, net, netduplex, netdirect, call, "
             "llc";
      return false;
    }
    const std::string value = item.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(v > 0) || v > 1e9) {
      *why = key + "=" + value + ": the value must be a positive number";
      return false;
    }
    m->*found->field = v;
  }
  return true;
}

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
      s.hostSteps = 2 * (local - 1), s.passes = 3.0 * (1 + (local - 1) / (2 * slices));
      if (net) s.steps = 2 * (hosts - 1), s.linkBytes = 2.0 * (hosts - 1) / hosts;
      break;
    default:
      s.applies = false;
  }
  return s;
}

// Each algorithm's cost is latency steps x stepUs + work x bytes / copy bandwidth x ranks per core, and
// across hosts + the bytes its busiest link between hosts carries / the probed network bandwidth.
// Allreduce takes its shapes from the table above; the other collectives' step counts and work factors
// are below.  The work factors (memory passes per byte, relative to one copy) were fitted to perf runs
// of each algorithm forced with LOOM_ALGO at 2, 4 and 8 ranks (perf/algos.py; figures in
// docs/perf/algos.md); the probes supply this machine's step, copy and network speeds.
CallCost callCost(const CostModel& m, Algo algo, CollType coll, size_t bytes, int n, int hosts, size_t slotBytes,
                  int rails) {
  CallCost out;
  if (n <= 1) return out;
  // Ranks sharing cores share their time (the copy probe keeps each rank's best, unshared speed).
  const double S = static_cast<double>(bytes), f = std::max(1.0, m.oversubscription);
  // Per-byte time: from cache while the ranks' data fits in a last-level cache share, from memory when
  // it is far larger, and in between (geometric) from 2 to 8 MB per core, where part of it still hits.
  const bool fromMemory = S * f > (4u << 20);
  const double toMemory = std::min(1.0, std::max(0.0, std::log2(S * f / (2u << 20)) / 2));
  const double beta = 1e-3 / (std::pow(m.cacheCopyGBs, 1 - toMemory) * std::pow(m.memCopyGBs, toMemory));
  const double slices = std::max(1.0, std::ceil(S / std::max<size_t>(slotBytes, 1)));
  // Across hosts a step waits for the slowest hop, and every byte the busiest connection between hosts
  // carries (as a multiple of S: `linkBytes`) goes at the probed network bandwidth, on top of the
  // memory work (on the same cores: the kernel's socket copies are CPU time too).
  const bool net = hosts > 1;
  const double stepUs = net ? std::max(m.stepUs, m.netStepUs) : m.stepUs;
  const double local = std::max(1.0, static_cast<double>(n) / std::max(hosts, 1));  // ranks per host
  // A ring's connection between hosts carries its share of the rails (the simulator found the selector
  // picking hier over a ring 3.6x faster on 3 servers of 8 GPUs and 4 NICs, when it priced the ring's
  // bytes on one NIC).
  const double ringShare = 1.0 / std::max(1, rails);
  // The work factors refitted against measured times (perf/sim_validate.py, 2026-12-05/06: medians of 3
  // runs, 64 KB-16 MB at 2-8 ranks and 2-4 hosts), together with the DRAM term below, where the earlier
  // fit, made for choosing between algorithms, read the collectives other than allreduce 1.25-4x too
  // light; every algorithm of a collective by the same factor, so that the choice between them barely
  // moves.
  const double refit = coll == CollType::AllGather       ? 2.25
                       : coll == CollType::AllToAll      ? 3.6
                       : coll == CollType::ReduceScatter ? 1.125
                       : coll == CollType::Broadcast     ? 1.125
                                                         : 0.9;
  // Past the last-level cache: as a rank's input and output (n blocks each for the collectives whose
  // count is a block) times the ranks sharing its core grow from the cache's share per core to 4x it, a
  // byte costs up to 1.4x more (geometric; fitted with the factors above: 16 MB calls on one host
  // measured 1.4x the prediction without it).
  const double buffers = coll == CollType::AllGather || coll == CollType::ReduceScatter || coll == CollType::AllToAll
                             ? S * n
                             : S;
  const double llc = std::max(m.llcShareMB, 0.01) * (1u << 20);
  const double toDram = std::min(1.0, std::max(0.0, std::log2(2 * buffers * f / llc) / 2));
  const double dram = std::pow(kBeyondCacheSlowdown, toDram);
  // Across hosts a byte that crosses is moved by the kernel, out of the sender's buffer and into the
  // receiver's or a slot, at the probed speeds (probeNetworkSpeeds times the streams slot by slot, so
  // that a pipeline's hand-over per slice is in them too): the one copy per hop that the work factors,
  // fitted on one host, charge for every such byte is not the ranks' work there, nor are the slices'
  // hand-overs.  Counted twice, 2-host broadcasts, whose only work those are, were predicted 16-64% slow
  // in every run of perf/sim_validate.py (2026-12-07).  Streams and whole messages alike: charged for
  // streams alone, 4-host allgathers chose the ring at 4-16 MB where flat took 0.68-0.98 of its time.
  // The kernel's copies slow as the memory work does once the buffers leave the cache (the probe's
  // 4-8 MB stay in it): 4-host 16 MB allreduces and alltoalls were predicted 27-36% fast without it.
  auto set = [&](double steps, double work, double linkBytes, double sliceSteps = 0) {
    if (net) {
      work = std::max(0.0, work - linkBytes);
    } else {
      steps += sliceSteps;
    }
    out.latencyUs = steps * stepUs + m.callUs * f;
    out.memoryUs = refit * dram * work * S * beta * f;
    out.netLinkBytes = net ? linkBytes : 0.0;
    out.netSlowdown = net ? dram : 1.0;
    return out;
  };
  auto none = [&] {
    out.applies = false;
    return out;
  };
  // Flat exchanges send S to every rank of every other host: a host's connections out carry that for
  // each of its ranks.
  const double flatLink = local * (n - local);
  switch (coll) {
    case CollType::AllReduce: {
      ShapeCase c;
      c.bytes = S, c.nranks = n, c.hosts = hosts, c.slotBytes = slotBytes, c.fromMemory = fromMemory;
      c.scratchSpills = S * n > kScratchKeepBytes;
      const AlgoShape a = allReduceShape(algo, c);
      if (!a.applies) return none();
      // Rhd's exchanges and oneshot's gathering round (above one slot) are p2p transfers.
      if (algo == Algo::Rhd) out.wholeMessageBytes = S / 2;  // its first round's halves
      if (algo == Algo::OneShot && S > static_cast<double>(slotBytes)) out.wholeMessageBytes = S;
      set(a.steps, a.passes, a.linkBytes * (algo == Algo::Ring ? ringShare : 1.0));
      out.latencyUs += a.hostSteps * m.stepUs;
      return out;
    }
    case CollType::AllGather: {
      if (algo == Algo::Flat) {  // single copies by the kernel (process_vm_readv): slower from memory
        out.wholeMessageBytes = S;  // p2p transfers, one to every peer
        const bool single = hosts == 1 && m.hostDirectPostMin > 0 && S >= static_cast<double>(m.hostDirectPostMin);
        return set(1.5 + 0.6 * (n - 1), (n - 1) * (single ? (fromMemory ? 2.2 : 1.5) : 2.0), flatLink);
      }
      if (algo != Algo::Ring) return none();
      // Two copies per hop, but large outputs are streamed past the cache (algos/primitives.h).
      const bool streamed = S * n >= kStreamingMinBytes;
      return set(n - 1, (n - 1) * (streamed && fromMemory ? 1.3 : 2.0), (n - 1.0) * ringShare, slices - 1);
    }
    case CollType::ReduceScatter:
      return algo == Algo::Ring ? set(n - 1, 2.5 * (n - 1), (n - 1.0) * ringShare, slices - 1) : none();
    case CollType::Broadcast: {
      out.bothWays = false;  // along a chain or down a tree: each connection one way
      if (algo == Algo::Ring) return set(n - 1, 2.0, 1.0, slices - 1);
      // The tree of hosts: log2(hosts) network hops and a chain inside a host before the last rank has
      // the first slice, but a host's first rank sends every byte to two other hosts.  On two hosts
      // it is the chain: not offered.
      if (algo != Algo::Tree || hosts < 3) return none();
      const double depth = std::floor(std::log2(static_cast<double>(hosts))) + (local - 1);
      return set(depth, 2.0, 2.0, slices - 1);
    }
    case CollType::Reduce:
      out.bothWays = false;
      return algo == Algo::Ring ? set(n - 1, 2.5, 1.0, slices - 1) : none();
    // S is one block (the API's count is per peer): a rank sends n-1 of them, and a host's connections
    // out carry one for each pair of its ranks and the others'.  (Until the simulator's validation this
    // read S as a rank's whole buffer, n times too little work; alltoall has one algorithm, so no choice
    // changed.)
    case CollType::AllToAll:
      out.wholeMessageBytes = S;
      return algo == Algo::Flat ? set(1.5 + 0.6 * (n - 1), 1.5 * (n - 1), flatLink) : none();
    default: return out;
  }
}

double netSpeedGBs(const CostModel& m, const CallCost& c) {
  const double streamed = c.bothWays ? m.netDuplexGBs : m.netGBs;
  if (c.wholeMessageBytes <= 0) return streamed;
  // Geometric in the size between the two, fitted to perf/sim_validate.py's alltoall points on 2 and
  // 4 namespace hosts (2026-12-07): blocks of 2 MB and 8 MB moved at the 8 MB probe's speed, blocks of
  // 16-512 KB 1.4-2x faster than it.
  const double toDirect = std::min(1.0, std::max(0.0, std::log2(c.wholeMessageBytes / (512u << 10)) / 2));
  return std::pow(streamed, 1 - toDirect) * std::pow(m.netDirectGBs, toDirect);
}

double predictUs(const CostModel& m, Algo algo, CollType coll, size_t bytes, int n, int hosts, size_t slotBytes,
                 int rails) {
  const CallCost c = callCost(m, algo, coll, bytes, n, hosts, slotBytes, rails);
  if (!c.applies) return 1e30;
  // The speeds are a connection's on a core of its own; where ranks share cores so do their connections'
  // copies (the probe, which timed every rank at once, scaled its figures up by as much).
  const double netGBs = netSpeedGBs(m, c) / std::max(1.0, m.oversubscription);
  return c.latencyUs + c.memoryUs + c.netSlowdown * c.netLinkBytes * static_cast<double>(bytes) * 1e-3 / netGBs;
}

int channelsFor(long long wanted, size_t bytes, int nranks, size_t slotBytes, int maxChannels) {
  const size_t perChannel = static_cast<size_t>(std::max(nranks, 1)) * std::max<size_t>(slotBytes, 1);
  const long long fit = std::max<long long>(1, static_cast<long long>(bytes / perChannel));
  return static_cast<int>(std::min({wanted, fit, static_cast<long long>(maxChannels)}));
}

}  // namespace loom
