#include "algos/selector.h"

#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

#include "algos/algorithms.h"
#include "algos/primitives.h"
#include "algos/reduce_kernels.h"
#include "core/comm.h"
#include "core/log.h"
#include "core/params.h"

namespace loom {

namespace {

const char* const kNames[] = {"ring", "tree", "rhd", "oneshot", "hier", "flat"};
constexpr int kNumAlgos = 6;

struct Entry {
  CollType coll;
  Algo algo;
  loomResult_t (*run)(loomComm*, const CollArgs&);
};

// Every algorithm of every collective.  Broadcast, reduce and reducescatter have one (the ring order
// chain / ring); alltoall is always flat (pairwise transfers).
const Entry kTable[] = {
    {CollType::AllReduce, Algo::Ring, ringAllReduce},       {CollType::AllReduce, Algo::Tree, treeAllReduce},
    {CollType::AllReduce, Algo::Rhd, rhdAllReduce},         {CollType::AllReduce, Algo::OneShot, oneShotAllReduce},
    {CollType::AllReduce, Algo::Hier, hierAllReduce},       {CollType::AllGather, Algo::Ring, ringAllGather},
    {CollType::AllGather, Algo::Flat, flatAllGather},       {CollType::Broadcast, Algo::Ring, chainBroadcast},
    {CollType::Reduce, Algo::Ring, chainReduce},            {CollType::ReduceScatter, Algo::Ring, ringReduceScatter},
    {CollType::AllToAll, Algo::Flat, allToAll},
};

// LOOM_ALGO as a set of allowed algorithms (bit per Algo); all allowed when unset.
bool parseFilter(const std::string& spec, unsigned* allowed, std::string* bad) {
  *allowed = (1u << kNumAlgos) - 1;
  if (spec.empty()) return true;
  const bool exclude = spec[0] == '^';
  unsigned listed = 0;
  std::stringstream ss(exclude ? spec.substr(1) : spec);
  for (std::string item; std::getline(ss, item, ',');) {
    int found = -1;
    for (int i = 0; i < kNumAlgos; ++i)
      if (strcasecmp(item.c_str(), kNames[i]) == 0) found = i;
    if (found < 0) {
      *bad = item;
      return false;
    }
    listed |= 1u << found;
  }
  *allowed = exclude ? *allowed & ~listed : listed;
  return true;
}

double log2ceil(int n) { return n <= 1 ? 0 : std::ceil(std::log2(static_cast<double>(n))); }

}  // namespace

const char* algoName(Algo a) { return kNames[static_cast<int>(a)]; }

std::string CostModel::describe() const {
  char b[200];
  snprintf(b, sizeof b, "step %.1f us, transfer round %.1f us, copy %.2f GB/s, reduce %.2f GB/s (%s)", stepUs, roundUs,
           copyGBs, reduceGBs, probed ? "probed" : "constants");
  return b;
}

double predictUs(const CostModel& m, Algo algo, CollType coll, size_t bytes, int n, int hosts, size_t slotBytes) {
  if (n <= 1) return 0;
  const double S = static_cast<double>(bytes), beta = 1e-3 / m.copyGBs, gamma = 1e-3 / m.reduceGBs;
  const double L = log2ceil(n), frac = static_cast<double>(n - 1) / n;
  // Pipelines fill slice by slice: the latency term counts the steps of the first slice, then one step
  // per further slice.
  const double slices = std::max(1.0, std::ceil(S / std::max<size_t>(slotBytes, 1)));
  switch (coll) {
    case CollType::AllReduce:
      switch (algo) {
        case Algo::Ring: {
          const double cols = std::max(1.0, std::ceil(S / n / std::max<size_t>(slotBytes, 1)));
          return (2 * (n - 1) + 2 * (cols - 1)) * m.stepUs + 2 * frac * S * beta + frac * S * gamma;
        }
        case Algo::Tree: return (2 * L + 2 * (slices / 2 - 1 > 0 ? slices / 2 - 1 : 0)) * m.stepUs + 2 * S * beta + S * gamma;
        case Algo::Rhd: {
          const bool pow2 = (n & (n - 1)) == 0;
          return (2 * L + (pow2 ? 0 : 2)) * m.roundUs + 2 * frac * S * beta + frac * S * gamma +
                 (pow2 ? 0 : 2 * S * beta + S * gamma);
        }
        case Algo::OneShot: return m.roundUs + (n - 1) * S * (beta + gamma);
        case Algo::Hier: {
          const int local = std::max(1, n / std::max(hosts, 1));
          double t = 2 * (local - 1 + slices - 1) * m.stepUs + 2 * S * beta + S * gamma;
          if (hosts > 1) t += 2 * (hosts - 1) * m.stepUs + 2.0 * (hosts - 1) / hosts * S * 1e-3 / m.netGBs;
          return t;
        }
        default: return 1e30;
      }
    case CollType::AllGather:
      if (algo == Algo::Flat) {
        const bool single = hosts == 1 && params().SHM_DIRECT_MIN > 0 && S >= params().SHM_DIRECT_MIN;
        return m.roundUs + (n - 1) * S * beta * (single ? 1 : 2);
      }
      return (n - 1 + slices - 1) * m.stepUs + 2 * (n - 1) * S * beta;
    case CollType::ReduceScatter: return (n - 1 + slices - 1) * m.stepUs + 2 * frac * S * n * beta + frac * S * n * gamma;
    case CollType::Broadcast: return (n - 1 + slices - 1) * m.stepUs + 2 * S * beta;
    case CollType::Reduce: return (n - 1 + slices - 1) * m.stepUs + 2 * S * beta + S * gamma;
    case CollType::AllToAll: return m.roundUs + (n - 1) * S / n * beta;
    default: return 0;
  }
}

std::vector<Candidate> rankCandidates(const loomComm* comm, const CollArgs& args) {
  unsigned allowed;
  std::string bad;
  parseFilter(params().ALGO, &allowed, &bad);  // validated at init (checkAlgoFilter)
  const size_t bytes = args.count * typeSize(args.type);
  const int hosts = comm->cluster ? static_cast<int>(comm->cluster->hosts.size()) : 1;
  const size_t slot = static_cast<size_t>(params().CHUNK_SIZE > 0 ? params().CHUNK_SIZE : params().SHM_SLOT_SIZE);
  std::vector<Candidate> all, kept;
  for (const Entry& e : kTable) {
    if (e.coll != args.coll) continue;
    all.push_back({e.algo, e.run, predictUs(comm->costModel, e.algo, e.coll, bytes, comm->nranks, hosts, slot)});
    if (allowed & (1u << static_cast<int>(e.algo))) kept.push_back(all.back());
  }
  // A filter that leaves a collective nothing does not apply to it (LOOM_ALGO=tree still lets
  // broadcast run its chain).
  std::vector<Candidate>& out = kept.empty() ? all : kept;
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.predictedUs < b.predictedUs; });
  return out;
}

loomResult_t checkAlgoFilter() {
  unsigned allowed;
  std::string bad;
  if (!parseFilter(params().ALGO, &allowed, &bad))
    return setError(loomInvalidArgument, "LOOM_ALGO=%s: unknown algorithm '%s' (known: ring, tree, rhd, oneshot, hier, flat)",
                    params().ALGO.c_str(), bad.c_str());
  return loomSuccess;
}

loomResult_t tuneCostModel(loomComm* comm) {
  CostModel m;
  // Constants for shared memory on a typical server core; the probe replaces them with this machine's.
  if (comm->localRanks > 1 && std::thread::hardware_concurrency() > 0 &&
      static_cast<unsigned>(comm->localRanks) > std::thread::hardware_concurrency()) {
    m.stepUs *= 10;  // ranks outnumber cores: every hand-over may wait for a sleeping rank to wake
    m.roundUs *= 10;
  }
  if (params().TUNE_PROBE == 0 || comm->nranks == 1) {
    comm->costModel = m;
    return loomSuccess;
  }
  using clock = std::chrono::steady_clock;
  // Copy and reduce bandwidth, measured locally on buffers larger than the caches' share of a core.
  const size_t probeBytes = 2u << 20;
  std::vector<float> a(probeBytes / 4, 1.0f), b(probeBytes / 4, 2.0f);
  const ReduceKernels& k = reduceKernels();
  k.copy(b.data(), a.data(), probeBytes);  // touch
  auto t0 = clock::now();
  k.copy(b.data(), a.data(), probeBytes);
  auto t1 = clock::now();
  k.reduce[loomFloat32][loomSum](b.data(), a.data(), b.data(), a.size());
  auto t2 = clock::now();
  struct Probe {
    double stepUs, copyGBs, reduceGBs;
  };
  std::vector<Probe> all(comm->nranks);
  Probe& mine = all[comm->rank];
  mine.copyGBs = probeBytes / 1e3 / std::max(1e-3, std::chrono::duration<double, std::micro>(t1 - t0).count());
  mine.reduceGBs = probeBytes / 1e3 / std::max(1e-3, std::chrono::duration<double, std::micro>(t2 - t1).count());
  // The hand-over latency: a one-element token goes round the ring a few times; rank 0 times it.
  const int n = comm->nranks, r = comm->rank, laps = 4;
  LOOM_CHECK(comm->connect({(r + n - 1) % n, (r + 1) % n}, 0));
  CollArgs token{};
  token.coll = CollType::Broadcast;
  token.count = 1;
  token.type = loomUint8;
  token.op = loomSum;
  token.root = n - 1;  // a signature no user call of this shape would send first
  Primitives prims(comm, (r + 1) % n, (r + n - 1) % n, 0, token, "cost model probe");
  unsigned char byte = 0;
  auto s0 = clock::now();
  for (int lap = 0; lap < laps; ++lap) {
    if (r == 0) {
      LOOM_CHECK(prims.send(&byte, 1));
      LOOM_CHECK(prims.recv(&byte, 1));
    } else {
      LOOM_CHECK(prims.recvCopySend(&byte, 1));
    }
  }
  mine.stepUs = std::chrono::duration<double, std::micro>(clock::now() - s0).count() / (laps * n);
  LOOM_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Probe)));
  // Every rank takes the same combination: rank 0's latency (it timed whole laps), the slowest copy and
  // reduction (a collective runs at the pace of its slowest rank).
  m.stepUs = all[0].stepUs;
  m.roundUs = 3 * all[0].stepUs;  // a transfer round: post, poll every queue, complete
  m.copyGBs = m.reduceGBs = 1e9;
  for (const Probe& p : all) {
    m.copyGBs = std::min(m.copyGBs, p.copyGBs);
    m.reduceGBs = std::min(m.reduceGBs, p.reduceGBs);
  }
  // Ranks sharing cores share the memory bandwidth too.
  const double share = std::max(1.0, static_cast<double>(comm->localRanks) / std::max(1u, std::thread::hardware_concurrency()));
  m.copyGBs /= share;
  m.reduceGBs /= share;
  m.probed = true;
  comm->costModel = m;
  LOOM_INFO(kAlgo, "cost model: %s", m.describe().c_str());
  return loomSuccess;
}

}  // namespace loom
