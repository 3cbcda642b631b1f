#include "topo/routes.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>

#include "base/error.h"

namespace loom {

namespace {

// How good an order of a host's devices is: the bandwidth left to the ring on its most shared link,
// then leaving the host nearest its NIC, then the fewest hops across CPU sockets, then the fewest links.
struct Score {
  double bw = -1;
  int exit = 0;  // path type from the last device to the NIC: leaving near the NIC spares the PCIe tree
  int sys = 0, hops = 0;
  bool better(const Score& o) const {
    if (bw > o.bw * 1.0001) return true;
    if (bw < o.bw * 0.9999) return false;
    if (exit != o.exit) return exit < o.exit;
    if (sys != o.sys) return sys < o.sys;
    return hops < o.hops;
  }
};

struct Usage {
  std::vector<int> uses;  // directed link -> hops crossing it
  int sys = 0, hops = 0;
  explicit Usage(const TopoSystem& s) : uses(2 * s.links.size(), 0) {}
  void add(const TopoPath& p, int sign) {
    for (int h : p.hops) uses[h] += sign;
    if (p.type == PathType::SYS) sys += sign;
    hops += sign * static_cast<int>(p.hops.size());
  }
  double bw(const TopoSystem& s) const {
    double b = 1e9;
    for (size_t i = 0; i < uses.size(); ++i)
      if (uses[i] > 0) b = std::min(b, s.links[i / 2].bw / uses[i]);
    return b;
  }
};

struct HostOrder {
  std::vector<int> devices;  // the visiting order
  double bw = 0;
  int sysHops = 0;
};

// The best cyclic order of `devs` (or, with a NIC, the best path that leaves the NIC and comes back to
// it).  Exhaustive up to 10 devices with the first fixed; above, the PCI tree's depth-first order.
HostOrder searchHost(const TopoSystem& s, const std::vector<int>& devs, int nic, const std::vector<int>& boundToNic) {
  HostOrder best;
  const int k = static_cast<int>(devs.size());
  if (k == 1 && nic < 0) {
    best.devices = devs;
    best.bw = 1e9;
    return best;
  }
  Score bestScore;
  std::vector<int> order;
  Usage u(s);
  // With a NIC the ring enters the host at a device nearest to it.
  std::vector<bool> canStart(k, true);
  if (nic >= 0) {
    int nearest = static_cast<int>(PathType::NET);
    for (int d : devs) nearest = std::min(nearest, static_cast<int>(s.path(nic, d).type));
    for (int i = 0; i < k; ++i) canStart[i] = static_cast<int>(s.path(nic, devs[i]).type) == nearest;
    // Among those, the devices whose ranks are bound to this NIC, so that each rail enters at its own GPU.
    std::vector<bool> bound(k, false);
    bool any = false;
    for (int i = 0; i < k; ++i)
      if (canStart[i] && std::find(boundToNic.begin(), boundToNic.end(), devs[i]) != boundToNic.end())
        bound[i] = any = true;
    if (any) canStart = bound;
  }
  auto evaluate = [&]() {
    if (nic >= 0) {
      u.add(s.path(nic, order.front()), 1);
      u.add(s.path(order.back(), nic), 1);
    } else if (k > 1) {
      u.add(s.path(order.back(), order.front()), 1);
    }
    Score sc{u.bw(s), nic >= 0 ? static_cast<int>(s.path(order.back(), nic).type) : 0, u.sys, u.hops};
    if (nic >= 0) sc.bw = std::min(sc.bw, s.nicBw(nic));
    if (bestScore.bw < 0 || sc.better(bestScore)) {
      bestScore = sc;
      best.devices = order;
    }
    if (nic >= 0) {
      u.add(s.path(nic, order.front()), -1);
      u.add(s.path(order.back(), nic), -1);
    } else if (k > 1) {
      u.add(s.path(order.back(), order.front()), -1);
    }
  };
  if (k <= 10) {
    std::vector<bool> used(k, false);
    std::function<void()> dfs = [&]() {
      if (static_cast<int>(order.size()) == k) return evaluate();
      // The bandwidth only falls as hops are added: a partial order already below the best is dropped.
      if (bestScore.bw >= 0 && u.bw(s) < bestScore.bw * 0.9999) return;
      for (int i = 0; i < k; ++i) {
        if (used[i] || (order.empty() && !canStart[i])) continue;
        used[i] = true;
        if (!order.empty()) u.add(s.path(order.back(), devs[i]), 1);
        order.push_back(devs[i]);
        dfs();
        order.pop_back();
        if (!order.empty()) u.add(s.path(order.back(), devs[i]), -1);
        used[i] = false;
        if (nic < 0 && order.empty()) break;  // a cycle: fixing the first device loses nothing
      }
    };
    dfs();
  } else {
    // Depth-first order of the PCI tree: devices under one switch, then one CPU, stay together.
    auto key = [&](int d) {
      std::vector<int> chain{d};
      while (s.nodes[chain.back()].parent >= 0) chain.push_back(s.nodes[chain.back()].parent);
      std::reverse(chain.begin(), chain.end());
      return chain;
    };
    order = devs;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
    for (int i = 0; i + 1 < k; ++i) u.add(s.path(order[i], order[i + 1]), 1);
    evaluate();
  }
  best.bw = bestScore.bw;
  best.sysHops = bestScore.sys;
  return best;
}

}  // namespace

void doubleBinaryTree(int n, std::vector<int> parent[2]) {
  // Tree 0 over positions x = 1..n: node x with lowest set bit h has children x - h/2 and the largest
  // x + c (c = h/2, h/4, ...) that exists; odd x are the leaves, the largest power of two is the root.
  // Tree 1 is tree 0 shifted by one rank, so the interior ranks of the two trees are disjoint (the odd
  // ranks in tree 0, the even ones in tree 1): every rank is a leaf in at least one tree.
  for (int t = 0; t < 2; ++t) parent[t].assign(n, -1);
  for (int x = 1; x <= n; ++x) {
    int h = x & -x;
    std::vector<int> kids;
    if (h >= 2) kids.push_back(x - h / 2);
    for (int c = h / 2; c >= 1; c /= 2)
      if (x + c <= n) {
        kids.push_back(x + c);
        break;
      }
    for (int kid : kids) {
      parent[0][kid - 1] = x - 1;
      parent[1][kid % n] = x % n;
    }
  }
}

loomResult_t planRoutes(const Cluster& c, RoutePlan* out) {
  auto start = std::chrono::steady_clock::now();
  const int nhosts = static_cast<int>(c.hosts.size());
  *out = RoutePlan();
  if (c.nranks() == 0) return setError(loomInvalidArgument, "no ranks to plan for");
  // Per host: its ranks grouped by device (ranks sharing a device are neighbours in every ring).
  std::vector<std::vector<int>> devs(nhosts);
  std::vector<std::map<int, std::vector<int>>> ranksOn(nhosts);
  for (int r = 0; r < c.nranks(); ++r) {
    const RankPlace& p = c.ranks[r];
    if (ranksOn[p.host][p.device].empty()) devs[p.host].push_back(p.device);
    ranksOn[p.host][p.device].push_back(r);
  }
  std::vector<int> usedHosts;
  for (int h = 0; h < nhosts; ++h)
    if (!devs[h].empty()) usedHosts.push_back(h);
  const bool multiHost = usedHosts.size() > 1;
  // Rails: the NICs a host's ranks are bound to, in rank order; ring c uses each host's c-th rail.
  std::vector<std::vector<int>> rails(nhosts);
  size_t nrings = 1;
  if (multiHost) {
    nrings = SIZE_MAX;
    for (int h : usedHosts) {
      for (int d : devs[h])
        for (int r : ranksOn[h][d]) {
          int nic = c.ranks[r].nic;
          if (nic >= 0 && std::find(rails[h].begin(), rails[h].end(), nic) == rails[h].end()) rails[h].push_back(nic);
        }
      if (rails[h].empty())
        return setError(loomInvalidArgument, "host %s has ranks but no NIC to reach the other hosts",
                        c.hostNames[h].c_str());
      nrings = std::min(nrings, rails[h].size());
    }
  }
  // Identical hosts (the same model object, or the same file) are searched once.
  std::map<std::tuple<const TopoSystem*, std::vector<int>, int>, HostOrder> memo;
  for (size_t ch = 0; ch < nrings; ++ch) {
    Ring ring;
    ring.bw = 1e9;
    ring.nicOfHost.assign(nhosts, -1);
    int sysHops = 0;
    for (int h : usedHosts) {
      const TopoSystem& s = *c.hosts[h];
      int nic = multiHost ? rails[h][ch] : -1;
      std::vector<int> bound;
      for (int d : devs[h])
        if (c.ranks[ranksOn[h][d].front()].nic == nic && nic >= 0) bound.push_back(d);
      auto key = std::make_tuple(&s, devs[h], nic);
      auto it = memo.find(key);
      if (it == memo.end()) it = memo.emplace(key, searchHost(s, devs[h], nic, bound)).first;
      const HostOrder& o = it->second;
      for (int d : o.devices)
        for (int r : ranksOn[h][d]) ring.ranks.push_back(r);
      ring.nicOfHost[h] = nic;
      ring.bw = std::min(ring.bw, o.bw);
      sysHops = std::max(sysHops, o.sysHops);
    }
    if (c.nranks() == 1) ring.bw = 0;
    ring.reason = ring.bw >= 1e8 ? std::string("all ranks on one device: local memory copies")
                                 : "bottleneck " + bandwidthText(ring.bw) + (sysHops ? ", crosses the CPU socket link " + std::to_string(sysHops) + " times per host" : "");
    if (multiHost) {
      const TopoSystem& s0 = *c.hosts[usedHosts[0]];
      ring.reason += "; rail " + std::to_string(ch) + " (" + s0.nodes[rails[usedHosts[0]][ch]].name + " on " +
                     c.hostNames[usedHosts[0]] + ")";
    }
    out->rings.push_back(std::move(ring));
  }
  // Trees: one binary tree over the hosts and its complement; inside a host, a chain in ring order whose
  // head (the rank nearest the ring's NIC) links to the other hosts.  On one host both trees are chains,
  // one each way round the ring.
  const int n = c.nranks();
  for (int t = 0; t < 2; ++t) {
    Tree& tree = out->trees[t];
    tree.parent.assign(n, -1);
    tree.children.assign(n, {});
    const Ring& ring = out->rings[t % out->rings.size()];
    std::vector<int> chainOrder = ring.ranks;
    if (!multiHost && t == 1) std::reverse(chainOrder.begin(), chainOrder.end());
    std::vector<int> head(nhosts, -1);
    for (size_t i = 0; i < chainOrder.size(); ++i) {
      int r = chainOrder[i];
      int h = c.ranks[r].host;
      if (head[h] < 0) head[h] = r;
      else tree.parent[r] = chainOrder[i - 1];
    }
    if (multiHost) {
      std::vector<int> hostParent[2];
      doubleBinaryTree(static_cast<int>(usedHosts.size()), hostParent);
      for (size_t i = 0; i < usedHosts.size(); ++i) {
        int p = hostParent[t][i];
        if (p >= 0) tree.parent[head[usedHosts[i]]] = head[usedHosts[p]];
        else tree.root = head[usedHosts[i]];
      }
    } else {
      tree.root = chainOrder.front();
    }
    for (int r = 0; r < n; ++r)
      if (tree.parent[r] >= 0) tree.children[tree.parent[r]].push_back(r);
  }
  double treeBw = out->rings[0].bw;
  if (multiHost)
    for (int h : usedHosts) treeBw = std::min(treeBw, c.hosts[h]->nicBw(rails[h][0]));
  out->treeBw = treeBw;
  out->treeReason = multiHost ? "binary trees over " + std::to_string(usedHosts.size()) +
                                    " hosts (complementary), chains inside each host; bottleneck " + bandwidthText(treeBw)
                              : "one host: two chains, one each way round ring 0";
  out->searchSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return loomSuccess;
}

}  // namespace loom
