#include "topo/decisions.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/error.h"
#include "base/params.h"
#include "base/socket.h"

namespace loom {

loomResult_t TopoPolicy::fromParams(TopoPolicy* out) {
  TopoPolicy p;
  if (!parsePathType(params().P2P_LEVEL, &p.p2pLevel))
    return setError(loomInvalidArgument, "LOOM_P2P_LEVEL=%s: expected LOC, NVL, NVB, PIX, PXB, PHB or SYS",
                    params().P2P_LEVEL.c_str());
  if (!parsePathType(params().NET_GDR_LEVEL, &p.gdrLevel))
    return setError(loomInvalidArgument, "LOOM_NET_GDR_LEVEL=%s: expected LOC, NVL, NVB, PIX, PXB, PHB or SYS",
                    params().NET_GDR_LEVEL.c_str());
  p.preferRdma = params().NET != "socket";
  p.ibHca = params().IB_HCA;
  p.socketIfname = params().SOCKET_IFNAME;
  *out = p;
  return loomSuccess;
}

Decision pairTransport(const Cluster& c, int a, int b, const TopoPolicy& policy) {
  const RankPlace &pa = c.ranks[a], &pb = c.ranks[b];
  if (!c.sameHost(a, b)) {
    std::string via = "through the network";
    if (pa.nic >= 0 && pb.nic >= 0)
      via = "through " + c.sys(a).nodes[pa.nic].name + " -> " + c.sys(b).nodes[pb.nic].name;
    return {"net", "different hosts (" + c.hostNames[pa.host] + ", " + c.hostNames[pb.host] + "): " + via,
            LinkKind::kNetwork};
  }
  const TopoSystem& s = c.sys(a);
  if (c.isGpu(a) && c.isGpu(b)) {
    const std::string ga = s.nodes[pa.device].name, gb = s.nodes[pb.device].name;
    if (pa.device == pb.device) {
      if (pa.mig >= 0 && pb.mig >= 0 && pa.mig != pb.mig)
        return {"shm", ga + " MIG instances " + std::to_string(pa.mig) + " and " + std::to_string(pb.mig) +
                           ": MIG instances get no P2P, data goes through host memory", LinkKind::kSharedMemory};
      return {"local", "both ranks on " + ga + ": device-local copies (several ranks per GPU are allowed)",
              LinkKind::kDevicePeer};
    }
    if (pa.mig >= 0 || pb.mig >= 0)
      return {"shm", ga + "<->" + gb + ": a MIG instance gets no P2P, data goes through host memory",
              LinkKind::kSharedMemory};
    const TopoPath& p = s.path(pa.device, pb.device);
    std::string what = ga + "<->" + gb + ": " + pathTypeName(p.type) + ", " + bandwidthText(p.bw);
    if (p.type == PathType::NVL || p.type == PathType::NVB) return {"p2p/nvlink", what, LinkKind::kDevicePeer};
    if (p2pAllowed(p.type, policy))
      return {"p2p/pcie", what + ", within LOOM_P2P_LEVEL=" + pathTypeName(policy.p2pLevel), LinkKind::kDevicePeer};
    return {"shm", what + ", beyond LOOM_P2P_LEVEL=" + pathTypeName(policy.p2pLevel) + ": through host memory",
            LinkKind::kSharedMemory};
  }
  if (pa.device < 0 || pb.device < 0) return {"shm", "same host", LinkKind::kSharedMemory};
  const TopoPath& p = s.path(pa.device, pb.device);
  const TopoNode &na = s.nodes[pa.device], &nb = s.nodes[pb.device];
  if (na.cpu == nb.cpu)
    return {"shm", "same host, same NUMA node (" + s.nodes[na.cpu].name + ")", LinkKind::kSharedMemory};
  return {"shm", "same host, " + s.nodes[na.cpu].name + " and " + s.nodes[nb.cpu].name + ": " +
                     pathTypeName(p.type) + ", " + bandwidthText(p.bw), LinkKind::kSharedMemory};
}

Decision gdrDecision(const TopoSystem& s, int gpu, int nic, const TopoPolicy& policy) {
  const std::string pair = s.nodes[gpu].name + "<->" + s.nodes[nic].name;
  bool nicGdr = false;
  for (int n : s.netsOf(nic)) nicGdr |= s.nodes[n].gdr;
  const TopoPath& p = s.path(gpu, nic);
  if (!nicGdr) return {"off", "GDR off for " + pair + ": the NIC does not report GPUDirect RDMA support"};
  if (static_cast<int>(p.type) <= static_cast<int>(policy.gdrLevel))
    return {"on", pair + ": " + pathTypeName(p.type) + ", GDR on"};
  std::string where = p.type == PathType::PHB   ? "only meet at the CPU (PHB)"
                      : p.type == PathType::SYS ? "are on different CPU sockets (SYS)"
                                                : std::string("are joined by ") + pathTypeName(p.type);
  return {"off", "GDR off for " + pair + ": NIC and GPU " + where + ", above LOOM_NET_GDR_LEVEL=" +
                     pathTypeName(policy.gdrLevel)};
}

bool gdrOnEveryRank(const Cluster& c, const TopoPolicy& policy) {
  for (int r = 0; r < c.nranks(); ++r)
    if (!c.isGpu(r) || c.ranks[r].nic < 0 || gdrDecision(c.sys(r), c.ranks[r].device, c.ranks[r].nic, policy).choice != "on")
      return false;
  return c.nranks() > 0;
}

namespace {

// Whether the user's LOOM_IB_HCA (RDMA NICs) or LOOM_SOCKET_IFNAME (plain NICs) keeps a NIC: one of its
// port names matches.
bool userKeeps(const TopoSystem& s, int nic, const TopoPolicy& policy) {
  const std::string& spec = s.nicIsRdma(nic) ? policy.ibHca : policy.socketIfname;
  if (spec.empty()) return true;
  for (int n : s.netsOf(nic))
    if (interfaceMatches(spec, s.nodes[n].name)) return true;
  return false;
}

}  // namespace

void assignNics(Cluster* c, const TopoPolicy& policy) {
  std::map<std::pair<int, int>, int> load;  // (host, nic) -> ranks bound to it
  for (int r = 0; r < c->nranks(); ++r) {
    RankPlace& p = c->ranks[r];
    const TopoSystem& s = *c->hosts[p.host];
    std::vector<int> nics = s.ofType(NodeType::Nic);
    if (nics.empty() || p.device < 0) {
      p.nic = -1;
      p.nicReason = "no NIC on this host";
      continue;
    }
    // The rules of decisions.h, in order: each a key component, smaller is better.
    auto key = [&](int nic) {
      const TopoPath& path = s.path(p.device, nic);
      return std::make_tuple(userKeeps(s, nic, policy) ? 0 : 1, policy.preferRdma && !s.nicIsRdma(nic) ? 1 : 0,
                             s.nicSpeedAssumed(nic) ? 1 : 0, static_cast<int>(path.type),
                             -std::min(path.bw, s.nicBw(nic)), load[{p.host, nic}], nic);
    };
    std::sort(nics.begin(), nics.end(), [&](int x, int y) { return key(x) < key(y); });
    const int best = nics[0];
    const TopoPath& path = s.path(p.device, best);
    const std::string kind = s.nicIsRdma(best) ? "RDMA" : "plain Ethernet";
    std::string why = "the only NIC";
    if (nics.size() > 1) {
      const auto a = key(best), b = key(nics[1]);
      const std::string other = s.nodes[nics[1]].name;
      if (std::get<0>(a) != std::get<0>(b))
        why = other + " is left out by LOOM_" + std::string(s.nicIsRdma(nics[1]) ? "IB_HCA=" + policy.ibHca
                                                                                 : "SOCKET_IFNAME=" + policy.socketIfname);
      else if (std::get<1>(a) != std::get<1>(b))
        why = "an RDMA NIC before plain Ethernet (" + other + "), which is used only without one (LOOM_NET=socket changes that)";
      else if (std::get<2>(a) != std::get<2>(b))
        why = "its speed is reported; " + other + "'s is assumed, and a guess never outranks it";
      else if (std::get<3>(a) != std::get<3>(b))
        why = "the nearest NIC (" + other + " is " + pathTypeName(s.path(p.device, nics[1]).type) + ")";
      else if (std::get<4>(a) != std::get<4>(b))
        why = "the fastest of the equally near NICs (" + other + ": " +
              bandwidthText(std::min(s.path(p.device, nics[1]).bw, s.nicBw(nics[1]))) + ")";
      else
        why = "the least used of the equally near, equally fast NICs (rails)";
    }
    p.nic = best;
    p.nicReason = s.nodes[p.device].name + " -> " + s.nodes[best].name + " (" + kind + "): " +
                  pathTypeName(path.type) + ", " + bandwidthText(std::min(path.bw, s.nicBw(best))) +
                  (s.nicSpeedAssumed(best) ? " (speed assumed)" : "") + "; " + why;
    ++load[{p.host, best}];
  }
}

}  // namespace loom
