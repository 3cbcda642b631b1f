#include "topo/render.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace loom {

namespace {

std::string formatNumber(const char* f, double v) {
  char b[64];
  snprintf(b, sizeof b, f, v);
  return b;
}

void treeNode(const TopoSystem& s, int node, int depth, std::ostringstream& os) {
  const TopoNode& n = s.nodes[node];
  os << std::string(2 * depth, ' ') << nodeTypeName(n.type) << ' ' << n.name;
  if (n.type == NodeType::Cpu) {
    os << " (NUMA " << n.numaId;
    if (!n.vendor.empty()) os << ", " << n.vendor << " family " << n.family << " model " << n.model;
    os << ")";
  } else {
    if (!n.busId.empty() && n.type != NodeType::PciSwitch) os << " " << n.busId;
    if (n.parentLink >= 0) os << " [" << (s.links[n.parentLink].type == LinkType::Net ? "port " : "link ")
                              << formatNumber("%.1f GB/s", s.links[n.parentLink].bw) << "]";
    if (n.type == NodeType::Gpu && n.sm) os << " sm " << n.sm;
    if (!n.migInstances.empty()) os << " MIG x" << n.migInstances.size();
    if (n.type == NodeType::Net) os << (n.gdr ? " gdr" : "") << (n.linkLayer.empty() ? "" : " " + n.linkLayer);
  }
  for (int l : n.links)
    if (s.links[l].type == LinkType::Nvl) {
      int peer = s.links[l].a == node ? s.links[l].b : s.links[l].a;
      os << " nvlink->" << s.nodes[peer].name << formatNumber(" %.0f GB/s", s.links[l].bw);
    }
  if (!n.note.empty()) os << " (" << n.note << ")";
  os << "\n";
  for (size_t i = 0; i < s.nodes.size(); ++i)
    if (s.nodes[i].parent == node) treeNode(s, static_cast<int>(i), depth + 1, os);
}

}  // namespace

std::string renderTree(const TopoSystem& s) {
  std::ostringstream os;
  os << "host " << (s.hostName.empty() ? "?" : s.hostName) << " (from " << s.source << ")\n";
  for (int c : s.ofType(NodeType::Cpu)) treeNode(s, c, 1, os);
  for (int c : s.ofType(NodeType::Cpu))
    for (int l : s.nodes[c].links)
      if (s.links[l].type == LinkType::Sys && s.links[l].a == c)
        os << "  socket link " << s.nodes[c].name << "<->" << s.nodes[s.links[l].b].name
           << formatNumber(": %.1f GB/s\n", s.links[l].bw);
  for (int v : s.ofType(NodeType::NvSwitch)) os << "  NVS (NVSwitch fabric, " << s.nodes[v].links.size() << " GPU links)\n";
  return os.str();
}

std::string renderPathMatrix(const TopoSystem& s) {
  std::vector<int> nodes = s.ofType(NodeType::Gpu);
  for (int n : s.ofType(NodeType::Nic)) nodes.push_back(n);
  for (int n : s.ofType(NodeType::Cpu)) nodes.push_back(n);
  size_t w = 6;
  for (int n : nodes) w = std::max(w, s.nodes[n].name.size() + 1);
  std::ostringstream os;
  os << std::string(w, ' ');
  for (int n : nodes) os << std::string(w - s.nodes[n].name.size(), ' ') << s.nodes[n].name;
  os << "\n";
  for (int a : nodes) {
    os << s.nodes[a].name << std::string(w - s.nodes[a].name.size(), ' ');
    for (int b : nodes) {
      std::string cell = a == b ? "X" : pathTypeName(s.path(a, b).type);
      os << std::string(w - cell.size(), ' ') << cell;
    }
    os << "\n";
  }
  os << "path bandwidth (GB/s):\n" << std::string(w, ' ');
  for (int n : nodes) os << std::string(w - s.nodes[n].name.size(), ' ') << s.nodes[n].name;
  os << "\n";
  for (int a : nodes) {
    os << s.nodes[a].name << std::string(w - s.nodes[a].name.size(), ' ');
    for (int b : nodes) {
      std::string cell = a == b ? "-" : formatNumber("%.0f", s.path(a, b).bw);
      os << std::string(w - cell.size(), ' ') << cell;
    }
    os << "\n";
  }
  os << "LOC same device, NVL NVLink, NVB NVLink via a GPU, PIX one PCIe switch, PXB several switches,\n"
        "PHB through a CPU root complex, SYS across the CPU socket link\n";
  return os.str();
}

std::string renderPlan(const Cluster& c, const RoutePlan& plan, const TopoPolicy& policy) {
  std::ostringstream os;
  const int n = c.nranks();
  os << n << " ranks on " << c.hosts.size() << " host(s)\n\nranks and NICs:\n";
  const int shown = std::min(n, 64);
  for (int r = 0; r < shown; ++r) os << "  " << c.describe(r) << ": " << c.ranks[r].nicReason << "\n";
  if (shown < n) os << "  ... (" << n - shown << " more)\n";
  os << "\ntransports (" << (n <= 16 ? "every pair" : "ring neighbours of ring 0, first 64") << "):\n";
  auto pair = [&](int a, int b) {
    Decision d = pairTransport(c, a, b, policy);
    os << "  " << a << "<->" << b << ": " << d.choice << " (" << d.reason << ")\n";
  };
  if (n <= 16) {
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) pair(a, b);
  } else {
    const auto& ring = plan.rings[0].ranks;
    for (size_t i = 0; i < ring.size() && i < 64; ++i) pair(ring[i], ring[(i + 1) % ring.size()]);
  }
  bool anyGpu = false;
  for (int r = 0; r < shown; ++r)
    if (c.isGpu(r) && c.ranks[r].nic >= 0) {
      if (!anyGpu) os << "\nGPUDirect RDMA:\n";
      anyGpu = true;
      os << "  rank " << r << ": " << gdrDecision(c.sys(r), c.ranks[r].device, c.ranks[r].nic, policy).reason << "\n";
    }
  if (anyGpu)
    os << "  " << (gdrOnEveryRank(c, policy) ? "on for every rank: allgather, allreduce, reduce-scatter run point to point, GPU buffers cross hosts by RDMA"
                                             : "not on for every rank: allgather takes the model's choice, GPU buffers staged")
       << "\n";
  os << "\nrings (" << plan.rings.size() << " channel" << (plan.rings.size() == 1 ? "" : "s") << "):\n";
  for (size_t i = 0; i < plan.rings.size(); ++i) {
    const Ring& ring = plan.rings[i];
    os << "  ring " << i << ":";
    for (size_t j = 0; j < ring.ranks.size() && j < 32; ++j) os << " " << ring.ranks[j];
    if (ring.ranks.size() > 32) os << " ... (" << ring.ranks.size() << " ranks)";
    os << " -- " << ring.reason << "\n";
  }
  os << "\ntrees: " << plan.treeReason << "\n";
  for (int t = 0; t < 2; ++t) {
    const Tree& tree = plan.trees[t];
    os << "  tree " << t << ": root " << tree.root << ";";
    int listed = 0;
    for (int r = 0; r < n && listed < 16; ++r)
      if (!tree.children[r].empty()) {
        os << " " << r << "->{";
        for (size_t k = 0; k < tree.children[r].size(); ++k) os << (k ? "," : "") << tree.children[r][k];
        os << "}";
        ++listed;
      }
    os << (listed == 16 ? " ..." : "") << "\n";
  }
  os << formatNumber("\nroute search: %.3f ms\n", plan.searchSeconds * 1e3);
  return os.str();
}

std::string renderDot(const Cluster& c, const RoutePlan& plan, int maxHosts) {
  std::ostringstream os;
  os << "graph loom {\n  graph [rankdir=TB, fontname=\"Helvetica\"];\n  node [fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  const int hosts = std::min<int>(maxHosts, static_cast<int>(c.hosts.size()));
  auto id = [](int h, int node) { return "h" + std::to_string(h) + "n" + std::to_string(node); };
  for (int h = 0; h < hosts; ++h) {
    const TopoSystem& s = *c.hosts[h];
    os << "  subgraph cluster_" << h << " {\n    label=\"" << c.hostNames[h] << "\";\n";
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      const TopoNode& n = s.nodes[i];
      if (n.type == NodeType::Net) continue;  // a NIC's ports are shown in its label
      const char* shape = n.type == NodeType::Cpu ? "box3d" : n.type == NodeType::Gpu ? "box" : n.type == NodeType::PciSwitch ? "diamond" : n.type == NodeType::NvSwitch ? "octagon" : "ellipse";
      const char* color = n.type == NodeType::Gpu ? "palegreen" : n.type == NodeType::Nic || n.type == NodeType::Net ? "lightblue" : n.type == NodeType::Cpu ? "lightgrey" : "white";
      std::string label = n.type == NodeType::PciSwitch ? "switch\\n" + n.busId : n.name;
      if (n.type == NodeType::Nic) label += formatNumber("\\n%.0f Gb/s", s.nicBw(static_cast<int>(i)) * 8);
      os << "    " << id(h, static_cast<int>(i)) << " [label=\"" << label << "\", shape=" << shape
         << ", style=filled, fillcolor=" << color << "];\n";
    }
    for (const TopoLink& l : s.links) {
      if (l.type == LinkType::Net) continue;
      const char* style = l.type == LinkType::Nvl ? "color=darkgreen, penwidth=2" : l.type == LinkType::Sys ? "color=red, style=dashed" : "color=black";
      os << "    " << id(h, l.a) << " -- " << id(h, l.b) << " [label=\"" << formatNumber("%.0f", l.bw) << "\", " << style << "];\n";
    }
    os << "  }\n";
  }
  // Ring 0 over the devices of the shown hosts, in order, as directed overlay edges.
  if (!plan.rings.empty()) {
    const auto& ring = plan.rings[0].ranks;
    for (size_t i = 0; i < ring.size(); ++i) {
      int a = ring[i], b = ring[(i + 1) % ring.size()];
      const RankPlace &pa = c.ranks[a], &pb = c.ranks[b];
      if (pa.host >= hosts || pb.host >= hosts || (pa.host == pb.host && pa.device == pb.device)) continue;
      os << "  " << id(pa.host, pa.device) << " -- " << id(pb.host, pb.device)
         << " [dir=forward, color=orange, penwidth=3, constraint=false, label=\"ring0 " << i << "\"];\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace loom
