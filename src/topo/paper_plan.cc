#include "topo/paper_plan.h"

#include "model/cost_model.h"

#include <algorithm>
#include <cstdio>

namespace loom {

namespace {
// Per-step latencies (us): a hand-over inside a host (shared memory, PCIe or NVLink) and one across the
// network.  Typical figures, not measured here.
constexpr double kIntraStepUs = 2.0, kNetStepUs = 6.0;

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}
}  // namespace

std::vector<PaperEstimate> paperAllReduce(const Cluster& c, const RoutePlan& plan, double S) {
  const int N = c.nranks();
  std::vector<int> perHost(c.hosts.size(), 0);
  for (const RankPlace& p : c.ranks) ++perHost[p.host];
  int H = 0;
  for (int k : perHost) H += k > 0;
  const bool multi = H > 1;
  // Bandwidths in bytes/us (= MB/s): every ring carries its share, so the rings add up.
  double ringBw = 0;
  for (const Ring& r : plan.rings) ringBw += std::min(r.bw, 1e4);
  ringBw *= 1e3;
  const double treeBw = std::min(plan.treeBw, 1e4) * 1e3 * (multi ? plan.rings.size() : 1);
  double intraBw = 1e4;  // the slowest host's best ring inside it
  for (const Ring& r : plan.rings) intraBw = std::min(intraBw, r.bw);
  intraBw = std::min(intraBw, 1e4) * 1e3;
  const double alpha = multi ? kNetStepUs : kIntraStepUs;
  ShapeCase sc;
  sc.bytes = S, sc.nranks = N, sc.hosts = H;
  std::vector<PaperEstimate> out;
  for (int i = 0; i < kNumAlgos; ++i) {
    const Algo a = static_cast<Algo>(i);
    const AlgoShape sh = allReduceShape(a, sc);
    // On paper, as before the shared table: oneshot only inside one host (every rank reads every other's
    // input), hier only across hosts (inside one it is a chain, never a plan's question).
    if (!sh.applies || (a == Algo::OneShot && multi) || (a == Algo::Hier && !multi)) continue;
    // The trees (and hier's ring of hosts, over all of a host's NICs) run at the tree bandwidth, the
    // others on the rings.
    const double bw = a == Algo::Tree || a == Algo::Hier ? treeBw : ringBw;
    const double us = sh.steps * alpha + sh.hostSteps * kIntraStepUs + sh.linkBytes * S / bw +
                      (sh.hostLinkBytes > 0 ? sh.hostLinkBytes * S / intraBw : 0.0);
    out.push_back({algoName(a), us,
                   fmt("%.1f steps x alpha + %.2f S / %.0f GB/s", sh.steps + sh.hostSteps, sh.linkBytes, bw / 1e3) +
                       (sh.hostLinkBytes > 0 ? fmt(" + %.0f S / %.0f GB/s in host", sh.hostLinkBytes, intraBw / 1e3)
                                             : std::string())});
  }
  std::sort(out.begin(), out.end(), [](const PaperEstimate& a, const PaperEstimate& b) { return a.us < b.us; });
  return out;
}

}  // namespace loom
