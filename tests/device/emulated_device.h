// An emulated GPU runtime behind loom's DeviceApi, for the device-path tests on machines without a GPU.
//
// - Device memory: each allocation is one memfd mapped twice.  The pointer the test (and loom) gets is
//   mapped PROT_NONE, as device memory is to the host: any host code that reads or writes it directly
//   dies with SIGSEGV, so a passing test shows loom only reaches device buffers through the runtime.  The
//   emulator itself copies and reduces through the second, readable mapping.
// - Streams: a thread each, running its work (kernels, markers, host calls) strictly in order.  A host
//   call blocks its stream until it returns, as cudaLaunchHostFunc does.
// - What hangs a real GPU is counted (deviceWideWaitsInHostCalls): a call that synchronises the whole
//   device (freeing pinned or device memory, the first launch of a kernel not loaded on the device by
//   prepareCurrentDevice) made while a stream is blocked in a host call waits for that host call, which
//   waits for loom: on a GPU it never returns.  Here it returns, and the count shows it.
// - Copies (copyStart) and reductions run at once on the calling thread.
// - IPC: a handle names the exporting process and its memfd; opening it maps the same memory here (through
//   /proc/PID/fd), again unreadable by the host.  All emulated devices are one GPU ("emulated0" unless
//   a test names its PCI bus id).
// - dma-buf: an allocation's memfd, duplicated: the emulated verbs device (tests/transport/
//   emulated_verbs.h) maps it to reach the memory, as an RDMA NIC reaches GPU memory (GPUDirect RDMA).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "device_runtime/device_api.h"

namespace loom::testing {

class EmulatedDevice final : public DeviceApi {
 public:
  ~EmulatedDevice() override;

  // Device memory: the PROT_NONE view; free with deviceFree.
  void* deviceAlloc(size_t bytes);
  void deviceFree(void* ptr) override;
  // What the emulated device sees at a device address (host memory passes through unchanged).
  void* view(const void* ptr);

  // Streams, and work on them ("kernels": host code that reads and writes device memory through view()).
  void* streamCreate();
  void streamDestroy(void* stream);  // waits for its work first
  void launch(void* stream, std::function<void()> kernel);
  void streamSynchronize(void* stream);

  int pinnedLive() const { return pinnedLive_.load(); }  // page-locked buffers not freed yet
  int ipcOpened() const { return ipcOpened_.load(); }    // peers' allocations mapped so far
  void refuseIpc(bool refuse) { refuseIpc_ = refuse; }  // as a runtime that cannot share this memory
  int dmabufExports() const { return dmabufExports_.load(); }  // dma-bufs handed out so far
  void refuseDmabuf(bool refuse) { refuseDmabuf_ = refuse; }   // as a driver without dma-buf export
  void setBusId(const std::string& id) { busId_ = id; }  // the PCI bus id the GPU reports
  int deviceWideWaitsInHostCalls() const { return deviceWideWaits_.load(); }  // each a hang on a GPU

  // DeviceApi
  const char* name() const override { return "emulated device"; }
  bool isDeviceMemory(const void* ptr) override;
  bool isStream(void* handle) override;
  loomResult_t hostAlloc(void** ptr, size_t bytes) override;
  loomResult_t deviceAlloc(void** ptr, size_t bytes, const void*) override {
    *ptr = deviceAlloc(bytes);
    return loomSuccess;
  }
  void hostFree(void* ptr) override;
  loomResult_t copyStart(void* dst, const void* src, size_t bytes) override;
  loomResult_t copyDone(bool* done) override;
  loomResult_t markerRecord(void* stream, void** marker) override;
  loomResult_t markerReady(void* marker, bool* ready) override;
  void markerFree(void* marker) override;
  loomResult_t enqueueHostCall(void* stream, void (*fn)(void*), void* arg) override;
  loomResult_t reduceStart(void* dst, const void* a, const void* b, size_t count, loomDataType_t type,
                           loomRedOp_t op, int divisor) override;
  loomResult_t ipcExport(const void* ptr, IpcHandle* handle) override;
  loomResult_t ipcOpen(const IpcHandle& handle, const void* near, void** base) override;
  void ipcClose(void* base) override;
  loomResult_t allocationOf(const void* ptr, Allocation* out) override;
  loomResult_t dmabufOf(const Allocation& a, int* fd, uint64_t* offset) override;
  std::string currentBusId() override { return busId_; }
  loomResult_t prepareCurrentDevice() override {
    kernelsLoaded_ = true;
    return loomSuccess;
  }
  std::string currentUuid() override { return "00000000-0000-0000-0000-00000000e0e0"; }
  std::string busIdOf(const void* ptr) override { return isDeviceMemory(ptr) ? busId_ : ""; }
  bool reaches(const std::string& from, const std::string& to) override { return !from.empty() && from == to; }
  std::string lastErrorText() override { return lastError_; }

 private:
  struct Block {
    size_t bytes;
    char* rw;  // the emulator's readable view
    int fd;    // the memfd (-1 for a peer's allocation mapped here)
    uint64_t serial;  // fds are reused; allocations are not
  };
  void* mapView(int fd, size_t bytes, int ownFd);
  struct Stream {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::function<void()>> work;
    bool running = false, stop = false;
    std::thread thread;
  };
  struct Marker {
    std::atomic<bool> ready{false};
  };
  const Block* find(const void* ptr, uintptr_t* base);
  void streamLoop(Stream* s);
  Stream* streamOf(void* handle);
  void deviceWideWait();  // a call that synchronises a real GPU's whole device

  std::mutex mutex_;
  std::map<uintptr_t, Block> allocations_;  // by device base address
  std::set<Stream*> streams_;
  std::atomic<int> pinnedLive_{0};
  std::atomic<int> ipcOpened_{0};
  uint64_t serial_ = 0;  // under mutex_
  std::atomic<bool> refuseIpc_{false};
  std::atomic<int> dmabufExports_{0};
  std::atomic<bool> refuseDmabuf_{false};
  std::atomic<int> hostCallsRunning_{0};
  std::atomic<int> deviceWideWaits_{0};
  std::atomic<bool> kernelsLoaded_{false};
  std::string busId_ = "emulated0";
  std::string lastError_;
};

}  // namespace loom::testing
