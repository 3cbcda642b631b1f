#include "sim/simulate.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/params.h"
#include "sim/traffic.h"

namespace loom {

namespace {

// Typical figures for GPU ranks (not measured here): a hand-over between GPUs of one host (NVLink or
// PCIe) and across hosts (RDMA), and the speed of a copy or reduction pass through GPU memory (HBM
// reads and writes at 1.5-3 TB/s, a pass reading and writing: ~1 TB/s).
constexpr double kGpuStepUs = 2.0, kGpuNetStepUs = 6.0, kGpuCopyGBs = 1000.0;
constexpr int kMaxChannels = 16;  // as algos/channels.h

// Bytes each directed link of each host carries in the current phase (x S), and over the whole call.
class LinkLoads {
 public:
  explicit LinkLoads(const Cluster& c) : c_(c), phase_(c.hosts.size()), call_(c.hosts.size()) {
    for (size_t h = 0; h < c.hosts.size(); ++h) {
      phase_[h].assign(2 * c.hosts[h]->links.size(), 0.0);
      call_[h].assign(2 * c.hosts[h]->links.size(), 0.0);
    }
  }

  void add(int host, const TopoPath& p, double units) {
    std::vector<double>& load = phase_[static_cast<size_t>(host)];
    for (int hop : p.hops) {
      if (load[static_cast<size_t>(hop)] == 0) touched_.push_back({host, hop});
      load[static_cast<size_t>(hop)] += units;
    }
  }

  // The NIC port (its fastest NET node) that traffic of `nic` leaves and enters a host by.
  int port(int host, int nic) {
    const TopoSystem* s = c_.hosts[static_cast<size_t>(host)].get();
    auto key = std::make_pair(s, nic);
    auto it = ports_.find(key);
    if (it != ports_.end()) return it->second;
    int best = -1;
    for (int net : s->netsOf(nic))
      if (best < 0 || s->nodes[net].speedGBs > s->nodes[best].speedGBs) best = net;
    return ports_[key] = best < 0 ? nic : best;
  }

  // Ends a phase: its time (the busiest link's) in us for a call of S bytes, where a link of `cap`
  // GB/s or more is taken at `cap` when it is a NIC port (cap <= 0: none).
  double endPhase(double S, double cap) {
    double longest = 0;
    for (const auto& [host, hop] : touched_) {
      double& load = phase_[static_cast<size_t>(host)][static_cast<size_t>(hop)];
      const double us = load * S / (1e3 * gbs(host, hop, cap));
      longest = std::max(longest, us);
      call_[static_cast<size_t>(host)][static_cast<size_t>(hop)] += load;
      load = 0;
    }
    touched_.clear();
    return longest;
  }

  // The `most` links that were busiest over the call.
  std::vector<LinkUse> busiest(double S, double cap, size_t most) const {
    std::vector<LinkUse> all;
    for (size_t h = 0; h < call_.size(); ++h)
      for (size_t hop = 0; hop < call_[h].size(); ++hop) {
        const double units = call_[h][hop];
        if (units <= 0) continue;
        const double g = gbs(static_cast<int>(h), static_cast<int>(hop), cap);
        LinkUse u{name(static_cast<int>(h), static_cast<int>(hop)), g, units, units * S / (1e3 * g)};
        if (all.size() < most || u.busyUs > all.back().busyUs) {
          all.push_back(u);
          std::sort(all.begin(), all.end(), [](const LinkUse& a, const LinkUse& b) { return a.busyUs > b.busyUs; });
          if (all.size() > most) all.pop_back();
        }
      }
    return all;
  }

 private:
  double gbs(int host, int hop, double cap) const {
    const TopoLink& l = c_.hosts[static_cast<size_t>(host)]->links[static_cast<size_t>(hop / 2)];
    const double bw = l.bw > 0 ? l.bw : 1e-3;
    return l.type == LinkType::Net && cap > 0 ? std::min(bw, cap) : bw;
  }

  std::string name(int host, int hop) const {
    const TopoSystem& s = *c_.hosts[static_cast<size_t>(host)];
    const TopoLink& l = s.links[static_cast<size_t>(hop / 2)];
    const int from = hop % 2 == 0 ? l.a : l.b, to = hop % 2 == 0 ? l.b : l.a;
    return c_.hostNames[static_cast<size_t>(host)] + " " + s.nodes[from].name + "->" + s.nodes[to].name;
  }

  const Cluster& c_;
  std::vector<std::vector<double>> phase_, call_;
  std::vector<std::pair<int, int>> touched_;
  std::map<std::pair<const TopoSystem*, int>, int> ports_;
};

// Puts a phase's flows on the links.
void routePhase(const Cluster& c, const RoutePlan& plan, const Phase& ph, LinkLoads* loads) {
  auto nicOf = [&](int rank, int ring) {
    const int host = c.ranks[rank].host;
    if (ring >= 0 && plan.rings[ring].nicOfHost[host] >= 0) return plan.rings[ring].nicOfHost[host];
    return c.ranks[rank].nic;
  };
  auto out = [&](int rank, int nic, double units) {  // from a rank's device to its host's NIC port
    const RankPlace& p = c.ranks[rank];
    if (nic >= 0) loads->add(p.host, c.sys(rank).path(p.device, loads->port(p.host, nic)), units);
  };
  auto in = [&](int rank, int nic, double units) {
    const RankPlace& p = c.ranks[rank];
    if (nic >= 0) loads->add(p.host, c.sys(rank).path(loads->port(p.host, nic), p.device), units);
  };
  for (const Flow& f : ph.flows) {
    const RankPlace& a = c.ranks[f.from];
    const RankPlace& b = c.ranks[f.to];
    if (a.host == b.host) {
      if (a.device != b.device) loads->add(a.host, c.sys(f.from).path(a.device, b.device), f.units);
      continue;
    }
    out(f.from, nicOf(f.from, f.ring), f.units);
    in(f.to, nicOf(f.to, f.ring), f.units);
  }
  if (ph.allPairsUnits <= 0) return;
  // Every ordered pair: inside a host each pair's path; to and from the other hosts, a rank's NIC
  // carries its traffic to all of their ranks.
  std::vector<std::vector<int>> onHost(c.hosts.size());
  for (int r = 0; r < c.nranks(); ++r) onHost[static_cast<size_t>(c.ranks[r].host)].push_back(r);
  const double u = ph.allPairsUnits;
  for (const std::vector<int>& local : onHost) {
    const double away = static_cast<double>(c.nranks()) - static_cast<double>(local.size());
    for (int a : local) {
      for (int b : local)
        if (a != b && c.ranks[a].device != c.ranks[b].device)
          loads->add(c.ranks[a].host, c.sys(a).path(c.ranks[a].device, c.ranks[b].device), u);
      if (away > 0) {
        out(a, c.ranks[a].nic, u * away);
        in(a, c.ranks[a].nic, u * away);
      }
    }
  }
}

// The slowest NIC port any rank uses: what the selector's network probe would measure at line rate.
double slowestPort(const Cluster& c) {
  double slowest = 0;
  for (const RankPlace& p : c.ranks)
    if (p.nic >= 0) {
      const double bw = c.hosts[static_cast<size_t>(p.host)]->nicBw(p.nic);
      if (bw > 0 && (slowest == 0 || bw < slowest)) slowest = bw;
    }
  return slowest;
}

}  // namespace

SimMachine defaultMachine(const Cluster& c) {
  SimMachine m;
  bool gpus = c.nranks() > 0;
  for (int r = 0; r < c.nranks(); ++r) gpus = gpus && c.isGpu(r);
  if (gpus) {
    m.model.stepUs = kGpuStepUs, m.model.netStepUs = kGpuNetStepUs;
    m.model.cacheCopyGBs = m.model.memCopyGBs = kGpuCopyGBs;
    m.model.llcShareMB = 1e9;  // GPU memory's one speed: no cache level to outgrow
    m.overlap = true;
    m.source = "typical GPU figures (hand-over 2 us in a host, 6 us across; GPU memory at 1000 GB/s a pass, "
               "beside the transfers)";
  } else {
    // Ranks per core on the most crowded host, as the runtime counts them (algos/selector.cc).
    std::vector<int> ranks(c.hosts.size(), 0);
    for (const RankPlace& p : c.ranks) ++ranks[static_cast<size_t>(p.host)];
    double most = 1;
    for (size_t h = 0; h < c.hosts.size(); ++h) {
      int cores = 0;
      for (int cpu : c.hosts[h]->ofType(NodeType::Cpu)) cores += c.hosts[h]->nodes[cpu].cores;
      if (cores > 0) most = std::max(most, static_cast<double>(ranks[h]) / cores);
    }
    m.model.oversubscription = most;
    if (most > 1) m.model.stepUs *= 2 * most;  // a hand-over may wait for a rank to wake (as tuneCostModel)
    m.source = "the cost model's constants for CPU ranks (no probe)";
  }
  if (slowestPort(c) > 0)  // a NIC: full duplex, whole messages or streamed
    m.model.netGBs = m.model.netDuplexGBs = m.model.netDirectGBs = slowestPort(c);
  return m;
}

size_t simStepBytes(bool acrossHosts) {
  if (params().CHUNK_SIZE > 0) return static_cast<size_t>(params().CHUNK_SIZE);
  const size_t shm = static_cast<size_t>(params().SHM_SLOT_SIZE), net = static_cast<size_t>(params().NET_SLOT_SIZE);
  return acrossHosts ? std::min(shm, net) : shm;
}

std::vector<SimEstimate> simulate(const Cluster& c, const RoutePlan& plan, const SimMachine& m, CollType coll,
                                  size_t bytes) {
  const int n = c.nranks(), hosts = usedHosts(c);
  const size_t slot = simStepBytes(hosts > 1);
  const double S = static_cast<double>(bytes), f = std::max(1.0, m.model.oversubscription);
  const long long wanted = params().NCHANNELS > 0 ? params().NCHANNELS : static_cast<long long>(plan.rings.size());
  const int channels = channelsFor(std::max(1LL, wanted), bytes, n, slot, kMaxChannels);
  std::vector<SimEstimate> out;
  for (int i = 0; i < kNumAlgos; ++i) {
    const Algo algo = static_cast<Algo>(i);
    const int rails = std::min(channels, std::max(1, static_cast<int>(plan.rings.size())));
    const CallCost cost = callCost(m.model, algo, coll, bytes, n, hosts, slot, rails);
    const Traffic traffic = trafficOf(coll, algo, c, plan, channels);
    if (!cost.applies || !traffic.applies) continue;
    const double cap = m.capNet ? netSpeedGBs(m.model, cost) / f : 0.0;
    SimEstimate e;
    e.algo = algo;
    e.pattern = traffic.pattern;
    e.latencyUs = cost.latencyUs, e.memoryUs = cost.memoryUs;
    LinkLoads loads(c);
    for (const Phase& ph : traffic.phases) {
      routePhase(c, plan, ph, &loads);
      e.linkUs += cost.netSlowdown * loads.endPhase(S, cap);
    }
    e.us = e.latencyUs + (m.overlap ? std::max(e.memoryUs, e.linkUs) : e.memoryUs + e.linkUs);
    e.busiest = loads.busiest(S, cap, 3);
    e.selectorUs = predictUs(m.model, algo, coll, bytes, n, hosts, slot, rails);
    out.push_back(std::move(e));
  }
  if (!out.empty()) {
    auto pick = std::min_element(out.begin(), out.end(),
                                 [](const SimEstimate& a, const SimEstimate& b) { return a.selectorUs < b.selectorUs; });
    pick->chosen = true;
  }
  std::stable_sort(out.begin(), out.end(), [](const SimEstimate& a, const SimEstimate& b) { return a.us < b.us; });
  return out;
}

}  // namespace loom
