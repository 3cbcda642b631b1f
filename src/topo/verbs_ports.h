// RDMA NIC ports as libibverbs reports them: link layer (InfiniBand, Ethernet = RoCE, iWARP) and speed.
// Used by detection for the NICs hwloc lists as OpenFabrics devices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

struct VerbsPort {
  std::string name;  // device name, with ":port" past port 1
  int port = 1;
  long speedMbps = 0;     // lanes x per-lane rate
  std::string linkLayer;  // IB, RoCE or iWARP
};

// Per-lane signalling rate in Mb/s for ibv_port_attr::active_speed (SDR .. NDR; XDR needs active_speed_ex, newer than this rdma-core); 0 if unknown.
long verbsLaneMbps(uint8_t activeSpeed);
// Lanes for ibv_port_attr::active_width (1x, 2x, 4x, 8x, 12x); 0 if unknown.
int verbsLanes(uint8_t activeWidth);

// The active ports of RDMA device `device` (empty without libibverbs in the build or without the device).
std::vector<VerbsPort> verbsPorts(const std::string& device);

// Whether a GPU memory peer module is loaded (nvidia-peermem / nv_peer_mem): NICs may register GPU
// memory by its address.
bool gpuPeerMemoryLoaded();
// Whether NICs may register GPU memory as dma-bufs instead: Linux 5.12 or later and the NVIDIA open
// kernel modules.  Without either, no GPUDirect RDMA.
bool gpuDmabufCapable();

}  // namespace loom
