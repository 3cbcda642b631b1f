#include "sim/traffic.h"

#include <algorithm>
#include <cstdio>

namespace loom {

namespace {

std::string text(const char* f, double a, double b = 0) {
  char buf[160];
  snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

// Ring hops carrying `units` in all, split over `channels` of the planned rings (algos/channels.h).
Phase ringHops(const RoutePlan& plan, int channels, double units) {
  Phase ph;
  const int k = std::max(1, channels);
  for (int ch = 0; ch < k; ++ch) {
    const int ring = ch % static_cast<int>(plan.rings.size());
    const std::vector<int>& order = plan.rings[ring].ranks;
    for (size_t i = 0; i < order.size(); ++i)
      ph.flows.push_back({order[i], order[(i + 1) % order.size()], units / k, ring});
  }
  return ph;
}

// A chain: every rank of `order` sends `units` to the next one.
void chain(const std::vector<int>& order, double units, Phase* ph) {
  for (size_t i = 0; i + 1 < order.size(); ++i) ph->flows.push_back({order[i], order[i + 1], units, -1});
}

// Rank order starting at `first`: the chains of broadcast (root, root+1, ...) and reduce (root+1, ...,
// root) from algos/chain_broadcast.cc and chain_reduce.cc.
std::vector<int> rankOrderFrom(int first, int n) {
  std::vector<int> order;
  for (int i = 0; i < n; ++i) order.push_back((first + i) % n);
  return order;
}

// Recursive halving/doubling (algos/rhd_allreduce.cc): the first 2(n-p) ranks fold pairwise into p, the
// p halve with partners at distance p/2, p/4, ..., 1, double back in the reverse order, and unfold.
void rhd(int n, Traffic* t) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  auto real = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  if (rem > 0) {
    Phase fold;
    for (int r = 0; r < 2 * rem; r += 2) fold.flows.push_back({r, r + 1, 1.0, -1});
    t->phases.push_back(fold);
  }
  std::vector<int> masks;
  for (int m = p / 2; m >= 1; m /= 2) masks.push_back(m);
  double share = 0.5;  // of S, swapped in each direction at this round
  std::vector<Phase> halving;
  for (int m : masks) {
    Phase ph;
    for (int v = 0; v < p; ++v) ph.flows.push_back({real(v), real(v ^ m), share, -1});
    halving.push_back(ph);
    share /= 2;
  }
  for (const Phase& ph : halving) t->phases.push_back(ph);
  for (auto it = halving.rbegin(); it != halving.rend(); ++it) t->phases.push_back(*it);  // doubling
  if (rem > 0) {
    Phase unfold;
    for (int r = 0; r < 2 * rem; r += 2) unfold.flows.push_back({r + 1, r, 1.0, -1});
    t->phases.push_back(unfold);
  }
  t->pattern = text("%.0f rounds of pairwise swaps (%.0f ranks fold in first)", 2.0 * masks.size(), 2.0 * rem);
}

// Each used host's ranks in rank order, hosts in the order of their lowest rank.
std::vector<std::vector<int>> hostsInRankOrder(const Cluster& c) {
  std::vector<std::vector<int>> hosts;
  std::vector<int> slot(c.hosts.size(), -1);
  for (int r = 0; r < c.nranks(); ++r) {
    int& s = slot[static_cast<size_t>(c.ranks[r].host)];
    if (s < 0) s = static_cast<int>(hosts.size()), hosts.emplace_back();
    hosts[static_cast<size_t>(s)].push_back(r);
  }
  return hosts;
}

// Hier (algos/hier_allreduce.cc): a chain up to each host's lowest rank, a ring of those leaders, a
// chain back down; three stages, one after the other.
void hier(const Cluster& c, Traffic* t) {
  const std::vector<std::vector<int>> hosts = hostsInRankOrder(c);
  Phase up, across, down;
  std::vector<int> leaders;
  for (const std::vector<int>& local : hosts) {
    chain(std::vector<int>(local.rbegin(), local.rend()), 1.0, &up);
    chain(local, 1.0, &down);
    leaders.push_back(local.front());
  }
  const double H = static_cast<double>(leaders.size());
  if (leaders.size() > 1)
    for (size_t i = 0; i < leaders.size(); ++i)
      across.flows.push_back({leaders[i], leaders[(i + 1) % leaders.size()], 2 * (H - 1) / H, -1});
  t->phases = {up, across, down};
  t->pattern = text("chains inside hosts, a ring of %.0f leaders carrying %.2f S per hop", H, 2 * (H - 1) / H);
}

// Broadcast along the tree of hosts (algos/tree_broadcast.cc, root 0): hosts in the order they appear
// from the root, each host's first rank a node of a binary tree of hosts, a chain inside each host.
void hostTree(const Cluster& c, Traffic* t) {
  const std::vector<std::vector<int>> hosts = hostsInRankOrder(c);
  Phase ph;
  for (size_t h = 0; h < hosts.size(); ++h) {
    chain(hosts[h], 1.0, &ph);
    for (size_t child : {2 * h + 1, 2 * h + 2})
      if (child < hosts.size()) ph.flows.push_back({hosts[h].front(), hosts[child].front(), 1.0, -1});
  }
  t->phases = {ph};
  t->pattern = "a binary tree of hosts, chains inside them, S per edge";
}

}  // namespace

int usedHosts(const Cluster& c) {
  std::vector<char> used(c.hosts.size(), 0);
  int count = 0;
  for (const RankPlace& p : c.ranks)
    if (!used[static_cast<size_t>(p.host)]) used[static_cast<size_t>(p.host)] = 1, ++count;
  return count;
}

Traffic trafficOf(CollType coll, Algo algo, const Cluster& c, const RoutePlan& plan, int channels) {
  Traffic t;
  const int n = c.nranks();
  if (n <= 1 || plan.rings.empty()) return t;
  const double nd = n;
  const int hosts = usedHosts(c);
  const int k = std::max(1, channels);
  auto ring = [&](double units) {
    t.phases = {ringHops(plan, k, units)};
    t.pattern = text("%.0f ring(s), %.3g S per hop", k, units);
  };
  auto allPairs = [&](double units, const char* what) {
    Phase ph;
    ph.allPairsUnits = units;
    t.phases = {ph};
    t.pattern = text(what, units);
  };
  t.applies = true;
  switch (coll) {
    case CollType::AllReduce:
      switch (algo) {
        case Algo::Ring: ring(2 * (nd - 1) / nd); break;
        case Algo::Tree: {  // two complementary trees (algos/tree_allreduce.cc), half the data each, up and down
          std::vector<int> parent[2];
          doubleBinaryTree(n, parent);
          Phase ph;
          for (int tree = 0; tree < 2; ++tree)
            for (int r = 0; r < n; ++r)
              if (parent[tree][r] >= 0) {
                ph.flows.push_back({r, parent[tree][r], 0.5, -1});
                ph.flows.push_back({parent[tree][r], r, 0.5, -1});
              }
          t.phases = {ph};
          t.pattern = "two binary trees, S/2 up and S/2 down each edge";
          break;
        }
        case Algo::Rhd: rhd(n, &t); break;
        case Algo::OneShot: allPairs(1.0, "every rank's whole input to every other (%.0f S per pair)"); break;
        case Algo::Hier: hier(c, &t); break;
        default: t.applies = false;
      }
      break;
    case CollType::AllGather:
      if (algo == Algo::Ring) ring(nd - 1);
      else if (algo == Algo::Flat) allPairs(1.0, "every rank's block to every other (%.0f S per pair)");
      else t.applies = false;
      break;
    case CollType::ReduceScatter:
      if (algo == Algo::Ring) ring(nd - 1);
      else t.applies = false;
      break;
    case CollType::Broadcast:
      if (algo == Algo::Ring) {
        Phase ph;
        chain(rankOrderFrom(0, n), 1.0, &ph);
        t.phases = {ph};
        t.pattern = "a chain in rank order from the root, S per hop";
      } else if (algo == Algo::Tree && hosts >= 3) {
        hostTree(c, &t);
      } else {
        t.applies = false;
      }
      break;
    case CollType::Reduce:
      if (algo == Algo::Ring) {
        Phase ph;
        chain(rankOrderFrom(1, n), 1.0, &ph);
        t.phases = {ph};
        t.pattern = "a chain in rank order to the root, S per hop";
      } else {
        t.applies = false;
      }
      break;
    case CollType::AllToAll:
      if (algo == Algo::Flat) allPairs(1.0, "a block of S from every rank to every other (%.0f S per pair)");
      else t.applies = false;
      break;
    default: t.applies = false;
  }
  return t;
}

}  // namespace loom
