// Every call loom makes into a GPU runtime goes through this interface, so that the stream-ordered path
// of device buffers (device/device_call.h) runs in tests against an emulated device on machines without
// a GPU (tests/device/emulated_device.h), the way the ib transport runs against an emulated verbs device.
// The real implementation (device_runtime/cuda_api.cc) calls the CUDA runtime and the kernels of
// kernels/device_kernels.cu; it exists in CUDA builds only and is installed at first use when the
// process sees a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "loom.h"

namespace loom {

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;
  virtual const char* name() const = 0;  // "cuda" or the emulator's, for messages

  // Whether ptr points into memory that host code must not touch directly (device or managed memory).
  // Pinned and registered host memory count as host memory.
  virtual bool isDeviceMemory(const void* ptr) = 0;
  // Whether handle is a stream of this runtime (a cudaStream_t); false for anything else.
  virtual bool isStream(void* handle) = 0;

  // Page-locked host memory, which the device copies to and from at full speed.
  virtual loomResult_t hostAlloc(void** ptr, size_t bytes) = 0;
  virtual void hostFree(void* ptr) = 0;
  // Device memory on the device of `near` (a device pointer), for scratch space.
  virtual loomResult_t deviceAlloc(void** ptr, size_t bytes, const void* near) = 0;
  virtual void deviceFree(void* ptr) = 0;

  // Starts a copy of `bytes` (any direction) on the runtime's own stream of this thread; copyDone()
  // says whether every copy started so far on it has finished (an error is a loomUnhandledCudaError).
  virtual loomResult_t copyStart(void* dst, const void* src, size_t bytes) = 0;
  virtual loomResult_t copyDone(bool* done) = 0;

  // A marker recorded now on `stream`: ready() turns true once everything issued on the stream before it
  // has finished.  The marker is freed by markerFree.
  virtual loomResult_t markerRecord(void* stream, void** marker) = 0;
  virtual loomResult_t markerReady(void* marker, bool* ready) = 0;
  virtual void markerFree(void* marker) = 0;
  // Makes `stream` run fn(arg) on a runtime thread once its earlier work has finished, and its later
  // work wait until fn returns.  fn must not call into the runtime.
  virtual loomResult_t enqueueHostCall(void* stream, void (*fn)(void*), void* arg) = 0;

  // Starts dst = a op b element-wise on the device (the kernels of kernels/device_kernels.cu) on the same
  // stream as copyStart's to dst's device, so copies and reductions into one buffer run in the order
  // started; copyDone() waits for both.  loomAvg is (a + b) / divisor.
  virtual loomResult_t reduceStart(void* dst, const void* a, const void* b, size_t count, loomDataType_t type,
                                   loomRedOp_t op, int divisor) = 0;

  // Device memory of other processes on this host (CUDA IPC): the handle of the allocation holding ptr
  // and ptr's offset in it; opening a peer's handle maps that allocation into this process, on the
  // device of `near` (a local device pointer), and returns its base.
  struct IpcHandle {
    unsigned char bytes[64];
    uint64_t offset;
  };
  virtual loomResult_t ipcExport(const void* ptr, IpcHandle* handle) = 0;
  virtual loomResult_t ipcOpen(const IpcHandle& handle, const void* near, void** base) = 0;
  virtual void ipcClose(void* base) = 0;
  // The PCI bus id of the device this thread's calls go to (the current device, as for NCCL: a rank's
  // GPU is the one current when it joins a communicator); "" when unknown, or when the process has not
  // started using that device (no CUDA context on it yet): a process that never touched a GPU is a CPU
  // rank, and its host buffers keep the host algorithms.
  virtual std::string currentBusId() = 0;
  // Readies the current device for loom's calls while nothing of loom's is in flight on it (a GPU rank
  // joining a communicator): loads loom's kernels there (see loadDeviceKernels in kernels/device_kernels.h).
  virtual loomResult_t prepareCurrentDevice() = 0;
  // The current device's UUID ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"; a MIG instance has its own).
  virtual std::string currentUuid() = 0;
  // The PCI bus id of the device ptr's memory is on ("" when unknown), and whether a device reaches
  // another's memory (the same device, or peer-to-peer over NVLink or PCIe as the runtime allows).
  virtual std::string busIdOf(const void* ptr) = 0;
  virtual bool reaches(const std::string& fromBusId, const std::string& toBusId) = 0;
  // GPUDirect RDMA.  The allocation holding ptr: `length` bytes at device address `base`; `id` names it
  // for as long as it lives (a later allocation at the same address gets another id).  Cheap: asked on
  // every transfer, to find the allocation's registration.
  struct Allocation {
    uint64_t base = 0;
    size_t length = 0;
    uint64_t id = 0;
  };
  virtual loomResult_t allocationOf(const void* ptr, Allocation* out) = 0;
  // The allocation as a dma-buf that an RDMA NIC can register (ibv_reg_dmabuf_mr): *fd is a new
  // descriptor the caller closes, the allocation starts `offset` bytes into it.  Asked once per
  // registration.
  virtual loomResult_t dmabufOf(const Allocation& a, int* fd, uint64_t* offset) = 0;
  // Why the last failing call failed, for the error message.
  virtual std::string lastErrorText() = 0;
};

// The runtime in use: an installed one (tests), else the CUDA runtime when this build has it and the
// process sees a GPU, else nullptr (every buffer is then host memory and every stream a loom stream).
DeviceApi* deviceApi();
// For tests: installs `api` (nullptr: back to the default) and returns the previous one.
DeviceApi* installDeviceApi(DeviceApi* api);

// The CUDA runtime's table (device_runtime/cuda_api.cc), or nullptr when this build has no CUDA or the process
// sees no GPU; `why` then says which.
DeviceApi* cudaDeviceApi(std::string* why);

}  // namespace loom
