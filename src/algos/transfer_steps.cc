#include "algos/transfer_steps.h"

#include "algos/p2p.h"
#include "device_runtime/device_api.h"
#include "device/device_call.h"

namespace loom {

loomResult_t TwinScratch::get(loomComm* comm, const void* near, size_t bytes) {
  DeviceApi* dev = deviceApi();
  if (dev != nullptr && dev->isDeviceMemory(near)) {
    if (!comm->deviceScratch) comm->deviceScratch = std::make_unique<StagingPool>(dev, StagingPool::Memory::kDevice);
    for (int i = 0; i < 2; ++i) {
      void* p = nullptr;
      LOOM_CHECK(comm->deviceScratch->get(static_cast<size_t>(i), bytes, &p, near));
      buffers_[i] = static_cast<char*>(p);
    }
    device_ = dev;
    return loomSuccess;
  }
  host_ = std::make_unique<ScratchLease>(ScratchUse::kReceived, 2 * bytes);
  buffers_[0] = host_->data();
  buffers_[1] = host_->data() + bytes;
  return loomSuccess;
}

loomResult_t copyToSelf(loomComm* comm, const void* in, void* out, size_t bytes, uint64_t signature, const char* what) {
  if (in == out) return loomSuccess;
  const int r = comm->rank;
  return runTransfers(comm, {Transfer{r, true, const_cast<char*>(static_cast<const char*>(in)), bytes, signature},
                             Transfer{r, false, static_cast<char*>(out), bytes, signature}}, what);
}

}  // namespace loom
