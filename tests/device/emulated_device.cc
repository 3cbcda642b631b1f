#include "tests/device/emulated_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/reduce_kernels.h"
#include "base/datatypes.h"

namespace loom::testing {

namespace {
size_t pageRound(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}
}  // namespace

EmulatedDevice::~EmulatedDevice() {
  std::set<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams = streams_;
  }
  for (Stream* s : streams) streamDestroy(s);
  for (auto& [base, a] : allocations_) {
    munmap(reinterpret_cast<void*>(base), a.bytes);
    munmap(a.rw, a.bytes);
    if (a.fd >= 0) close(a.fd);
  }
}

// Maps fd twice (the PROT_NONE device view it returns, and the emulator's readable one) and records it.
void* EmulatedDevice::mapView(int fd, size_t size, int ownFd) {
  void* user = mmap(nullptr, size, PROT_NONE, MAP_SHARED, fd, 0);
  void* rw = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (user == MAP_FAILED || rw == MAP_FAILED) std::abort();
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_[reinterpret_cast<uintptr_t>(user)] = Block{size, static_cast<char*>(rw), ownFd, ++serial_};
  return user;
}

void* EmulatedDevice::deviceAlloc(size_t bytes) {
  const size_t size = pageRound(bytes);
  int fd = memfd_create("loom-emulated-device", 0);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) std::abort();
  return mapView(fd, size, fd);  // the fd stays open: peers open it for IPC
}

void EmulatedDevice::deviceWideWait() {
  if (hostCallsRunning_.load() > 0) ++deviceWideWaits_;
}

void EmulatedDevice::deviceFree(void* ptr) {
  deviceWideWait();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations_.end()) return;
  munmap(ptr, it->second.bytes);
  munmap(it->second.rw, it->second.bytes);
  if (it->second.fd >= 0) close(it->second.fd);
  allocations_.erase(it);
}

const EmulatedDevice::Block* EmulatedDevice::find(const void* ptr, uintptr_t* base) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return nullptr;
  --it;
  if (p >= it->first + it->second.bytes) return nullptr;
  *base = it->first;
  return &it->second;
}

void* EmulatedDevice::view(const void* ptr) {
  uintptr_t base = 0;
  const Block* a = find(ptr, &base);
  if (a == nullptr) return const_cast<void*>(ptr);
  return a->rw + (reinterpret_cast<uintptr_t>(ptr) - base);
}

bool EmulatedDevice::isDeviceMemory(const void* ptr) {
  uintptr_t base = 0;
  return ptr != nullptr && find(ptr, &base) != nullptr;
}

void* EmulatedDevice::streamCreate() {
  auto* s = new Stream;
  s->thread = std::thread([this, s] { streamLoop(s); });
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.insert(s);
  return s;
}

void EmulatedDevice::streamLoop(Stream* s) {
  std::unique_lock<std::mutex> lock(s->mutex);
  for (;;) {
    s->cv.wait(lock, [s] { return s->stop || !s->work.empty(); });
    if (s->work.empty()) return;  // stop, and nothing left
    std::function<void()> work = std::move(s->work.front());
    s->work.pop_front();
    s->running = true;
    lock.unlock();
    work();
    lock.lock();
    s->running = false;
    s->cv.notify_all();
  }
}

EmulatedDevice::Stream* EmulatedDevice::streamOf(void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto* s = static_cast<Stream*>(handle);
  return streams_.count(s) ? s : nullptr;
}

bool EmulatedDevice::isStream(void* handle) { return streamOf(handle) != nullptr; }

void EmulatedDevice::launch(void* stream, std::function<void()> kernel) {
  Stream* s = streamOf(stream);
  if (s == nullptr) std::abort();
  std::lock_guard<std::mutex> lock(s->mutex);
  s->work.push_back(std::move(kernel));
  s->cv.notify_all();
}

void EmulatedDevice::streamSynchronize(void* stream) {
  Stream* s = streamOf(stream);
  if (s == nullptr) return;
  std::unique_lock<std::mutex> lock(s->mutex);
  s->cv.wait(lock, [s] { return s->work.empty() && !s->running; });
}

void EmulatedDevice::streamDestroy(void* stream) {
  Stream* s = streamOf(stream);
  if (s == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->stop = true;
    s->cv.notify_all();
  }
  s->thread.join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.erase(s);
  }
  delete s;
}

loomResult_t EmulatedDevice::hostAlloc(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes);
  if (*ptr == nullptr) {
    lastError_ = "out of host memory";
    return loomSystemError;
  }
  ++pinnedLive_;
  return loomSuccess;
}

void EmulatedDevice::hostFree(void* ptr) {
  if (ptr == nullptr) return;
  deviceWideWait();
  std::free(ptr);
  --pinnedLive_;
}

loomResult_t EmulatedDevice::copyStart(void* dst, const void* src, size_t bytes) {
  std::memcpy(view(dst), view(src), bytes);
  return loomSuccess;
}

loomResult_t EmulatedDevice::copyDone(bool* done) {
  *done = true;
  return loomSuccess;
}

loomResult_t EmulatedDevice::markerRecord(void* stream, void** marker) {
  auto shared = std::make_shared<Marker>();
  if (streamOf(stream) == nullptr) {
    lastError_ = "markerRecord: not a stream";
    return loomUnhandledCudaError;
  }
  launch(stream, [shared] { shared->ready.store(true); });
  *marker = new std::shared_ptr<Marker>(shared);
  return loomSuccess;
}

loomResult_t EmulatedDevice::markerReady(void* marker, bool* ready) {
  *ready = (*static_cast<std::shared_ptr<Marker>*>(marker))->ready.load();
  return loomSuccess;
}

void EmulatedDevice::markerFree(void* marker) { delete static_cast<std::shared_ptr<Marker>*>(marker); }

loomResult_t EmulatedDevice::enqueueHostCall(void* stream, void (*fn)(void*), void* arg) {
  if (streamOf(stream) == nullptr) {
    lastError_ = "enqueueHostCall: not a stream";
    return loomUnhandledCudaError;
  }
  launch(stream, [this, fn, arg] {
    ++hostCallsRunning_;
    fn(arg);
    --hostCallsRunning_;
  });
  return loomSuccess;
}

namespace {
struct EmulatedIpc {  // what an emulated IPC handle holds: unique per allocation, as CUDA's are
  int32_t pid, fd;
  uint64_t bytes, serial;
};
}  // namespace

loomResult_t EmulatedDevice::ipcExport(const void* ptr, IpcHandle* handle) {
  uintptr_t base = 0;
  const Block* a = find(ptr, &base);
  if (a == nullptr || a->fd < 0 || refuseIpc_) {
    lastError_ = refuseIpc_ ? "IPC refused (as asked by the test)" : "ipcExport: not memory of this process's device";
    return loomUnhandledCudaError;
  }
  EmulatedIpc h{static_cast<int32_t>(getpid()), a->fd, a->bytes, a->serial};
  std::memset(handle->bytes, 0, sizeof handle->bytes);
  std::memcpy(handle->bytes, &h, sizeof h);
  handle->offset = reinterpret_cast<uintptr_t>(ptr) - base;
  return loomSuccess;
}

loomResult_t EmulatedDevice::allocationOf(const void* ptr, Allocation* out) {
  uintptr_t base = 0;
  const Block* a = find(ptr, &base);
  if (a == nullptr || a->fd < 0) {
    lastError_ = "allocationOf: not memory of this process's device";
    return loomUnhandledCudaError;
  }
  *out = DeviceApi::Allocation{base, a->bytes, a->serial};
  return loomSuccess;
}

loomResult_t EmulatedDevice::dmabufOf(const DeviceApi::Allocation& range, int* fd, uint64_t* offset) {
  uintptr_t base = 0;
  const Block* a = find(reinterpret_cast<const void*>(range.base), &base);
  if (a == nullptr || a->fd < 0 || a->serial != range.id || refuseDmabuf_) {
    lastError_ = refuseDmabuf_ ? "dma-buf export refused (as asked by the test)" : "dmabufOf: no such allocation";
    return loomUnhandledCudaError;
  }
  *fd = dup(a->fd);
  if (*fd < 0) {
    lastError_ = std::string("dmabufOf: dup: ") + std::strerror(errno);
    return loomUnhandledCudaError;
  }
  dmabufExports_.fetch_add(1);
  *offset = 0;
  return loomSuccess;
}

loomResult_t EmulatedDevice::ipcOpen(const IpcHandle& handle, const void*, void** base) {
  EmulatedIpc h;
  std::memcpy(&h, handle.bytes, sizeof h);
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) {
    lastError_ = "ipcOpen: " + path + ": " + std::strerror(errno);
    return loomUnhandledCudaError;
  }
  *base = mapView(fd, h.bytes, -1);
  close(fd);
  ++ipcOpened_;
  return loomSuccess;
}

void EmulatedDevice::ipcClose(void* base) { deviceFree(base); }

loomResult_t EmulatedDevice::reduceStart(void* dst, const void* a, const void* b, size_t count, loomDataType_t type,
                                         loomRedOp_t op, int divisor) {
  if (!kernelsLoaded_.exchange(true)) deviceWideWait();  // CUDA loads a kernel at its first launch
  const ReduceKernels& k = reduceKernels();
  if (op == loomAvg) k.sumDivide[type](view(dst), view(a), view(b), count, divisor);
  else k.reduce[type][op](view(dst), view(a), view(b), count);
  return loomSuccess;
}

}  // namespace loom::testing
