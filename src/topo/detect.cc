#include "topo/detect.h"
#include "topo/gpu_detect.h"

#include "topo/verbs_ports.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

#include "base/error.h"
#include "base/log.h"
#include "base/params.h"
#include "loom_build_config.h"

#if LOOM_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace loom {

namespace {

std::string hex(unsigned v, int digits) {
  char b[16];
  snprintf(b, sizeof b, "0x%0*x", digits, v);
  return b;
}

#if LOOM_HAVE_HWLOC

std::string busIdOf(hwloc_obj_t o) {
  char b[32];
  snprintf(b, sizeof b, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev,
           o->attr->pcidev.func);
  return b;
}

bool isGpu(unsigned cls) { return (cls >> 8) == 0x03; }
bool isNic(unsigned cls) { return (cls >> 8) == 0x02; }
bool isNvSwitch(unsigned cls) { return cls == 0x0680; }

// Whether o (a PCI device or bridge) is, or leads to, something the model keeps.
bool interesting(hwloc_obj_t o) {
  if (o->type == HWLOC_OBJ_PCI_DEVICE) {
    unsigned cls = o->attr->pcidev.class_id;
    return isGpu(cls) || isNic(cls) || isNvSwitch(cls);
  }
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
    if (interesting(c)) return true;
  return false;
}

void pciAttrs(hwloc_obj_t o, XmlNode* x, unsigned cls) {
  const std::string bus = busIdOf(o);
  x->set("busid", bus);
  x->set("class", hex(cls << 8, 6));
  x->set("vendor", hex(o->attr->pcidev.vendor_id, 4));
  x->set("device", hex(o->attr->pcidev.device_id, 4));
  x->set("subsystem_vendor", hex(o->attr->pcidev.subvendor_id, 4));
  x->set("subsystem_device", hex(o->attr->pcidev.subdevice_id, 4));
  // sysfs has the negotiated speed and width; virtual devices (virtio) have neither.
  std::string speed = readSysfs("/sys/bus/pci/devices/" + bus + "/current_link_speed");
  std::string width = readSysfs("/sys/bus/pci/devices/" + bus + "/current_link_width");
  if (!speed.empty() && !width.empty() && atoi(width.c_str()) > 0) {
    x->set("link_speed", speed);
    x->set("link_width", width);
  }
}

void netDevice(hwloc_obj_t pci, XmlNode* pciEl) {
  XmlNode* nic = nullptr;
  int dev = 0;
  for (hwloc_obj_t os = pci->io_first_child; os; os = os->next_sibling) {
    if (os->type != HWLOC_OBJ_OS_DEVICE) continue;
    bool ib = os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
    if (!ib && os->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK) continue;
    if (nic == nullptr) nic = pciEl->add("nic");
    if (ib) {
      // An RDMA device: one <net> per active port, as libibverbs describes it.
      for (const VerbsPort& p : verbsPorts(os->name)) {
        XmlNode* net = nic->add("net");
        net->set("name", p.name);
        net->set("dev", std::to_string(dev++));
        net->set("port", std::to_string(p.port));
        if (p.speedMbps > 0) net->set("speed", std::to_string(p.speedMbps));
        net->set("link_layer", p.linkLayer);
        net->set("gdr", gpuPeerMemoryLoaded() || gpuDmabufCapable() ? "1" : "0");
      }
      continue;
    }
    XmlNode* net = nic->add("net");
    net->set("name", os->name);
    net->set("dev", std::to_string(dev++));
    {
      std::string mbps = readSysfs(std::string("/sys/class/net/") + os->name + "/speed");
      if (!mbps.empty() && atol(mbps.c_str()) > 0) net->set("speed", mbps);  // virtio says -1: unknown
      net->set("link_layer", "Ethernet");
    }
    net->set("gdr", "0");
  }
}

void pciTree(hwloc_obj_t o, XmlNode* parent, int* gpuDev) {
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
    if (!interesting(c)) continue;
    if (c->type == HWLOC_OBJ_BRIDGE) {
      if (c->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) {
        pciTree(c, parent, gpuDev);  // a host bridge: its children hang off the CPU
        continue;
      }
      XmlNode* x = parent->add("pci");
      pciAttrs(c, x, 0x0604);
      pciTree(c, x, gpuDev);
    } else if (c->type == HWLOC_OBJ_PCI_DEVICE) {
      unsigned cls = c->attr->pcidev.class_id;
      XmlNode* x = parent->add("pci");
      pciAttrs(c, x, cls);
      if (isNic(cls)) netDevice(c, x);
      // GPUs stay known by class here; with CUDA and a device present, identity and NVLink come from it.
    }
  }
}

#endif  // LOOM_HAVE_HWLOC

}  // namespace

loomResult_t detectHost(std::unique_ptr<XmlNode>* out) {
  auto sys = std::make_unique<XmlNode>();
  sys->name = "system";
  sys->set("version", "1");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  sys->set("host", host);
#if LOOM_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return setError(loomSystemError, "hwloc_topology_init failed");
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return setError(loomSystemError, "hwloc_topology_load failed");
  }
  const int numas = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  std::vector<XmlNode*> cpus;
  for (int i = 0; i < numas; ++i) {
    hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    XmlNode* cpu = sys->add("cpu");
    cpu->set("numaid", std::to_string(numa->os_index));
    char* mask = nullptr;
    hwloc_bitmap_asprintf(&mask, numa->cpuset);
    cpu->set("affinity", mask ? mask : "");
    free(mask);
    cpu->set("arch", "x86_64");
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, numa);
    if (pkg == nullptr) pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    if (pkg != nullptr) {
      if (const char* v = hwloc_obj_get_info_by_name(pkg, "CPUVendor")) cpu->set("vendor", v);
      if (const char* f = hwloc_obj_get_info_by_name(pkg, "CPUFamilyNumber")) cpu->set("familyid", f);
      if (const char* m = hwloc_obj_get_info_by_name(pkg, "CPUModelNumber")) cpu->set("modelid", m);
      if (const char* m = hwloc_obj_get_info_by_name(pkg, "CPUModel")) cpu->set("model_name", m);
    }
    cpu->set("cores", std::to_string(hwloc_get_nbobjs_inside_cpuset_by_type(topo, numa->cpuset, HWLOC_OBJ_PU)));
    cpus.push_back(cpu);
  }
  // Host bridges hang off the smallest CPU set that holds their locality: attach each to the first NUMA
  // node of that set.
  int gpuDev = 0;
  for (hwloc_obj_t hb = hwloc_get_next_bridge(topo, nullptr); hb; hb = hwloc_get_next_bridge(topo, hb)) {
    if (hb->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_HOST || !interesting(hb)) continue;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, hb);
    int target = 0;
    for (int i = 0; i < numas; ++i)
      if (hwloc_bitmap_intersects(hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i)->cpuset, anc->cpuset)) {
        target = i;
        break;
      }
    if (!cpus.empty()) pciTree(hb, cpus[target], &gpuDev);
  }
  hwloc_topology_destroy(topo);
#else
  XmlNode* cpu = sys->add("cpu");
  cpu->set("numaid", "0");
  cpu->set("cores", std::to_string(sysconf(_SC_NPROCESSORS_ONLN)));
  LOOM_INFO(kTopo, "built without hwloc: the model is one CPU and no devices");
#endif
  std::string why;
  std::vector<DetectedGpu> gpus = probeGpusWithNvml(&why);
  LOOM_INFO(kTopo, "GPUs: %s", why.c_str());
  addGpus(sys.get(), gpus);
  *out = std::move(sys);
  return loomSuccess;
}

XmlNode* findByBusId(XmlNode* n, const std::string& busId) {
  if (n->name == "pci" && n->attrOr("busid", "") == busId) return n;
  for (auto& c : n->children)
    if (XmlNode* f = findByBusId(c.get(), busId)) return f;
  return nullptr;
}

namespace {

void mergeInto(XmlNode* file, const XmlNode& det, XmlNode* fileCpu) {
  for (const auto& c : det.children) {
    if (c->name != "pci") continue;
    const std::string bus = c->attrOr("busid", "");
    if (XmlNode* have = findByBusId(file, bus)) {
      for (const auto& kv : c->attrs)
        if (have->attr(kv.first) == nullptr) have->set(kv.first, kv.second);
      bool hasChildren = !have->children.empty();
      if (!hasChildren)
        for (const auto& cc : c->children)
          if (cc->name != "pci") have->children.push_back(cc->clone());
      mergeInto(file, *c, have);
    } else if (fileCpu != nullptr) {
      fileCpu->children.push_back(c->clone());
    }
  }
}

}  // namespace

void mergeTopology(XmlNode* file, const XmlNode& detected) {
  for (const auto& dcpu : detected.children) {
    if (dcpu->name != "cpu") continue;
    XmlNode* target = nullptr;
    for (auto& fc : file->children)
      if (fc->name == "cpu" && fc->attrOr("numaid", "") == dcpu->attrOr("numaid", "?")) target = fc.get();
    if (target == nullptr)
      for (auto& fc : file->children)
        if (fc->name == "cpu" && target == nullptr) target = fc.get();
    if (target != nullptr)
      for (const auto& kv : dcpu->attrs)
        if (target->attr(kv.first) == nullptr) target->set(kv.first, kv.second);
    mergeInto(file, *dcpu, target);
  }
  if (file->attr("host") == nullptr && detected.attr("host") != nullptr) file->set("host", *detected.attr("host"));
}

loomResult_t localTopology(std::shared_ptr<const TopoSystem>* out) {
  static std::mutex mu;
  static std::shared_ptr<const TopoSystem> cached;
  static std::string cachedKey;
  std::lock_guard<std::mutex> lock(mu);
  const std::string file = params().TOPO_FILE, dump = params().TOPO_DUMP_FILE;
  if (cached && cachedKey == file) {
    *out = cached;
    return loomSuccess;
  }
  std::unique_ptr<XmlNode> detected, tree;
  LOOM_CHECK(detectHost(&detected));
  std::string source = "detected";
  if (!file.empty()) {
    LOOM_CHECK(xmlLoadFile(file, &tree));
    if (tree->name == "system") mergeTopology(tree.get(), *detected);
    source = file + " + detected";
  } else {
    tree = std::move(detected);
  }
  std::unique_ptr<TopoSystem> sys;
  LOOM_CHECK(TopoSystem::build(*tree, file.empty() ? "detected topology" : file, &sys));
  sys->source = source;
  if (!dump.empty()) {
    std::ofstream f(dump);
    f << xmlWrite(*sys->xml);
    if (!f) LOOM_WARN(kTopo, "cannot write LOOM_TOPO_DUMP_FILE %s", dump.c_str());
    else LOOM_INFO(kTopo, "topology written to %s", dump.c_str());
  }
  LOOM_INFO(kTopo, "topology from %s: %zu CPUs, %zu GPUs, %zu NICs", source.c_str(), sys->ofType(NodeType::Cpu).size(),
            sys->ofType(NodeType::Gpu).size(), sys->ofType(NodeType::Nic).size());
  cached = std::move(sys);
  cachedKey = file;
  *out = cached;
  return loomSuccess;
}

int currentNumaNode() {
#if LOOM_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return -1;
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return -1;
  }
  int numa = -1;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  // Bound to CPUs of one NUMA node: that node.  Otherwise where this thread runs right now.
  if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0) {
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
      if (hwloc_bitmap_isincluded(set, o->cpuset)) numa = static_cast<int>(o->os_index);
    }
  }
  if (numa < 0 && hwloc_get_last_cpu_location(topo, set, HWLOC_CPUBIND_THREAD) == 0) {
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
      if (hwloc_bitmap_intersects(set, o->cpuset)) numa = static_cast<int>(o->os_index);
    }
  }
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(topo);
  return numa;
#else
  return 0;
#endif
}

}  // namespace loom
