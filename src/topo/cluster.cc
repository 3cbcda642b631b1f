#include "topo/cluster.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "topo/decisions.h"
#include "topo/xml.h"

namespace loom {

bool Cluster::isGpu(int rank) const {
  return ranks[rank].device >= 0 && sys(rank).nodes[ranks[rank].device].type == NodeType::Gpu;
}

std::string Cluster::describe(int rank) const {
  const RankPlace& p = ranks[rank];
  std::string s = "rank " + std::to_string(rank) + " (";
  if (p.device >= 0) s += sys(rank).nodes[p.device].name;
  if (p.mig >= 0) s += " MIG " + std::to_string(p.mig);
  return s + " on " + hostNames[p.host] + ")";
}

namespace {
// A UUID as NVML and CUDA spell it, lower case and without a "GPU-" or "MIG-" prefix.
std::string bareUuid(std::string u) {
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char ch) { return std::tolower(ch); });
  for (const char* prefix : {"gpu-", "mig-"})
    if (u.rfind(prefix, 0) == 0) u = u.substr(4);
  return u;
}
}  // namespace

RankPlace placeRank(const TopoSystem& s, int host, int numa, const std::string& gpuBusId, const std::string& gpuUuid) {
  RankPlace p;
  p.host = host;
  std::vector<int> cpus = s.ofType(NodeType::Cpu);
  p.device = cpus.empty() ? -1 : cpus[0];
  for (int c : cpus)
    if (s.nodes[c].numaId == numa) p.device = c;
  const int gpu = gpuBusId.empty() ? -1 : s.findBusId(gpuBusId);
  if (gpu < 0 || s.nodes[gpu].type != NodeType::Gpu) return p;
  p.device = gpu;
  const std::vector<std::string>& migs = s.nodes[gpu].migInstances;
  for (size_t m = 0; m < migs.size() && !gpuUuid.empty(); ++m)
    if (bareUuid(migs[m]) == bareUuid(gpuUuid)) p.mig = static_cast<int>(m);
  return p;
}

Cluster placeRanks(std::vector<std::shared_ptr<const TopoSystem>> hosts, int cpuRanksPerHost) {
  Cluster c;
  c.hosts = std::move(hosts);
  for (size_t h = 0; h < c.hosts.size(); ++h) {
    const TopoSystem& s = *c.hosts[h];
    std::string name = s.hostName.empty() ? "host" + std::to_string(h) : s.hostName;
    if (std::find(c.hostNames.begin(), c.hostNames.end(), name) != c.hostNames.end()) name += "#" + std::to_string(h);
    c.hostNames.push_back(name);
    std::vector<int> gpus = s.ofType(NodeType::Gpu);
    if (!gpus.empty()) {
      for (int g : gpus) {
        const TopoNode& n = s.nodes[g];
        if (n.migInstances.empty()) c.ranks.push_back(RankPlace{static_cast<int>(h), g, -1, -1, ""});
        for (size_t m = 0; m < n.migInstances.size(); ++m)
          c.ranks.push_back(RankPlace{static_cast<int>(h), g, static_cast<int>(m), -1, ""});
      }
    } else {
      std::vector<int> cpus = s.ofType(NodeType::Cpu);
      int n = cpuRanksPerHost > 0 ? cpuRanksPerHost : static_cast<int>(cpus.size());
      for (int i = 0; i < n; ++i) c.ranks.push_back(RankPlace{static_cast<int>(h), cpus[i % cpus.size()], -1, -1, ""});
    }
  }
  assignNics(&c);
  return c;
}

loomResult_t loadCluster(const std::string& path, int hosts, std::vector<std::shared_ptr<const TopoSystem>>* out) {
  std::unique_ptr<XmlNode> root;
  LOOM_CHECK(xmlLoadFile(path, &root));
  out->clear();
  if (root->name == "system") {
    std::unique_ptr<TopoSystem> sys;
    LOOM_CHECK(TopoSystem::build(*root, path, &sys));
    std::shared_ptr<const TopoSystem> shared(std::move(sys));
    for (int i = 0; i < std::max(1, hosts); ++i) out->push_back(shared);  // identical hosts share one model
    return loomSuccess;
  }
  if (root->name != "cluster")
    return setError(loomInvalidArgument, "%s:%d: the root element is <%s>, expected <system> or <cluster>",
                    path.c_str(), root->line, root->name.c_str());
  const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  for (const auto& h : root->children) {
    const std::string* file = h->attr("file");
    if (h->name != "host" || file == nullptr)
      return setError(loomInvalidArgument, "%s:%d: a <cluster> holds <host file=\"...\"/> elements", path.c_str(),
                      h->line);
    // Each host gets a model of its own, since each keeps its own name.
    const std::string hostPath = (*file)[0] == '/' ? *file : dir + "/" + *file;
    std::unique_ptr<XmlNode> hostRoot;
    LOOM_CHECK(xmlLoadFile(hostPath, &hostRoot));
    std::unique_ptr<TopoSystem> sys;
    LOOM_CHECK(TopoSystem::build(*hostRoot, hostPath, &sys));
    sys->hostName = h->attrOr("name", "host" + std::to_string(out->size()));
    out->push_back(std::shared_ptr<const TopoSystem>(std::move(sys)));
  }
  if (out->empty()) return setError(loomInvalidArgument, "%s: the <cluster> holds no <host>", path.c_str());
  return loomSuccess;
}

}  // namespace loom
