#include "topo/paper_plan.h"

#include <algorithm>
#include <cmath>
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
  const double N = c.nranks();
  std::vector<int> perHost(c.hosts.size(), 0);
  for (const RankPlace& p : c.ranks) ++perHost[p.host];
  double H = 0, local = 0;
  for (int k : perHost)
    if (k > 0) H += 1, local = std::max<double>(local, k);
  const bool multi = H > 1;
  // Bandwidths in bytes/us (= MB/s): every ring carries its share, so the rings add up.
  double ringBw = 0;
  for (const Ring& r : plan.rings) ringBw += std::min(r.bw, 1e4);
  ringBw *= 1e3;
  const double treeBw = std::min(plan.treeBw, 1e4) * 1e3 * (multi ? plan.rings.size() : 1);
  double intraBw = 1e4;  // the slowest host's best ring inside it
  for (const Ring& r : plan.rings) intraBw = std::min(intraBw, r.bw);
  intraBw = std::min(intraBw, 1e4) * 1e3;
  const double alpha = multi ? kNetStepUs : kIntraStepUs, L = std::ceil(std::log2(std::max(N, 2.0)));
  std::vector<PaperEstimate> out;
  out.push_back({"ring", 2 * (N - 1) * alpha + 2 * (N - 1) / N * S / ringBw,
                 fmt("2(n-1) alpha + 2(n-1)/n S / %.0f GB/s", ringBw / 1e3)});
  out.push_back({"tree", 2 * L * alpha + 2 * (local - 1) * kIntraStepUs + S / treeBw,
                 fmt("2 log2(n) alpha + S / %.0f GB/s (two trees, half each, up and down)", treeBw / 1e3)});
  out.push_back({"rhd", 2 * L * alpha + 2 * (N - 1) / N * S / ringBw,
                 fmt("2 log2(n) alpha + 2(n-1)/n S / %.0f GB/s", ringBw / 1e3)});
  if (!multi) out.push_back({"oneshot", alpha + (N - 1) * S / ringBw, "alpha + (n-1) S / bw"});
  if (multi) {
    const double netBw = treeBw;  // the NICs of a host, all rails
    out.push_back({"hier",
                   2 * (local - 1) * kIntraStepUs + 2 * S / intraBw + 2 * (H - 1) * kNetStepUs + 2 * (H - 1) / H * S / netBw,
                   fmt("reduce+broadcast in host (%.0f GB/s) + ring over %g hosts (%.0f GB/s)", intraBw / 1e3, H,
                       netBw / 1e3)});
  }
  std::sort(out.begin(), out.end(), [](const PaperEstimate& a, const PaperEstimate& b) { return a.us < b.us; });
  return out;
}

}  // namespace loom
