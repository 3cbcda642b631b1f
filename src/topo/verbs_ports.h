// RDMA NIC ports as the kernel's RDMA subsystem reports them in sysfs (/sys/class/infiniband): link layer
// (InfiniBand, Ethernet = RoCE, iWARP) and speed.  Used by detection for the NICs hwloc lists as
// OpenFabrics devices.  Read from sysfs rather than through libibverbs, so that detection needs no
// rdma-core: libloom loads rdma-core only when the ib transport is used (transport/ib/verbs_api.h).
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

// The first line of a sysfs (or any) file; "" when it cannot be read.
std::string readSysfs(const std::string& path);

// A port's speed in Mb/s from its sysfs `rate` ("100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)"); 0 if unreadable.
long verbsRateMbps(const std::string& rate);

// The active ports of RDMA device `device` (empty without the device); `sysRoot` is for tests.
std::vector<VerbsPort> verbsPorts(const std::string& device, const std::string& sysRoot = "/sys/class/infiniband");

// Whether a GPU memory peer module is loaded (nvidia-peermem / nv_peer_mem): NICs may register GPU
// memory by its address.
bool gpuPeerMemoryLoaded();
// Whether NICs may register GPU memory as dma-bufs instead: Linux 5.12 or later and the NVIDIA open
// kernel modules.  Without either, no GPUDirect RDMA.
bool gpuDmabufCapable();

}  // namespace loom
