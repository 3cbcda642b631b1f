#include "perf/perf_device.h"

#include "loom_build_config.h"

#if LOOM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace loom::perf {

#if LOOM_HAVE_CUDA

bool deviceAvailable(int localRank, std::string* why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    *why = e != cudaSuccess ? std::string("no GPU visible: ") + cudaGetErrorString(e) : "no GPU visible";
    return false;
  }
  e = cudaSetDevice(localRank % count);
  if (e != cudaSuccess) *why = std::string("cudaSetDevice: ") + cudaGetErrorString(e);
  return e == cudaSuccess;
}

void* deviceAlloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess || cudaMemset(p, 0, bytes) != cudaSuccess) return nullptr;
  return p;
}
void deviceFree(void* ptr) { cudaFree(ptr); }
bool copyToDevice(void* dst, const void* src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}
bool copyToHost(void* dst, const void* src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}
void* streamCreate() {
  cudaStream_t s = nullptr;
  return cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess ? s : nullptr;
}
bool streamSynchronize(void* stream) { return cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) == cudaSuccess; }
void streamDestroy(void* stream) { cudaStreamDestroy(static_cast<cudaStream_t>(stream)); }

#else

bool deviceAvailable(int, std::string* why) {
  *why = "this build has no CUDA";
  return false;
}
void* deviceAlloc(size_t) { return nullptr; }
void deviceFree(void*) {}
bool copyToDevice(void*, const void*, size_t) { return false; }
bool copyToHost(void*, const void*, size_t) { return false; }
void* streamCreate() { return nullptr; }
bool streamSynchronize(void*) { return false; }
void streamDestroy(void*) {}

#endif

}  // namespace loom::perf
