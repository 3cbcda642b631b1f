#include "topo/verbs_ports.h"

#include <sys/stat.h>
#include <sys/utsname.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace loom {

std::string readSysfs(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

long verbsRateMbps(const std::string& rate) {
  double gbps = 0;
  char unit[16] = {};
  if (std::sscanf(rate.c_str(), "%lf %15s", &gbps, unit) != 2 || gbps <= 0 || std::string(unit) != "Gb/sec") return 0;
  return static_cast<long>(gbps * 1000 + 0.5);
}

std::vector<VerbsPort> verbsPorts(const std::string& device, const std::string& sysRoot) {
  std::vector<VerbsPort> out;
  const std::string dir = sysRoot + "/" + device;
  // node_type "4: RNIC" is an iWARP device; "1: CA" an InfiniBand or RoCE one (told apart per port).
  const bool iwarp = readSysfs(dir + "/node_type").find("RNIC") != std::string::npos;
  for (int p = 1; p <= 64; ++p) {
    const std::string port = dir + "/ports/" + std::to_string(p);
    const std::string state = readSysfs(port + "/state");  // "4: ACTIVE"
    if (state.empty()) break;
    if (state.find("ACTIVE") == std::string::npos) continue;
    VerbsPort vp;
    vp.name = p == 1 ? device : device + ":" + std::to_string(p);
    vp.port = p;
    vp.speedMbps = verbsRateMbps(readSysfs(port + "/rate"));
    vp.linkLayer = iwarp ? "iWARP" : readSysfs(port + "/link_layer") == "Ethernet" ? "RoCE" : "IB";
    out.push_back(vp);
  }
  return out;
}

bool gpuPeerMemoryLoaded() {
  struct stat st {};
  return stat("/sys/kernel/mm/memory_peers/nv_mem/version", &st) == 0 || stat("/sys/module/nvidia_peermem", &st) == 0 ||
         stat("/sys/module/nv_peer_mem", &st) == 0;
}

bool gpuDmabufCapable() {
  // RDMA dma-buf registration came with Linux 5.12; the NVIDIA driver exports dma-bufs from its open
  // kernel modules, whose version banner says so.
  utsname u{};
  int major = 0, minor = 0;
  if (uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2 || major * 100 + minor < 512)
    return false;
  std::ifstream f("/proc/driver/nvidia/version");
  std::string banner((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return banner.find("Open Kernel Module") != std::string::npos;
}

}  // namespace loom
