#include "topo/system.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <strings.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "base/error.h"

namespace loom {

const char* nodeTypeName(NodeType t) {
  switch (t) {
    case NodeType::Cpu: return "CPU";
    case NodeType::PciSwitch: return "PCI";
    case NodeType::Gpu: return "GPU";
    case NodeType::Nic: return "NIC";
    case NodeType::Net: return "NET";
    case NodeType::NvSwitch: return "NVS";
  }
  return "?";
}

static const char* const kPathNames[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET"};

const char* pathTypeName(PathType t) { return kPathNames[static_cast<int>(t)]; }

std::string bandwidthText(double gbs) {
  char b[32];
  snprintf(b, sizeof b, "%.1f GB/s", gbs);
  return b;
}

bool parsePathType(const std::string& s, PathType* out) {
  for (int i = 0; i < 8; ++i)
    if (strcasecmp(s.c_str(), kPathNames[i]) == 0) {
      *out = static_cast<PathType>(i);
      return true;
    }
  return false;
}

double pcieBandwidth(double gtPerSecond, int width) {
  // Per lane, after line encoding (8b/10b up to 5 GT/s, 128b/130b after), times ~0.76 for protocol
  // overhead: a Gen3 x16 link gives ~12 GB/s of its 15.75 raw, Gen4 ~24, Gen5 ~48.
  double perLane = gtPerSecond <= 5.0 ? gtPerSecond * 0.8 / 8 : gtPerSecond * (128.0 / 130.0) / 8;
  return perLane * width * 0.76;
}

double nvlinkBandwidth(int sm) {
  if (sm >= 90) return 20.6;  // H100
  if (sm >= 70) return 20.0;  // V100, A100
  return 18.0;                // P100
}

double interSocketBandwidth(const std::string& vendor, int family, int model) {
  if (vendor.find("AMD") != std::string::npos || vendor.find("Hygon") != std::string::npos) return 16.0;
  if (vendor.find("Intel") != std::string::npos) {
    if (family == 6 && model == 207) return 40.0;  // Emerald Rapids
    if (family == 6 && model == 143) return 22.0;  // Sapphire Rapids
    if (family == 6 && (model == 85 || model == 106 || model == 108)) return 10.0;  // Skylake .. Ice Lake
    return 6.0;
  }
  return 10.0;
}

namespace {

constexpr const char* kNvSwitchClass = "0x068000";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

// A PCI bus id "dddd:bb:dd.f" (the domain may be left out); normalised to lower case with a domain.
bool normaliseBusId(const std::string& in, std::string* out) {
  std::string s = lower(in);
  if (s.size() == 7) s = "0000:" + s;
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (i != 4 && i != 7 && i != 10 && !isxdigit(static_cast<unsigned char>(s[i]))) return false;
  *out = s;
  return true;
}

class Builder {
 public:
  Builder(const std::string& source, TopoSystem* sys) : source_(source), sys_(sys) {}

  loomResult_t run(const XmlNode& root) {
    if (root.name != "system") return fail(root, "the root element is <%s>, expected <system>", root.name.c_str());
    sys_->hostName = root.attrOr("host", "");
    for (const auto& c : root.children) {
      if (c->name != "cpu") return misplaced(*c, "<system>");
      LOOM_CHECK(cpu(*c));
    }
    if (sys_->ofType(NodeType::Cpu).empty()) return fail(root, "<system> holds no <cpu>");
    LOOM_CHECK(resolveNvlinks());
    auto cpus = sys_->ofType(NodeType::Cpu);
    for (size_t i = 0; i < cpus.size(); ++i)
      for (size_t j = i + 1; j < cpus.size(); ++j) {
        const TopoNode& c = sys_->nodes[cpus[i]];
        link(cpus[i], cpus[j], LinkType::Sys, interSocketBandwidth(c.vendor, c.family, c.model));
      }
    return loomSuccess;
  }

 private:
  struct PendingNvlink {
    int gpu;
    std::string target, tclass;
    int count, line;
  };

  const std::string& source_;
  TopoSystem* sys_;
  std::map<std::string, int> busIdLine_;
  std::set<std::string> nvSwitchBusIds_;
  std::vector<PendingNvlink> nvlinks_;
  int nextGpuDev_ = 0, nvs_ = -1;

  loomResult_t fail(const XmlNode& at, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return setError(loomInvalidArgument, "%s:%d: %s", source_.c_str(), at.line, msg);
  }

  loomResult_t misplaced(const XmlNode& n, const char* where) {
    static const std::set<std::string> known = {"system", "cpu", "pci", "gpu", "nvlink", "c2c", "mig", "nic", "net"};
    if (!known.count(n.name)) return fail(n, "unknown element <%s>", n.name.c_str());
    return fail(n, "<%s> cannot appear inside %s", n.name.c_str(), where);
  }

  // Reads a numeric attribute; absent gives `fallback`, a value outside [lo, hi] or not a number is an error.
  loomResult_t number(const XmlNode& n, const char* key, double lo, double hi, double fallback, double* out,
                      bool required = false) {
    const std::string* v = n.attr(key);
    if (v == nullptr) {
      if (required) return fail(n, "<%s> needs the attribute %s", n.name.c_str(), key);
      *out = fallback;
      return loomSuccess;
    }
    errno = 0;
    char* end = nullptr;
    const bool hex = v->size() > 2 && (*v)[0] == '0' && ((*v)[1] == 'x' || (*v)[1] == 'X');
    double d = hex ? static_cast<double>(strtoull(v->c_str(), &end, 16)) : strtod(v->c_str(), &end);
    if (end == v->c_str() || errno != 0 || !std::isfinite(d))
      return fail(n, "%s=\"%s\" is not a number", key, v->c_str());
    if (d < lo || d > hi) return fail(n, "%s=\"%s\" is out of range [%g, %g]", key, v->c_str(), lo, hi);
    *out = d;
    return loomSuccess;
  }

  int addNode(NodeType t, const std::string& name, const XmlNode& at) {
    TopoNode n;
    n.type = t;
    n.name = name;
    n.line = at.line;
    sys_->nodes.push_back(n);
    return static_cast<int>(sys_->nodes.size()) - 1;
  }

  int link(int a, int b, LinkType t, double bw) {
    sys_->links.push_back(TopoLink{a, b, t, bw});
    int id = static_cast<int>(sys_->links.size()) - 1;
    sys_->nodes[a].links.push_back(id);
    sys_->nodes[b].links.push_back(id);
    return id;
  }

  void attach(int child, int parent, double bw) {
    sys_->nodes[child].parent = parent;
    sys_->nodes[child].parentLink = link(child, parent, LinkType::Pci, bw);
    sys_->nodes[child].cpu = sys_->nodes[parent].type == NodeType::Cpu ? parent : sys_->nodes[parent].cpu;
  }

  loomResult_t cpu(const XmlNode& x) {
    double numa = 0, family = 0, model = 0, cores = 0;
    LOOM_CHECK(number(x, "cores", 0, 1 << 20, 0, &cores));
    LOOM_CHECK(number(x, "numaid", 0, 4095, 0, &numa, true));
    LOOM_CHECK(number(x, "familyid", 0, 1 << 16, 0, &family));
    LOOM_CHECK(number(x, "modelid", 0, 1 << 16, 0, &model));
    for (int c : sys_->ofType(NodeType::Cpu))
      if (sys_->nodes[c].numaId == static_cast<int>(numa))
        return fail(x, "numaid %d appears twice (also line %d)", static_cast<int>(numa), sys_->nodes[c].line);
    int id = addNode(NodeType::Cpu, "CPU" + std::to_string(static_cast<int>(numa)), x);
    TopoNode& n = sys_->nodes[id];
    n.numaId = static_cast<int>(numa);
    n.cpu = id;
    n.family = static_cast<int>(family);
    n.model = static_cast<int>(model);
    n.cores = static_cast<int>(cores);
    n.vendor = x.attrOr("vendor", "");
    n.affinity = x.attrOr("affinity", "");
    for (const auto& c : x.children) {
      if (c->name == "pci") LOOM_CHECK(pci(*c, id, 0));
      else if (c->name == "nic") LOOM_CHECK(nic(*c, id, 0, ""));
      else return misplaced(*c, "<cpu>");
    }
    return loomSuccess;
  }

  // The bandwidth of the link from a PCI element up to its parent.
  loomResult_t pciLink(const XmlNode& x, double inherited, double* bw) {
    double width = 0, gts = 0;
    LOOM_CHECK(number(x, "link_width", 0, 32, 0, &width));
    if (width != 0 && (width < 1 || (static_cast<int>(width) & (static_cast<int>(width) - 1)) != 0 ||
                       width != std::floor(width)))
      return fail(x, "link_width=\"%g\" is not a PCIe lane count (1, 2, 4, 8, 16 or 32)", width);
    if (const std::string* s = x.attr("link_speed")) {
      char* end = nullptr;
      gts = strtod(s->c_str(), &end);
      if (end == s->c_str()) gts = 0;  // "Unknown": NCCL writes that when sysfs has nothing
      else if (gts < 2.5 || gts > 128) return fail(x, "link_speed=\"%s\" is out of range [2.5, 128] GT/s", s->c_str());
    }
    if (width > 0 && gts > 0) *bw = pcieBandwidth(gts, static_cast<int>(width));
    else *bw = inherited > 0 ? inherited : pcieBandwidth(8.0, 16);  // unknown: the parent's, else Gen3 x16
    return loomSuccess;
  }

  loomResult_t pci(const XmlNode& x, int parent, double parentBw) {
    std::string busId;
    const std::string* raw = x.attr("busid");
    if (raw == nullptr) return fail(x, "<pci> needs the attribute busid");
    if (!normaliseBusId(*raw, &busId)) return fail(x, "busid=\"%s\" is not a PCI address (dddd:bb:dd.f)", raw->c_str());
    auto dup = busIdLine_.emplace(busId, x.line);
    if (!dup.second)
      return fail(x, "busid %s appears twice (also line %d): the PCI tree would contain a cycle", busId.c_str(),
                  dup.first->second);
    double bw = 0;
    LOOM_CHECK(pciLink(x, parentBw, &bw));
    const std::string cls = lower(x.attrOr("class", ""));
    bool hasGpu = false, hasNic = false, hasPci = false;
    for (const auto& c : x.children) {
      hasGpu |= c->name == "gpu";
      hasNic |= c->name == "nic";
      hasPci |= c->name == "pci";
    }
    if (hasGpu + hasNic + hasPci > 1) return fail(x, "<pci> %s holds more than one kind of device", busId.c_str());
    if (cls.rfind(kNvSwitchClass, 0) == 0 || cls.rfind("0x0680", 0) == 0) {
      nvSwitchBusIds_.insert(busId);  // NVSwitches are one node, reached through the GPUs' nvlinks
      return loomSuccess;
    }
    if (hasGpu || (!hasNic && !hasPci && cls.rfind("0x03", 0) == 0)) {
      int id = addNode(NodeType::Gpu, "", x);
      sys_->nodes[id].busId = busId;
      attach(id, parent, bw);
      const XmlNode* g = nullptr;
      for (const auto& c : x.children)
        if (c->name == "gpu") g = c.get();
      return gpu(g, x, id);
    }
    if (hasNic || (!hasPci && cls.rfind("0x02", 0) == 0)) {
      const XmlNode* nicEl = nullptr;
      for (const auto& c : x.children)
        if (c->name == "nic") nicEl = c.get();
      return nicEl ? nic(*nicEl, parent, bw, busId) : classOnlyNic(x, parent, bw, busId);
    }
    if (!hasPci && !x.children.empty()) return misplaced(*x.children[0], "<pci>");
    if (!hasPci && cls.rfind("0x0604", 0) != 0) return loomSuccess;  // another device (storage, ...): not modelled
    int id = addNode(NodeType::PciSwitch, "PCI/" + busId, x);
    sys_->nodes[id].busId = busId;
    attach(id, parent, bw);
    for (const auto& c : x.children) LOOM_CHECK(pci(*c, id, bw));
    return loomSuccess;
  }

  loomResult_t gpu(const XmlNode* g, const XmlNode& pciEl, int id) {
    TopoNode& n = sys_->nodes[id];
    double dev = nextGpuDev_, sm = 0, rank = -1;
    if (g != nullptr) {
      LOOM_CHECK(number(*g, "dev", 0, 1023, nextGpuDev_, &dev));
      LOOM_CHECK(number(*g, "sm", 0, 200, 0, &sm));
      if (sm != 0 && sm < 10) return fail(*g, "sm=\"%g\" is not a compute capability (e.g. 80 for 8.0)", sm);
      LOOM_CHECK(number(*g, "rank", -1, 1 << 24, -1, &rank));
    }
    for (int other : sys_->ofType(NodeType::Gpu))
      if (other != id && sys_->nodes[other].dev == static_cast<int>(dev))
        return fail(g ? *g : pciEl, "GPU dev %d appears twice (also line %d)", static_cast<int>(dev),
                    sys_->nodes[other].line);
    n.dev = static_cast<int>(dev);
    n.sm = static_cast<int>(sm);
    n.rank = static_cast<int>(rank);
    n.name = "GPU" + std::to_string(n.dev);
    if (g == nullptr) n.note = "known by PCI class only";
    nextGpuDev_ = std::max(nextGpuDev_, n.dev + 1);
    if (g == nullptr) return loomSuccess;
    for (const auto& c : g->children) {
      if (c->name == "nvlink") {
        double count = 1;
        LOOM_CHECK(number(*c, "count", 1, 64, 1, &count));
        const std::string* target = c->attr("target");
        if (target == nullptr) return fail(*c, "<nvlink> needs the attribute target");
        std::string t;
        if (!normaliseBusId(*target, &t)) return fail(*c, "target=\"%s\" is not a PCI address", target->c_str());
        nvlinks_.push_back({id, t, lower(c->attrOr("tclass", "")), static_cast<int>(count), c->line});
      } else if (c->name == "mig") {
        n.migInstances.push_back(c->attrOr("uuid", "MIG-" + std::to_string(n.migInstances.size())));
      } else if (c->name == "c2c") {
        // Grace-Hopper CPU link: the CPU path is already the PCI tree's; nothing more to model here.
      } else {
        return misplaced(*c, "<gpu>");
      }
    }
    return loomSuccess;
  }

  loomResult_t nic(const XmlNode& x, int parent, double bw, const std::string& busId) {
    int id = addNode(NodeType::Nic, "", x);
    sys_->nodes[id].busId = busId;
    double best = 0;
    for (const auto& c : x.children) {
      if (c->name != "net") return misplaced(*c, "<nic>");
      const std::string* name = c->attr("name");
      if (name == nullptr || name->empty()) return fail(*c, "<net> needs the attribute name");
      if (sys_->findName(*name) >= 0) return fail(*c, "net name %s appears twice", name->c_str());
      double speed = 0, gdr = 0;
      LOOM_CHECK(number(*c, "speed", 1, 1e7, 0, &speed));
      LOOM_CHECK(number(*c, "gdr", 0, 1, 0, &gdr));
      int net = addNode(NodeType::Net, *name, *c);
      TopoNode& nn = sys_->nodes[net];
      nn.speedGBs = speed > 0 ? speed / 8000.0 : 12.5;
      nn.speedAssumed = speed == 0;
      if (speed == 0) nn.note = "speed not given: assumed 100 Gb/s";
      nn.gdr = gdr != 0;
      nn.linkLayer = c->attrOr("link_layer", "");
      nn.rdma = nn.linkLayer == "IB" || nn.linkLayer == "RoCE" || nn.linkLayer == "iWARP" ||
                (nn.linkLayer.empty() && (c->attr("guid") != nullptr || nn.gdr));
      best = std::max(best, nn.speedGBs);
      if (sys_->nodes[id].name.empty()) sys_->nodes[id].name = *name;
      nn.parent = id;
      nn.cpu = -1;  // set below, once the NIC is attached
      nn.parentLink = link(net, id, LinkType::Net, nn.speedGBs);
    }
    if (x.children.empty()) return fail(x, "<nic> holds no <net>");
    // A NIC hung straight off a CPU (virtual NICs): its link is as fast as its ports.
    attach(id, parent, bw > 0 ? bw : best);
    for (int net : sys_->netsOf(id)) sys_->nodes[net].cpu = sys_->nodes[id].cpu;
    return loomSuccess;
  }

  loomResult_t classOnlyNic(const XmlNode& x, int parent, double bw, const std::string& busId) {
    int id = addNode(NodeType::Nic, "NIC/" + busId, x);
    sys_->nodes[id].busId = busId;
    sys_->nodes[id].note = "known by PCI class only";
    attach(id, parent, bw);
    int net = addNode(NodeType::Net, "NET/" + busId, x);
    TopoNode& nn = sys_->nodes[net];
    nn.speedGBs = 12.5;
    nn.speedAssumed = true;
    nn.note = "speed not given: assumed 100 Gb/s";
    // PCI class 0x0207 is an InfiniBand controller; 0x0200 (Ethernet) may or may not do RoCE: unknown.
    nn.rdma = lower(x.attrOr("class", "")).rfind("0x0207", 0) == 0;
    nn.parent = id;
    nn.cpu = sys_->nodes[id].cpu;
    nn.parentLink = link(net, id, LinkType::Net, nn.speedGBs);
    return loomSuccess;
  }

  loomResult_t resolveNvlinks() {
    std::map<std::pair<int, int>, int> gpuPairs;  // both ends usually list the link: keep it once
    for (const PendingNvlink& l : nvlinks_) {
      XmlNode at;
      at.line = l.line;
      const TopoNode& g = sys_->nodes[l.gpu];
      if (l.target == g.busId) return fail(at, "nvlink from %s to itself", g.name.c_str());
      const double bw = l.count * nvlinkBandwidth(g.sm);
      int peer = sys_->findBusId(l.target);
      if (peer >= 0 && sys_->nodes[peer].type == NodeType::Gpu) {
        auto key = std::minmax(l.gpu, peer);
        auto it = gpuPairs.find(key);
        if (it == gpuPairs.end()) gpuPairs[key] = link(l.gpu, peer, LinkType::Nvl, bw);
        else sys_->links[it->second].bw = std::max(sys_->links[it->second].bw, bw);
      } else if (l.tclass.rfind("0x0680", 0) == 0 || nvSwitchBusIds_.count(l.target)) {
        // All NVSwitches are one node: a GPU's links to any of them add up to one link to the fabric.
        if (nvs_ < 0) nvs_ = addNode(NodeType::NvSwitch, "NVS", at);
        int existing = -1;
        for (int id : sys_->nodes[l.gpu].links)
          if (sys_->links[id].a == nvs_ || sys_->links[id].b == nvs_) existing = id;
        if (existing >= 0) sys_->links[existing].bw += bw;
        else link(l.gpu, nvs_, LinkType::Nvl, bw);
      } else {
        return fail(at, "nvlink target %s is neither a GPU nor an NVSwitch of this system (dangling link)",
                    l.target.c_str());
      }
    }
    return loomSuccess;
  }
};

}  // namespace

loomResult_t TopoSystem::build(const XmlNode& root, const std::string& source, std::unique_ptr<TopoSystem>* out) {
  auto sys = std::make_unique<TopoSystem>();
  sys->source = source;
  Builder b(source, sys.get());
  LOOM_CHECK(b.run(root));
  sys->xml = root.clone();
  *out = std::move(sys);
  return loomSuccess;
}

std::vector<int> TopoSystem::ofType(NodeType t) const {
  std::vector<int> r;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].type == t) r.push_back(static_cast<int>(i));
  if (t == NodeType::Gpu)  // by device index, whatever the file order
    std::stable_sort(r.begin(), r.end(), [&](int a, int b) { return nodes[a].dev < nodes[b].dev; });
  return r;
}

int TopoSystem::findBusId(const std::string& busId) const {
  std::string id = busId;
  for (char& ch : id) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].busId.empty() && nodes[i].busId == id && nodes[i].type != NodeType::Net) return static_cast<int>(i);
  return -1;
}

int TopoSystem::findName(const std::string& name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<int> TopoSystem::netsOf(int nic) const {
  std::vector<int> r;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].type == NodeType::Net && nodes[i].parent == nic) r.push_back(static_cast<int>(i));
  return r;
}

double TopoSystem::nicBw(int nic) const {
  double bw = 0;
  for (int n : netsOf(nic)) bw = std::max(bw, nodes[n].speedGBs);
  return bw;
}

bool TopoSystem::nicIsRdma(int nic) const {
  for (int n : netsOf(nic))
    if (nodes[n].rdma) return true;
  return false;
}

bool TopoSystem::nicSpeedAssumed(int nic) const {
  for (int n : netsOf(nic))
    if (!nodes[n].speedAssumed) return false;
  return true;
}

std::string TopoSystem::label(int node) const {
  const TopoNode& n = nodes[node];
  return n.busId.empty() ? n.name : n.name + " (" + n.busId + ")";
}

// --- paths ---------------------------------------------------------------------------------------

namespace {
int directed(const TopoLink& l, int link, int from) { return 2 * link + (l.a == from ? 0 : 1); }
}  // namespace

TopoPath TopoSystem::treePath(int a, int b) const {
  TopoPath p;
  // Up from each end to its CPU, then meet at the lowest common ancestor (or across the CPUs).
  auto chain = [&](int x) {
    std::vector<int> c{x};
    while (nodes[c.back()].parent >= 0) c.push_back(nodes[c.back()].parent);
    return c;
  };
  std::vector<int> ca = chain(a), cb = chain(b);
  int lca = -1;
  size_t ia = 0, ib = 0;
  for (ia = 0; ia < ca.size() && lca < 0; ++ia)
    for (ib = 0; ib < cb.size(); ++ib)
      if (ca[ia] == cb[ib]) {
        lca = ca[ia];
        break;
      }
  std::vector<int> up, down;  // nodes from a up to the meeting point, and from b up to it
  if (lca >= 0) {
    up.assign(ca.begin(), ca.begin() + ia);  // ia was incremented past the match
    down.assign(cb.begin(), cb.begin() + ib + 1);
  } else {
    up = ca;
    down = cb;
  }
  // Links along the way.
  double bw = 1e30;
  auto add = [&](int link, int from) {
    p.hops.push_back(directed(links[link], link, from));
    bw = std::min(bw, links[link].bw);
  };
  for (size_t i = 0; i + 1 < up.size(); ++i) add(nodes[up[i]].parentLink, up[i]);
  bool crossSockets = false;
  if (lca < 0) {
    int cpuA = up.back(), cpuB = down.back();
    if (nodes[cpuA].type != NodeType::Cpu || nodes[cpuB].type != NodeType::Cpu) {
      p.type = PathType::NET;  // an NVSwitch, which has no PCI parent
      p.bw = 0;
      p.hops.clear();
      return p;
    }
    for (int l : nodes[cpuA].links)
      if ((links[l].a == cpuB || links[l].b == cpuB) && links[l].type == LinkType::Sys) add(l, cpuA);
    crossSockets = true;
  }
  for (size_t i = down.size() - 1; i-- > 0;) add(nodes[down[i]].parentLink, down[i + 1]);
  // Path type: the worst thing crossed.
  int switches = 0;
  bool throughCpu = crossSockets;
  auto count = [&](int x) {
    if (x == a || x == b) return;
    if (nodes[x].type == NodeType::PciSwitch) ++switches;
    if (nodes[x].type == NodeType::Cpu) throughCpu = true;
  };
  for (int x : up) count(x);
  for (size_t i = 0; i + (lca >= 0 ? 1 : 0) < down.size(); ++i) count(down[i]);  // the meeting point once
  if (nodes[a].type == NodeType::Cpu || nodes[b].type == NodeType::Cpu) throughCpu = true;
  // A NET node is reached through its NIC: the NIC itself is not a hop that changes the type.
  if (crossSockets) p.type = PathType::SYS;
  else if (throughCpu) p.type = PathType::PHB;
  else if (switches <= 1) p.type = PathType::PIX;
  else p.type = PathType::PXB;
  p.bw = p.hops.empty() ? 0 : bw;
  return p;
}

bool TopoSystem::nvlinkPath(int a, int b, TopoPath* out) const {
  if (nodes[a].type != NodeType::Gpu || nodes[b].type != NodeType::Gpu) return false;
  // Direct (possibly through the NVSwitch), else through one intermediate GPU.
  TopoPath best;
  bool found = false;
  auto consider = [&](PathType t, std::vector<int> hops) {
    double bw = 1e30;
    for (int h : hops) bw = std::min(bw, links[h / 2].bw);
    if (!found || static_cast<int>(t) < static_cast<int>(best.type) || (t == best.type && bw > best.bw)) {
      best.type = t;
      best.bw = bw;
      best.hops = std::move(hops);
      found = true;
    }
  };
  for (int l : nodes[a].links) {
    if (links[l].type != LinkType::Nvl) continue;
    int mid = links[l].a == a ? links[l].b : links[l].a;
    if (mid == b) consider(PathType::NVL, {directed(links[l], l, a)});
    for (int l2 : nodes[mid].links) {
      if (l2 == l || links[l2].type != LinkType::Nvl) continue;
      int end = links[l2].a == mid ? links[l2].b : links[l2].a;
      if (end != b) continue;
      PathType t = nodes[mid].type == NodeType::NvSwitch ? PathType::NVL : PathType::NVB;
      consider(t, {directed(links[l], l, a), directed(links[l2], l2, mid)});
    }
  }
  if (found) *out = best;
  return found;
}

void TopoSystem::computePaths() const {
  const size_t n = nodes.size();
  paths_.assign(n, std::vector<TopoPath>(n));
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      TopoPath& p = paths_[a][b];
      if (a == b) {
        p.type = PathType::LOC;
        p.bw = 1e9;
        continue;
      }
      if (!nvlinkPath(static_cast<int>(a), static_cast<int>(b), &p)) p = treePath(static_cast<int>(a), static_cast<int>(b));
    }
}

const TopoPath& TopoSystem::path(int a, int b) const {
  // The host's model is shared by every communicator of the process (loomCommInitAll builds several
  // at once on different threads): the first to ask computes the table, the others wait for it.
  static std::mutex computing;
  std::lock_guard<std::mutex> g(computing);
  if (paths_.size() != nodes.size()) computePaths();
  return paths_[a][b];
}

}  // namespace loom
