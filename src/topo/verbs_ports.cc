#include "topo/verbs_ports.h"

#include <sys/stat.h>
#include <sys/utsname.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "loom_build_config.h"

#if LOOM_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

namespace loom {

long verbsLaneMbps(uint8_t s) {
  switch (s) {
    case 1: return 2500;     // SDR
    case 2: return 5000;     // DDR
    case 4: return 10000;    // QDR
    case 8: return 10000;    // FDR10
    case 16: return 14000;   // FDR
    case 32: return 25000;   // EDR
    case 64: return 50000;   // HDR
    case 128: return 100000; // NDR
    default: return 0;
  }
}

int verbsLanes(uint8_t w) {
  switch (w) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

std::vector<VerbsPort> verbsPorts(const std::string& device) {
  std::vector<VerbsPort> out;
#if LOOM_HAVE_VERBS
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return out;
  for (int i = 0; i < n; ++i) {
    if (device != ibv_get_device_name(list[i])) continue;
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) break;
    ibv_device_attr dev{};
    if (ibv_query_device(ctx, &dev) == 0) {
      for (int p = 1; p <= dev.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
        VerbsPort vp;
        vp.name = p == 1 ? device : device + ":" + std::to_string(p);
        vp.port = p;
        vp.speedMbps = verbsLaneMbps(pa.active_speed) * verbsLanes(pa.active_width);
        vp.linkLayer = list[i]->transport_type == IBV_TRANSPORT_IWARP      ? "iWARP"
                       : pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE"
                                                                  : "IB";
        out.push_back(vp);
      }
    }
    ibv_close_device(ctx);
    break;
  }
  ibv_free_device_list(list);
#else
  (void)device;
#endif
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
