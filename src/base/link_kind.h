// The kinds of link between two ranks.  The topology names the kind a pair should use
// (topo/decisions.h, pairTransport) and each transport says which kind it makes (transport.h): the
// runtime matches the two by this type, not by names.
#pragma once

namespace loom {

enum class LinkKind {
  kSharedMemory,  // ranks of one host, through host memory
  kNetwork,       // ranks of different hosts (or of one host with shared memory off)
  kDevicePeer,    // GPUs of one host reading each other's memory (NVLink, PCIe P2P, the same GPU)
};

inline const char* linkKindName(LinkKind k) {
  switch (k) {
    case LinkKind::kSharedMemory: return "shm";
    case LinkKind::kNetwork: return "net";
    case LinkKind::kDevicePeer: return "device peer";
  }
  return "?";
}

}  // namespace loom
