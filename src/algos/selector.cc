#include "algos/selector.h"

#include <strings.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "algos/algorithms.h"
#include "algos/channels.h"
#include "algos/p2p.h"
#include "algos/primitives.h"
#include "kernels/reduce_kernels.h"
#include "algos/scratch.h"
#include "runtime/comm.h"
#include "base/log.h"
#include "base/params.h"

namespace loom {

namespace {

struct Entry {
  CollType coll;
  Algo algo;
  loomResult_t (*run)(loomComm*, const CollArgs&);
};

// Every algorithm of every collective.  Reduce and reducescatter have one (the ring order chain /
// ring), broadcast the chain and, across three hosts or more, a tree of the hosts; alltoall is always
// flat (pairwise transfers).
const Entry kTable[] = {
    {CollType::AllReduce, Algo::Ring, ringAllReduce},       {CollType::AllReduce, Algo::Tree, treeAllReduce},
    {CollType::AllReduce, Algo::Rhd, rhdAllReduce},         {CollType::AllReduce, Algo::OneShot, oneShotAllReduce},
    {CollType::AllReduce, Algo::Hier, hierAllReduce},       {CollType::AllGather, Algo::Ring, ringAllGather},
    {CollType::AllGather, Algo::Flat, flatAllGather},       {CollType::Broadcast, Algo::Ring, chainBroadcast},
    {CollType::Broadcast, Algo::Tree, treeBroadcast},       {CollType::Reduce, Algo::Ring, chainReduce},
    {CollType::ReduceScatter, Algo::Ring, ringReduceScatter},
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
      if (strcasecmp(item.c_str(), algoName(static_cast<Algo>(i))) == 0) found = i;
    if (found < 0) {
      *bad = item;
      return false;
    }
    listed |= 1u << found;
  }
  *allowed = exclude ? *allowed & ~listed : listed;
  return true;
}


}  // namespace

std::vector<Candidate> rankCandidates(const loomComm* comm, const CollArgs& args) {
  // LOOM_ALGO does not change within a process: parse it once (it was validated at init).
  static const unsigned allowed = [] {
    unsigned a;
    std::string bad;
    parseFilter(params().ALGO, &a, &bad);
    return a;
  }();
  const size_t bytes = args.count * typeSize(args.type);
  const int hosts = comm->cluster ? static_cast<int>(comm->cluster->hosts.size()) : 1;
  const size_t slot = plannedStepBytes(comm, hosts > 1);
  // The rings of this call that leave the hosts by NICs of their own (one per rail; more channels than
  // rails share them).
  const int rails = std::min(ringChannels(comm, bytes, slot), std::max(1, static_cast<int>(comm->routes.rings.size())));
  std::vector<Candidate> all, kept;
  for (const Entry& e : kTable) {
    if (e.coll != args.coll) continue;
    all.push_back({e.algo, e.run, predictUs(comm->costModel, e.algo, e.coll, bytes, comm->nranks, hosts, slot, rails)});
    if (allowed & (1u << static_cast<int>(e.algo))) kept.push_back(all.back());
  }
  // A filter that leaves a collective nothing does not apply to it (LOOM_ALGO=tree still lets
  // broadcast run its chain).
  std::vector<Candidate>& out = kept.empty() ? all : kept;
  // GPUDirect RDMA moves GPU buffers by point-to-point transfers only (device/gdr_path.h): where every
  // rank may use it, allgather runs flat, reduce-scatter and allreduce run their ring of transfers
  // (transfer_ring.cc) and broadcast and reduce their chain of transfers (transfer_chain.cc) on every
  // rank, whatever the model or LOOM_ALGO prefer: the choice must be the same on all ranks, and some may
  // hold GPU buffers.
  if (comm->gdrEverywhere) {
    const double ringUs = predictUs(comm->costModel, Algo::Ring, args.coll, bytes, comm->nranks, hosts, slot, rails);
    if (args.coll == CollType::AllReduce) return {Candidate{Algo::Ring, transferRingAllReduce, ringUs}};
    if (args.coll == CollType::ReduceScatter) return {Candidate{Algo::Ring, transferRingReduceScatter, ringUs}};
    if (args.coll == CollType::Broadcast) return {Candidate{Algo::Ring, transferChainBroadcast, ringUs}};
    if (args.coll == CollType::Reduce) return {Candidate{Algo::Ring, transferChainReduce, ringUs}};
    if (args.coll == CollType::AllGather) {
      std::vector<Candidate> flat;
      for (const Candidate& c : all)
        if (c.algo == Algo::Flat) flat.push_back(c);
      return flat;
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.predictedUs < b.predictedUs; });
  return out;
}

loomResult_t checkAlgoFilter() {
  unsigned allowed;
  std::string bad;
  if (!parseFilter(params().ALGO, &allowed, &bad))
    return setError(loomInvalidArgument, "LOOM_ALGO=%s: unknown algorithm '%s' (known: %s)", params().ALGO.c_str(),
                    bad.c_str(), algoNames().c_str());
  return loomSuccess;
}

// GB/s of `bytes` moved since `start` (the time floored at 1 ns: a clock that reads no time at all).
static double gbPerSecondSince(size_t bytes, std::chrono::steady_clock::time_point start) {
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return bytes / 1e3 / std::max(us, 1e-3);
}

// Across hosts, the hand-over: rank 0 and the first rank of another host take half the median round
// trip of one small message, as the shm probe times the slots.  Every other rank has nothing to do;
// *stepUs stays 0 there.
static loomResult_t probeNetworkStep(loomComm* comm, double* stepUs) {
  int far = -1;
  for (int r = 1; r < comm->nranks && far < 0; ++r)
    if (comm->peers[r].hostHash != comm->peers[0].hostHash) far = r;
  if (far < 0 || (comm->rank != 0 && comm->rank != far)) return loomSuccess;
  const bool first = comm->rank == 0;
  const int peer = first ? far : 0;
  CollArgs p2p{};
  p2p.coll = CollType::Send;
  p2p.type = loomInt8;
  p2p.count = 8;
  char small[8] = {};
  auto transfer = [&](bool send) {
    return runTransfers(comm, {Transfer{peer, send, small, sizeof small, callSignature(p2p)}}, "the network probe");
  };
  // Three batches of 6 round trips, the least of their medians: a busy moment of a shared machine
  // spoils a batch, not the figure (one median of 16 read 97 us where every other run read 10.6, and the
  // selector decides with it: perf/sim_validate.py).
  std::vector<double> trips;
  double least = 0;
  for (int i = -2; i < 18; ++i) {  // two untimed: the connections are made then
    const auto t0 = std::chrono::steady_clock::now();
    LOOM_CHECK(transfer(first));
    LOOM_CHECK(transfer(!first));
    if (i < 0) continue;
    trips.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (trips.size() == 6) {
      std::nth_element(trips.begin(), trips.begin() + 3, trips.end());
      least = least == 0 ? trips[3] : std::min(least, trips[3]);
      trips.clear();
    }
  }
  *stepUs = least / 2;
  return loomSuccess;
}

// Across hosts, the bandwidths, timed with every rank moving at once as a call's ranks do (one pair
// timed while the others sat idle, divided by the ranks per core, read 4-host calls 25-50% fast:
// docs/perf/sim.md).  The hosts stand in a ring in the order of their first ranks, and each rank
// streams to the rank of the same index on the next host and from the one on the host before (a ring
// step; on 2 hosts both ways of one connection): three speeds, each this rank's best of a few tries,
// between which the ring trades one byte so that all start the next together.  4 MB streamed slot by
// slot (*gbs: one way, down the chain of hosts from the first to the last, as a chain's broadcast;
// the first host's ranks publish it), 4 MB round the ring both ways at once as a reduce-scatter's steps
// (*duplexGBs, each way: where the kernel's copies run on the hosts' cores, the directions share them),
// and 8 MB exchanged as one whole message each way (*directGBs: the p2p transfers of flat, oneshot and
// rhd).  The streams are timed as the rings and chains move data,
// not as one transfer: the 4 MB exchange that priced them before read 1.5-4.9 GB/s from run to run where
// the ring allreduce it priced took 4.85 ms every time (perf/sim_validate.py, 2026-12-06), and moves
// half what a ring's slot stream moves over the same connection.  A rank whose index some host has no
// rank of (hosts of unequal sizes) sits out; its outputs stay 0.
static loomResult_t probeNetworkSpeeds(loomComm* comm, double* gbs, double* duplexGBs, double* directGBs) {
  std::map<uint64_t, int> hostOf;  // host hash -> position in the ring of hosts
  std::vector<std::vector<int>> ranksOn;
  for (int r = 0; r < comm->nranks; ++r) {
    auto it = hostOf.emplace(comm->peers[r].hostHash, static_cast<int>(ranksOn.size())).first;
    if (it->second == static_cast<int>(ranksOn.size())) ranksOn.emplace_back();
    ranksOn[static_cast<size_t>(it->second)].push_back(r);
  }
  const int hosts = static_cast<int>(ranksOn.size());
  if (hosts < 2) return loomSuccess;
  const int host = hostOf[comm->peers[comm->rank].hostHash];
  const std::vector<int>& mine = ranksOn[static_cast<size_t>(host)];
  const size_t index = static_cast<size_t>(std::find(mine.begin(), mine.end(), comm->rank) - mine.begin());
  // The ring of this index closes only where every host has a rank of it.
  size_t fewest = mine.size();
  for (const std::vector<int>& there : ranksOn) fewest = std::min(fewest, there.size());
  if (index >= fewest) return loomSuccess;
  auto onHost = [&](int h) { return ranksOn[static_cast<size_t>((h + hosts) % hosts)][index]; };
  const int next = onHost(host + 1), prev = onHost(host - 1);
  using clock = std::chrono::steady_clock;
  CollArgs p2p{};
  p2p.coll = CollType::Send;
  p2p.type = loomInt8;
  char shake[1] = {};
  p2p.count = 1;
  const uint64_t shakeSignature = callSignature(p2p);
  auto handshake = [&] {
    return runTransfers(comm, {Transfer{next, true, shake, 1, shakeSignature},
                               Transfer{prev, false, shake, 1, shakeSignature}},
                        "the network probe");
  };
  const size_t bytes = 4u << 20;
  std::vector<char> big(bytes, 1), in(bytes);
  CollArgs stream{};
  stream.coll = CollType::Broadcast;
  stream.type = loomInt8;
  stream.count = bytes;
  // Whole messages of 8 MB (a 16 MB call's halves or blocks at 2 ranks), from and into buffers that
  // have left the caches: at 4 MB the exchange fits the sockets' buffers and read 2.4 GB/s each way
  // where rhd's 8 MB halves moved at 0.9 (and the ring, streaming the same call, at 1.5-2.3).
  const size_t wholeBytes = 8u << 20;
  std::vector<char> wholeOut(wholeBytes, 1), wholeIn(wholeBytes);
  p2p.count = wholeBytes;
  const uint64_t wholeSignature = callSignature(p2p);
  auto exchange = [&] {
    return runTransfers(comm, {Transfer{next, true, wholeOut.data(), wholeBytes, wholeSignature},
                               Transfer{prev, false, wholeIn.data(), wholeBytes, wholeSignature}},
                        "the network probe");
  };
  // Timed tries of `once` after one untimed (a new connection sends its first megabytes in TCP's slow
  // start, and the kernel grows its buffers as it goes; the calls after init find it warm).
  auto bestOf = [&](int tries, size_t moved, double* out, const auto& once) -> loomResult_t {
    for (int i = -1; i < tries; ++i) {
      LOOM_CHECK(handshake());
      const auto t0 = clock::now();
      LOOM_CHECK(once());
      if (i >= 0) *out = std::max(*out, gbPerSecondSince(moved, t0));
    }
    return handshake();
  };
  // One way: down the chain of hosts, as a broadcast's slices go (the hosts between relay them), timed
  // on the first host from its first byte until the last host says it has them all (a byte back round
  // the ring of hosts).  Only the first host's ranks publish it: its sends alone end as the socket
  // buffers take them, 3-4x sooner than the bytes arrive, and the last host's clock starts whenever its
  // handshake returns, with the chain's first megabytes already waiting for it in the buffers.  Slot
  // by slot on channel 0: the hosts between relay what they received (sending their own bytes instead,
  // without waiting for them to arrive, read 4-host chains 1.5-2x faster than their broadcasts), and
  // the slices land in the caller's buffer (Landing::kCaller: the receiver waits for the rank to name it).
  const bool sends = host + 1 < hosts, receives = host > 0;
  auto chain = [&]() -> loomResult_t {
    Primitives prims(comm, sends ? next : -1, receives ? prev : -1, 0, stream, "the network probe");
    for (size_t off = 0; off < bytes; off += prims.maxElems()) {
      const size_t len = std::min(prims.maxElems(), bytes - off);
      if (sends && receives) {
        LOOM_CHECK(prims.recvCopySend(in.data() + off, len));
      } else if (sends) {
        LOOM_CHECK(prims.sendFinal(big.data() + off, len, Landing::kCaller));
      } else {
        LOOM_CHECK(prims.recv(in.data() + off, len));
      }
    }
    LOOM_CHECK(comm->flushSends());
    if (sends && receives) return loomSuccess;
    return runTransfers(comm, {Transfer{sends ? prev : next, !sends, shake, 1, shakeSignature}}, "the network probe");
  };
  double elsewhere = 0;
  LOOM_CHECK(bestOf(5, bytes, host == 0 ? gbs : &elsewhere, chain));
  // Both ways: round the ring of hosts as a ring's reduce-scatter goes (hosts - 1 steps of
  // bytes / (hosts - 1) each, so that every connection moves `bytes`): each rank sends its own slice,
  // adds what the wire read ahead into the slots to its own and passes the sum on, and keeps the last
  // sum in a chunk that stays in cache.  Each rank sending only its own bytes, no step waiting for the
  // one before, read 4-host rings 1.5-2x faster than their reduce-scatters (4 ranks on 2 cores: a step
  // waits for a rank to be woken); on 2 hosts the two are the same.
  CollArgs sums = stream;
  sums.coll = CollType::ReduceScatter;
  sums.op = loomSum;
  const size_t block = bytes / static_cast<size_t>(hosts - 1);
  auto ring = [&]() -> loomResult_t {
    Primitives prims(comm, next, prev, 0, sums, "the network probe");
    for (size_t off = 0; off < block; off += prims.maxElems()) {
      const size_t len = std::min(prims.maxElems(), block - off);
      LOOM_CHECK(prims.sendFinal(big.data() + off, len, Landing::kSlot));
      for (int step = 1; step + 1 < hosts; ++step) LOOM_CHECK(prims.recvReduceSend(big.data() + off, len));
      LOOM_CHECK(prims.recvReduceCopy(big.data() + off, in.data(), len, 0));
    }
    return comm->flushSends();
  };
  LOOM_CHECK(bestOf(5, block * static_cast<size_t>(hosts - 1), duplexGBs, ring));
  LOOM_CHECK(bestOf(3, wholeBytes, directGBs, exchange));  // 3: each is 8-16 ms here
  LOOM_INFO(kAlgo, "network probe to rank %d, from rank %d: %.2f GB/s streamed one way, %.2f each way both at "
            "once, %.2f each way as whole messages", next, prev, *gbs, *duplexGBs, *directGBs);
  return loomSuccess;
}

// Copy bandwidth, measured locally: 512 KB stays in cache, 8 MB does not.  Once per process: it is the
// machine's, and the 16 MB it copies through made 256 in-process ranks (loomCommInitAll) hold 4 GB.
struct CopySpeeds {
  double cacheGBs = 0, memGBs = 0;
};

static CopySpeeds copySpeeds() {
  static std::mutex mu;
  static CopySpeeds measured;
  std::lock_guard<std::mutex> lock(mu);
  if (measured.memGBs > 0) return measured;
  using clock = std::chrono::steady_clock;
  const size_t small = 512u << 10, big = 8u << 20;
  std::vector<char> a(big, 1), b(big, 2);
  const CopyFn copy = reduceKernels().copy;
  // Best of a few tries: on a shared machine one try can be preempted and read 100x too slow.
  copy(b.data(), a.data(), small);
  for (int i = 0; i < 4; ++i) {
    auto t0 = clock::now();
    copy(b.data(), a.data(), small);
    measured.cacheGBs = std::max(measured.cacheGBs, gbPerSecondSince(small, t0));
  }
  // 8 x 8 MB: a few ms.  Best of them, as one slow moment of a shared machine spoils a try, not the
  // figure (4 tries read 7-23 GB/s in some jobs of perf/sim_validate.py where others read 30-35).
  for (int i = 0; i < 8; ++i) {
    auto t0 = clock::now();
    copy(b.data(), a.data(), big);
    measured.memGBs = std::max(measured.memGBs, gbPerSecondSince(big, t0));
  }
  return measured;
}

// The last-level cache's share per core (MB), from sysfs: cpu0's largest cache over the CPUs that share
// it; 0 where the kernel does not say (the model keeps its constant).
static double lastLevelCacheShareMB() {
  double largestMB = 0;
  int sharers = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream sizeFile(dir + "size"), sharedFile(dir + "shared_cpu_list");
    std::string size, shared;
    if (!(sizeFile >> size) || !(sharedFile >> shared)) break;
    char* end = nullptr;
    double mb = std::strtod(size.c_str(), &end) / 1024;  // "32768K"
    if (end != nullptr && *end == 'M') mb *= 1024;
    // "0-7,16-23": count the CPUs of each range.
    int cpus = 0;
    std::stringstream ranges(shared);
    for (std::string range; std::getline(ranges, range, ',');) {
      const size_t dash = range.find('-');
      cpus += dash == std::string::npos ? 1 : std::atoi(range.c_str() + dash + 1) - std::atoi(range.c_str()) + 1;
    }
    if (cpus > 0 && mb > largestMB) largestMB = mb, sharers = cpus;
  }
  return sharers > 0 ? largestMB / sharers : 0;
}

// Ranks per core on the most crowded machine (one kernel: hosts in network namespaces or containers on
// it share its cores, and so do their socket copies), at least 1.  From every rank's description, so
// that every rank's model, and so its choice, is the same.
static double busiestMachine(const loomComm* comm) {
  std::map<uint64_t, int> ranks;  // per machine; one pass, so a large job's init stays linear
  for (const PeerInfo& p : comm->peers) ++ranks[p.machineHash];
  double most = 1;
  for (const PeerInfo& p : comm->peers)
    most = std::max(most, static_cast<double>(ranks[p.machineHash]) / std::max(1, p.cpuCount));
  return most;
}

loomResult_t tuneCostModel(loomComm* comm) {
  CostModel m;
  m.hostDirectPostMin = comm->costModel.hostDirectPostMin;  // the runtime's, from the transports
  m.oversubscription = busiestMachine(comm);
  if (m.oversubscription > 1) m.stepUs *= 2 * m.oversubscription;  // a hand-over may wait for a rank to wake
  if (params().TUNE_PROBE == 0 || comm->nranks == 1) {
    comm->costModel = m;
    return loomSuccess;
  }
  using clock = std::chrono::steady_clock;
  // The hand-over latency first, while no rank is busy probing anything else.
  struct Probe {
    double stepUs, cacheGBs, memGBs, llcMB, netStepUs, netGBs, netDuplexGBs, netDirectGBs;
  };
  std::vector<Probe> all(comm->nranks);
  Probe& mine = all[comm->rank];
  // What a step costs inside a collective (all ranks sending at once, each waiting for what the step
  // before brought it).  Up to 8 ranks: time one-element ring allreduces, 2(n-1) steps each, after two
  // untimed ones that wait for every rank; of three batches of 4 calls, the least median counts (a busy
  // moment of a shared machine spoils a batch, not the figure: one median of 8 read 100 us where the
  // other runs of perf/sim_validate.py read 10-12).  With more, a ring's steps would make
  // the probe O(n) hand-overs long (10 calls of 510 steps were half of a 256-process init): time
  // butterflies instead, ceil(log2 n) steps in which every rank swaps one element with the rank that
  // differs in one bit and keeps the larger (a rank whose partner is past the end sits the step out).
  // Independent rounds of a shift would not do: slots let a rank run rounds ahead, and a round then
  // costs a fraction of a hand-over (0.6 us against the ring's 5.3 at 8-9 ranks on 2 cores).
  const int n = comm->nranks;
  double typical = 0;  // us per call
  auto timeEach = [&](int untimed, const auto& once) -> loomResult_t {
    std::vector<double> batch;
    for (int i = -untimed; i < 12; ++i) {
      const auto s0 = clock::now();
      LOOM_CHECK(once());
      if (i < 0) continue;
      batch.push_back(std::chrono::duration<double, std::micro>(clock::now() - s0).count());
      if (batch.size() == 4) {
        std::nth_element(batch.begin(), batch.begin() + 2, batch.end());
        typical = typical == 0 ? batch[2] : std::min(typical, batch[2]);
        batch.clear();
      }
    }
    return loomSuccess;
  };
  if (n <= 8) {
    float value = 1.0f;
    CollArgs tiny{};
    tiny.coll = CollType::AllReduce;
    tiny.sendbuff = &value;
    tiny.recvbuff = &value;
    tiny.count = 1;
    tiny.type = loomFloat32;
    tiny.op = loomMax;
    LOOM_CHECK(timeEach(2, [&] { return ringAllReduce(comm, tiny); }));
    mine.stepUs = typical / (2.0 * (n - 1));
  } else {
    CollArgs one{};
    one.coll = CollType::Send;
    one.count = 1;
    one.type = loomFloat32;
    const uint64_t signature = callSignature(one);
    int steps = 0;
    while ((1 << steps) < n) ++steps;
    auto butterfly = [&]() -> loomResult_t {
      float held = static_cast<float>(comm->rank), theirs = 0;
      char* const out = reinterpret_cast<char*>(&held);
      char* const in = reinterpret_cast<char*>(&theirs);
      for (int k = 0; k < steps; ++k) {
        const int partner = comm->rank ^ (1 << k);
        if (partner >= n) continue;
        LOOM_CHECK(runTransfers(comm, {Transfer{partner, true, out, sizeof held, signature},
                                       Transfer{partner, false, in, sizeof theirs, signature}},
                                "the hand-over probe"));
        held = std::max(held, theirs);
      }
      return loomSuccess;
    };
    LOOM_CHECK(timeEach(2, butterfly));
    mine.stepUs = typical / steps;
  }
  // The copy speeds are the machine's: its first rank measures them (each process that measures
  // allocates and copies through 16 MB, 10-20 ms of a core: seconds for hundreds of processes on a few
  // cores), the others publish 0.
  mine.cacheGBs = mine.memGBs = mine.llcMB = 0;
  if (comm->firstRankOf(&PeerInfo::machineHash)) {
    const CopySpeeds speeds = copySpeeds();
    mine.cacheGBs = speeds.cacheGBs;
    mine.memGBs = speeds.memGBs;
    mine.llcMB = lastLevelCacheShareMB();
  }
  mine.netStepUs = mine.netGBs = mine.netDuplexGBs = mine.netDirectGBs = 0;
  LOOM_CHECK(probeNetworkStep(comm, &mine.netStepUs));
  LOOM_CHECK(probeNetworkSpeeds(comm, &mine.netGBs, &mine.netDuplexGBs, &mine.netDirectGBs));
  LOOM_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Probe)));
  // Every rank combines them the same way: rank 0's latency, the median of the machines' copy speeds
  // (robust to one that was descheduled while it measured).
  m.stepUs = all[0].stepUs;
  // (Rank 0 is first on its machine, so one speed at least is there; a clock that read no time keeps
  // the model's constant.)
  auto median = [&](double Probe::*field, double fallback) {
    std::vector<double> v;
    for (const Probe& p : all)
      if (p.*field > 0) v.push_back(p.*field);
    if (v.empty()) return fallback;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  m.cacheCopyGBs = median(&Probe::cacheGBs, m.cacheCopyGBs);
  m.memCopyGBs = median(&Probe::memGBs, m.memCopyGBs);
  m.llcShareMB = median(&Probe::llcMB, m.llcShareMB);
  m.probed = true;
  if (all[0].netStepUs > 0) {  // rank 0 timed the network (the job spans hosts)
    m.netStepUs = all[0].netStepUs;
    // The ranks' median, as the connections moved with every rank busy: scaled up by the ranks per core,
    // which the model divides by again (the fields hold what a connection moves on a core of its own).
    const double f = std::max(1.0, m.oversubscription);
    m.netGBs = f * median(&Probe::netGBs, m.netGBs / f);
    m.netDuplexGBs = f * median(&Probe::netDuplexGBs, m.netDuplexGBs / f);
    m.netDirectGBs = f * median(&Probe::netDirectGBs, m.netDirectGBs / f);
    m.netProbed = true;
  }
  comm->costModel = m;
  LOOM_INFO(kAlgo, "cost model: %s; loom-sim --model %s", m.describe().c_str(), m.spec().c_str());
  return loomSuccess;
}

loomResult_t inheritCostModel(loomComm* comm, const CostModel& parent) {
  if (!parent.probed) return tuneCostModel(comm);
  CostModel m = parent;
  m.hostDirectPostMin = comm->costModel.hostDirectPostMin;
  // The copy and network speeds are the machines'; a hand-over's latency grows with the ranks that take
  // turns on a core (the constant model's assumption too), so it scales with the new crowding.
  m.oversubscription = busiestMachine(comm);
  m.stepUs = parent.stepUs * std::max(1.0, m.oversubscription) / std::max(1.0, parent.oversubscription);
  comm->costModel = m;
  LOOM_INFO(kAlgo, "cost model (from the parent communicator): %s; loom-sim --model %s", m.describe().c_str(),
            m.spec().c_str());
  return loomSuccess;
}

}  // namespace loom
