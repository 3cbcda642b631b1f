#include "topo/gpu_detect.h"

#include <dlfcn.h>

#include <cctype>
#include <cstring>
#include <map>

#include "base/log.h"
#include "topo/detect.h"

namespace loom {

namespace {

// The parts of NVML's C interface used here, declared from its documentation (its header is not part
// of the CUDA toolkit on every machine).  All calls return 0 on success.
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
using NvmlDevice = void*;
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kNvlinkRemoteSwitch = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH

struct Nvml {
  int (*init)();
  int (*shutdown)();
  const char* (*errorString)(int);
  int (*count)(unsigned*);
  int (*handleByIndex)(unsigned, NvmlDevice*);
  int (*pciInfo)(NvmlDevice, NvmlPciInfo*);
  int (*computeCapability)(NvmlDevice, int*, int*);
  int (*nvlinkState)(NvmlDevice, unsigned, int*);
  int (*nvlinkRemotePci)(NvmlDevice, unsigned, NvmlPciInfo*);
  int (*nvlinkRemoteType)(NvmlDevice, unsigned, int*);
  int (*migMode)(NvmlDevice, unsigned*, unsigned*);
  int (*maxMigDevices)(NvmlDevice, unsigned*);
  int (*migDeviceByIndex)(NvmlDevice, unsigned, NvmlDevice*);
  int (*uuid)(NvmlDevice, char*, unsigned);
  int (*computeMode)(NvmlDevice, int*);
};

template <typename F>
bool load(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

// "00000000:17:00.0" (NVML's 8-digit domain) -> "0000:17:00.0".
std::string shortBusId(const char* id) {
  std::string s(id);
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  if (s.size() == 16 && s.compare(0, 4, "0000") == 0) s = s.substr(4);
  return s;
}

const char* computeModeName(int mode) {
  switch (mode) {
    case 0: return "default";
    case 2: return "prohibited";
    case 3: return "exclusive_process";
    default: return "exclusive_thread";
  }
}

}  // namespace

std::vector<DetectedGpu> probeGpusWithNvml(std::string* why) {
  std::vector<DetectedGpu> gpus;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    *why = "NVML not found (libnvidia-ml.so.1: no NVIDIA driver on this host)";
    return gpus;
  }
  Nvml n{};
  const bool ok = load(lib, "nvmlInit_v2", &n.init) && load(lib, "nvmlShutdown", &n.shutdown) &&
                  load(lib, "nvmlErrorString", &n.errorString) && load(lib, "nvmlDeviceGetCount_v2", &n.count) &&
                  load(lib, "nvmlDeviceGetHandleByIndex_v2", &n.handleByIndex) &&
                  load(lib, "nvmlDeviceGetPciInfo_v3", &n.pciInfo) &&
                  load(lib, "nvmlDeviceGetCudaComputeCapability", &n.computeCapability);
  if (!ok) {
    *why = "NVML lacks the functions needed (driver too old?)";
    dlclose(lib);
    return gpus;
  }
  // Optional parts: older drivers or GPUs without NVLink/MIG simply lack them.
  load(lib, "nvmlDeviceGetNvLinkState", &n.nvlinkState);
  load(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &n.nvlinkRemotePci);
  load(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &n.nvlinkRemoteType);
  load(lib, "nvmlDeviceGetMigMode", &n.migMode);
  load(lib, "nvmlDeviceGetMaxMigDeviceCount", &n.maxMigDevices);
  load(lib, "nvmlDeviceGetMigDeviceHandleByIndex", &n.migDeviceByIndex);
  load(lib, "nvmlDeviceGetUUID", &n.uuid);
  load(lib, "nvmlDeviceGetComputeMode", &n.computeMode);
  int rc = n.init();
  unsigned count = 0;
  if (rc != 0 || n.count(&count) != 0) {
    *why = std::string("NVML failed: ") + n.errorString(rc);
    if (rc == 0) n.shutdown();
    dlclose(lib);
    return gpus;
  }
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice d = nullptr;
    NvmlPciInfo pci{};
    if (n.handleByIndex(i, &d) != 0 || n.pciInfo(d, &pci) != 0) continue;
    DetectedGpu g;
    g.busId = shortBusId(pci.busId);
    g.dev = static_cast<int>(i);
    int major = 0, minor = 0;
    if (n.computeCapability(d, &major, &minor) == 0) g.sm = major * 10 + minor;
    int mode = 0;
    if (n.computeMode != nullptr && n.computeMode(d, &mode) == 0) g.computeMode = computeModeName(mode);
    if (n.nvlinkState != nullptr && n.nvlinkRemotePci != nullptr) {
      std::map<std::string, DetectedNvlink> byRemote;
      for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
        int active = 0;
        NvmlPciInfo remote{};
        if (n.nvlinkState(d, link, &active) != 0 || !active || n.nvlinkRemotePci(d, link, &remote) != 0) continue;
        DetectedNvlink& l = byRemote[shortBusId(remote.busId)];
        if (l.remoteBusId.empty()) {
          l.remoteBusId = shortBusId(remote.busId);
          l.count = 0;
          int type = -1;
          l.toSwitch = n.nvlinkRemoteType != nullptr && n.nvlinkRemoteType(d, link, &type) == 0 && type == kNvlinkRemoteSwitch;
        }
        ++l.count;
      }
      for (auto& [id, l] : byRemote) g.nvlinks.push_back(l);
    }
    unsigned current = 0, pending = 0, maxMig = 0;
    if (n.migMode != nullptr && n.migMode(d, &current, &pending) == 0 && current == 1 && n.maxMigDevices != nullptr &&
        n.migDeviceByIndex != nullptr && n.uuid != nullptr && n.maxMigDevices(d, &maxMig) == 0) {
      for (unsigned m = 0; m < maxMig; ++m) {
        NvmlDevice mig = nullptr;
        char uuid[96] = {};
        if (n.migDeviceByIndex(d, m, &mig) == 0 && n.uuid(mig, uuid, sizeof uuid) == 0) g.migUuids.push_back(uuid);
      }
    }
    gpus.push_back(std::move(g));
  }
  n.shutdown();
  dlclose(lib);
  *why = "NVML: " + std::to_string(gpus.size()) + " GPU(s)";
  return gpus;
}

void addGpus(XmlNode* system, const std::vector<DetectedGpu>& gpus) {
  std::map<std::string, bool> seen;  // GPUs NVML shows (a container may hide some of their NVLink peers)
  for (const DetectedGpu& g : gpus) seen[g.busId] = true;
  for (const DetectedGpu& g : gpus) {
    XmlNode* pci = findByBusId(system, g.busId);
    if (pci == nullptr) {
      XmlNode* cpu = nullptr;
      for (auto& c : system->children)
        if (c->name == "cpu" && cpu == nullptr) cpu = c.get();
      if (cpu == nullptr) continue;
      pci = cpu->add("pci");
      pci->set("busid", g.busId);
      pci->set("class", "0x030200");
      LOOM_INFO(kTopo, "GPU %s: not in the PCI tree seen (container or VM); placed under the first CPU", g.busId.c_str());
    }
    XmlNode* gpu = nullptr;
    for (auto& c : pci->children)
      if (c->name == "gpu") gpu = c.get();
    if (gpu == nullptr) gpu = pci->add("gpu");
    gpu->set("dev", std::to_string(g.dev));
    if (g.sm > 0) gpu->set("sm", std::to_string(g.sm));
    if (!g.computeMode.empty()) gpu->set("compute_mode", g.computeMode);
    for (const DetectedNvlink& l : g.nvlinks) {
      if (!l.toSwitch && !seen.count(l.remoteBusId)) {
        LOOM_INFO(kTopo, "GPU %s: NVLink peer %s is not visible here; link left out", g.busId.c_str(),
                  l.remoteBusId.c_str());
        continue;
      }
      XmlNode* x = gpu->add("nvlink");
      x->set("target", l.remoteBusId);
      x->set("count", std::to_string(l.count));
      x->set("tclass", l.toSwitch ? "0x068000" : "0x030200");
    }
    for (const std::string& uuid : g.migUuids) gpu->add("mig")->set("uuid", uuid);
  }
}

}  // namespace loom
