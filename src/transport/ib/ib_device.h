// The RDMA device loom's ib transport uses (chosen once per process), and the constants both ends of a
// connection agree on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/ib/verbs_api.h"

namespace loom {

constexpr uint32_t kIbMagic = 0x4c4f4f49;    // "LOOI": queue pairs connected by attributes over TCP
constexpr uint32_t kIbMagicCm = 0x4c4f4f43;  // "LOOC": queue pairs connected through rdma_cm
constexpr size_t kHeaderBytes = 16;      // at the start of every slot: size, signature
constexpr size_t kNoteBytes = 16;        // a credit or a write notification: the slot index
constexpr int kMaxQps = 16;              // LOOM_IB_QPS_PER_CONNECTION at most

// The device: chosen once per process (per verbs table, for tests).
struct IbDevice {
  const VerbsApi* api = nullptr;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 0;
  ibv_port_attr portAttr{};
  int gidIndex = -1;  // -1: no GID (InfiniBand by LID)
  ibv_gid gid{};
  bool iwarp = false;
  std::string name;
  std::string error;  // why there is no usable device
};

const IbDevice& ibDevice();
// Whether this device's queue pairs connect through rdma_cm (LOOM_IB_CM; iWARP needs it).
bool usesRdmaCm(const IbDevice& d);
// rdma_cm mode: one protection domain per device context rdma_cm hands out (it opens each device once
// per process), kept for the life of the process like the device itself, so that registered buffers of
// a closed connection fit the next one (transport/ib/mr_cache.h).
ibv_pd* protectionDomainOf(const VerbsApi& api, ibv_context* context);

}  // namespace loom
