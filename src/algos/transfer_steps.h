// What the algorithms made of point-to-point transfers share (transfer_ring.cc, transfer_chain.cc):
// even chunks of a buffer, two scratch buffers beside the data, and the copy to oneself.  They run where
// GPU buffers cross hosts by GPUDirect RDMA, so the scratch lies where the data does: on its GPU for
// GPU data, in host memory otherwise.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "algos/scratch.h"
#include "runtime/comm.h"

namespace loom {

class DeviceApi;

// `count` elements in n chunks as even as they come: the first `count % n` one element longer.
struct Chunks {
  size_t count;
  int n;
  size_t size(int c) const { return count / n + (static_cast<size_t>(c) < count % n ? 1 : 0); }
  size_t offset(int c) const { return c * (count / n) + std::min<size_t>(c, count % n); }
};

// Two scratch buffers of `bytes` each, on the GPU of `near` when that is device memory (the
// communicator's device pool), else this thread's host scratch.  Valid while this object lives.
class TwinScratch {
 public:
  loomResult_t get(loomComm* comm, const void* near, size_t bytes);
  char* operator[](int i) const { return buffers_[i]; }
  // The device whose kernels combine in these buffers; null for host scratch.
  DeviceApi* device() const { return device_; }

 private:
  std::unique_ptr<ScratchLease> host_;
  char* buffers_[2] = {nullptr, nullptr};
  DeviceApi* device_ = nullptr;
};

// Copies `bytes` from `in` to `out` of this rank (either may be GPU memory): a transfer to oneself.
loomResult_t copyToSelf(loomComm* comm, const void* in, void* out, size_t bytes, uint64_t signature, const char* what);

}  // namespace loom
