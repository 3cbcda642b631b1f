// The CUDA runtime behind DeviceApi (CUDA builds only; linked statically, so a machine without the
// driver loads loom fine and simply has no GPU).
//
// Copies run on streams of loom's own, created non-blocking: a user stream waiting in one of our host
// calls must never be one that our copies implicitly synchronise with (the legacy default stream
// synchronises with every blocking stream, and would wait for the host call that waits for the copy).
#include <cuda_runtime.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "device_runtime/device_api.h"
#include "kernels/device_kernels.h"

namespace loom {

namespace {

thread_local std::string tlsLastError;

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  tlsLastError = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  cudaGetLastError();  // clears the sticky last error of non-fatal failures
  return false;
}

// This thread's copy streams, one per device, and which of them have copies in flight.
struct ThreadStreams {
  std::map<int, cudaStream_t> byDevice;
  std::vector<cudaStream_t> busy;
  ~ThreadStreams() {
    for (auto& [device, s] : byDevice) cudaStreamDestroy(s);
  }
};
thread_local ThreadStreams tlsStreams;

// The device whose memory ptr is (-1 for host memory).
int deviceOf(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
}

// A driver function, reached through the runtime so that loom does not link the driver library; null
// when the driver is older than `version`.
void* driverEntry(const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status;
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return fn;
}

// The allocation holding ptr: its start and size (the driver's cuMemGetAddressRange).  Driver calls need
// a current context, which a thread of loom's own (an I/O thread reading into GPU memory) may lack: it
// gets the primary context of the pointer's device (a thread without a context loses nothing by it).
bool allocationRange(const void* ptr, uintptr_t* base, size_t* bytes) {
  using GetRange = int (*)(unsigned long long*, size_t*, unsigned long long);
  using GetCurrent = int (*)(void**);
  static auto getRange = reinterpret_cast<GetRange>(driverEntry("cuMemGetAddressRange", 12000));
  static auto getCurrent = reinterpret_cast<GetCurrent>(driverEntry("cuCtxGetCurrent", 4000));
  void* context = nullptr;
  if (getCurrent != nullptr && getCurrent(&context) == 0 && context == nullptr) {
    const int device = deviceOf(ptr);
    if (device >= 0 && cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
  }
  unsigned long long b = 0;
  size_t size = 0;
  if (getRange == nullptr || getRange(&b, &size, reinterpret_cast<uintptr_t>(ptr)) != 0) {
    tlsLastError = "cuMemGetAddressRange failed";
    return false;
  }
  *base = static_cast<uintptr_t>(b);
  *bytes = size;
  return true;
}
bool allocationBase(const void* ptr, uintptr_t* base) {
  size_t bytes = 0;
  return allocationRange(ptr, base, &bytes);
}

bool streamFor(int device, cudaStream_t* out) {
  auto it = tlsStreams.byDevice.find(device);
  if (it != tlsStreams.byDevice.end()) return *out = it->second, true;
  if (!ok(cudaSetDevice(device), "cudaSetDevice")) return false;
  cudaStream_t s = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) return false;
  tlsStreams.byDevice[device] = s;
  return *out = s, true;
}

class CudaApi final : public DeviceApi {
 public:
  const char* name() const override { return "cuda"; }

  bool isDeviceMemory(const void* ptr) override { return ptr != nullptr && deviceOf(ptr) >= 0; }

  bool isStream(void* handle) override {
    if (handle == nullptr) return false;
    cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(handle));
    if (e == cudaSuccess || e == cudaErrorNotReady) return true;
    cudaGetLastError();
    return false;
  }

  loomResult_t hostAlloc(void** ptr, size_t bytes) override {
    return ok(cudaHostAlloc(ptr, bytes, cudaHostAllocPortable), "cudaHostAlloc") ? loomSuccess : loomUnhandledCudaError;
  }
  void hostFree(void* ptr) override { cudaFreeHost(ptr); }

  loomResult_t deviceAlloc(void** ptr, size_t bytes, const void* near) override {
    const int device = deviceOf(near);
    if (device >= 0 && !ok(cudaSetDevice(device), "cudaSetDevice")) return loomUnhandledCudaError;
    return ok(cudaMalloc(ptr, bytes), "cudaMalloc") ? loomSuccess : loomUnhandledCudaError;
  }
  void deviceFree(void* ptr) override { cudaFree(ptr); }

  loomResult_t copyStart(void* dst, const void* src, size_t bytes) override {
    int device = deviceOf(dst);
    if (device < 0) device = deviceOf(src);
    if (device < 0) device = 0;  // host to host: any device's copy engine will do
    cudaStream_t s = nullptr;
    if (!streamFor(device, &s)) return loomUnhandledCudaError;
    if (!ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync")) return loomUnhandledCudaError;
    tlsStreams.busy.push_back(s);
    return loomSuccess;
  }

  loomResult_t copyDone(bool* done) override {
    auto& busy = tlsStreams.busy;
    while (!busy.empty()) {
      cudaError_t e = cudaStreamQuery(busy.back());
      if (e == cudaErrorNotReady) return *done = false, loomSuccess;
      if (!ok(e, "cudaStreamQuery (copies)")) return busy.clear(), loomUnhandledCudaError;
      busy.pop_back();
    }
    *done = true;
    return loomSuccess;
  }

  loomResult_t markerRecord(void* stream, void** marker) override {
    auto s = static_cast<cudaStream_t>(stream);
    int device = -1;
    if (!ok(cudaStreamGetDevice(s, &device), "cudaStreamGetDevice") || !ok(cudaSetDevice(device), "cudaSetDevice"))
      return loomUnhandledCudaError;
    cudaEvent_t e = nullptr;
    if (!ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags"))
      return loomUnhandledCudaError;
    if (!ok(cudaEventRecord(e, s), "cudaEventRecord")) {
      cudaEventDestroy(e);
      return loomUnhandledCudaError;
    }
    *marker = e;
    return loomSuccess;
  }
  loomResult_t markerReady(void* marker, bool* ready) override {
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(marker));
    if (e == cudaErrorNotReady) return *ready = false, loomSuccess;
    if (!ok(e, "cudaEventQuery")) return loomUnhandledCudaError;
    *ready = true;
    return loomSuccess;
  }
  void markerFree(void* marker) override { cudaEventDestroy(static_cast<cudaEvent_t>(marker)); }

  loomResult_t enqueueHostCall(void* stream, void (*fn)(void*), void* arg) override {
    return ok(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, arg), "cudaLaunchHostFunc")
               ? loomSuccess
               : loomUnhandledCudaError;
  }

  loomResult_t reduceStart(void* dst, const void* a, const void* b, size_t count, loomDataType_t type, loomRedOp_t op,
                           int divisor) override {
    int device = deviceOf(dst);
    cudaStream_t s = nullptr;
    if (device < 0 || !streamFor(device, &s)) {
      if (device < 0) tlsLastError = "reduce: dst is not device memory";
      return loomUnhandledCudaError;
    }
    if (!ok(cudaSetDevice(device), "cudaSetDevice") ||
        !ok(static_cast<cudaError_t>(launchReduceKernel(dst, a, b, count, type, op, divisor, s)), "reduce kernel launch"))
      return loomUnhandledCudaError;
    tlsStreams.busy.push_back(s);
    return loomSuccess;
  }

  loomResult_t ipcExport(const void* ptr, IpcHandle* handle) override {
    static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(handle->bytes), "IPC handle size");
    cudaIpcMemHandle_t h;
    if (!ok(cudaIpcGetMemHandle(&h, const_cast<void*>(ptr)), "cudaIpcGetMemHandle")) return loomUnhandledCudaError;
    uintptr_t base = 0;
    if (!allocationBase(ptr, &base)) return loomUnhandledCudaError;
    std::memset(handle->bytes, 0, sizeof handle->bytes);
    std::memcpy(handle->bytes, &h, sizeof h);
    handle->offset = reinterpret_cast<uintptr_t>(ptr) - base;
    return loomSuccess;
  }

  loomResult_t ipcOpen(const IpcHandle& handle, const void* near, void** base) override {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof h);
    int device = deviceOf(near);
    if (device >= 0 && !ok(cudaSetDevice(device), "cudaSetDevice")) return loomUnhandledCudaError;
    return ok(cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle")
               ? loomSuccess
               : loomUnhandledCudaError;
  }
  void ipcClose(void* base) override { cudaIpcCloseMemHandle(base); }

  // The driver's address range of the allocation and its buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID).
  loomResult_t allocationOf(const void* ptr, Allocation* out) override {
    using GetAttribute = int (*)(void*, int, unsigned long long);
    static auto getAttribute = reinterpret_cast<GetAttribute>(driverEntry("cuPointerGetAttribute", 4000));
    constexpr int kBufferId = 7;  // CU_POINTER_ATTRIBUTE_BUFFER_ID
    uintptr_t base = 0;
    size_t bytes = 0;
    unsigned long long id = 0;
    if (!allocationRange(ptr, &base, &bytes)) return loomUnhandledCudaError;
    if (getAttribute == nullptr || getAttribute(&id, kBufferId, base) != 0) {
      tlsLastError = "cuPointerGetAttribute(BUFFER_ID) failed";
      return loomUnhandledCudaError;
    }
    *out = Allocation{base, bytes, id};
    return loomSuccess;
  }

  // cuMemGetHandleForAddressRange (CUDA 11.7 and a driver with dma-buf support: the open kernel
  // modules) over the allocation, page aligned as the driver requires.
  loomResult_t dmabufOf(const Allocation& a, int* fd, uint64_t* offset) override {
    using GetHandle = int (*)(void*, unsigned long long, size_t, int, unsigned long long);
    static auto getHandle = reinterpret_cast<GetHandle>(driverEntry("cuMemGetHandleForAddressRange", 11070));
    constexpr int kDmaBufFd = 1;  // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
    if (getHandle == nullptr) {
      tlsLastError = "the CUDA driver has no cuMemGetHandleForAddressRange (dma-buf export needs CUDA 11.7)";
      return loomUnhandledCudaError;
    }
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t start = a.base & ~(page - 1), end = (a.base + a.length + page - 1) & ~(page - 1);
    *fd = -1;
    if (getHandle(fd, start, end - start, kDmaBufFd, 0) != 0 || *fd < 0) {
      tlsLastError = "cuMemGetHandleForAddressRange(DMA_BUF_FD) failed (the driver may not support dma-buf)";
      return loomUnhandledCudaError;
    }
    *offset = a.base - start;
    return loomSuccess;
  }

  loomResult_t prepareCurrentDevice() override {
    return ok(static_cast<cudaError_t>(loadDeviceKernels()), "loading loom's kernels") ? loomSuccess
                                                                                      : loomUnhandledCudaError;
  }

  std::string currentBusId() override {
    using DeviceGet = int (*)(int*, int);
    using PrimaryState = int (*)(int, unsigned*, int*);
    static auto deviceGet = reinterpret_cast<DeviceGet>(driverEntry("cuDeviceGet", 2000));
    static auto primaryState = reinterpret_cast<PrimaryState>(driverEntry("cuDevicePrimaryCtxGetState", 7000));
    int device = -1, handle = 0, active = 0;
    unsigned flags = 0;
    char id[32] = {};
    if (cudaGetDevice(&device) != cudaSuccess) return cudaGetLastError(), "";
    // Not in use by this process yet: a CPU rank.
    if (deviceGet == nullptr || primaryState == nullptr || deviceGet(&handle, device) != 0 ||
        primaryState(handle, &flags, &active) != 0 || active == 0)
      return "";
    if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) return cudaGetLastError(), "";
    return id;
  }

  std::string currentUuid() override {
    int device = -1;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
      return cudaGetLastError(), "";
    const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    char text[40];
    std::snprintf(text, sizeof text, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return text;
  }

  std::string busIdOf(const void* ptr) override {
    int device = deviceOf(ptr);
    char id[32] = {};
    if (device < 0 || cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) return cudaGetLastError(), "";
    return id;
  }

  bool reaches(const std::string& from, const std::string& to) override {
    if (from.empty() || to.empty()) return false;
    if (from == to) return true;
    int a = -1, b = -1, can = 0;
    if (cudaDeviceGetByPCIBusId(&a, from.c_str()) != cudaSuccess || cudaDeviceGetByPCIBusId(&b, to.c_str()) != cudaSuccess)
      return cudaGetLastError(), false;  // the peer's GPU is not visible to this process
    return cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess && can == 1;
  }

  std::string lastErrorText() override { return tlsLastError; }
};

}  // namespace

DeviceApi* cudaDeviceApi(std::string* why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string("no GPU visible: cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return nullptr;
  }
  if (count == 0) {
    *why = "no GPU visible (cudaGetDeviceCount: 0)";
    return nullptr;
  }
  *why = "CUDA runtime " + std::to_string(CUDART_VERSION) + ", " + std::to_string(count) + " GPU(s) visible";
  static CudaApi api;
  return &api;
}

}  // namespace loom
