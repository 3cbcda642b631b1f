// GPUDirect RDMA registrations: device memory registered with the RDMA device so that the NIC reads and
// writes it where it lies.  A dma-buf of the whole allocation is registered first (ibv_reg_dmabuf_mr,
// the upstream kernel path); where the driver cannot export one, the device pointer itself is
// registered (ibv_reg_mr, which works when the nvidia-peermem module is loaded).
//
// Registering pins and maps every page, so registrations are kept per protection domain and allocation
// (the runtime's buffer id: an address freed and allocated again is a new allocation and gets a new
// registration).  At most LOOM_IB_GDR_CACHE of them are kept; the least recently used goes first.  A
// registration holds its allocation's pages: memory the application frees stays in use until its
// registration is dropped: when the next new registration is made (which first drops every entry whose
// allocation is gone) or when it is evicted.  Caching allocators, PyTorch's among them, reuse their
// allocations, so the cache holds few.
#pragma once

#include <string>

#include "transport/ib/verbs_api.h"

namespace loom {

class DeviceApi;

// The region covering `bytes` of device memory at ptr, registered on pd; null with *why.  Every
// registration allows both uses (RDMA READ into it, which iWARP treats as a remote write; the peer
// reading it), so a buffer that is sent from and received into is registered once.
ibv_mr* deviceRegistration(const VerbsApi& api, DeviceApi* device, ibv_pd* pd, const void* ptr, size_t bytes,
                           std::string* why);

}  // namespace loom
