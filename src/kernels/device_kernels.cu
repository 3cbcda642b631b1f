// Reduction, scale and copy kernels for device memory: one grid-stride loop per (type, op), the element
// loaded into its compute type (float for float16 and bfloat16), combined, rounded back.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/device_kernels.h"

namespace loom {

namespace {

// How a storage type is loaded into and stored from its compute type.
template <typename T> struct Elem {
  using Compute = T;
  __device__ static T load(T v) { return v; }
  __device__ static T store(T v) { return v; }
};
template <> struct Elem<__half> {
  using Compute = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct Elem<__nv_bfloat16> {
  using Compute = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

// Integer sums and products wrap: computed in the unsigned type of the same width.
template <typename C, bool = std::is_integral<C>::value> struct WideOf { using type = C; };
template <typename C> struct WideOf<C, true> { using type = typename std::make_unsigned<C>::type; };

struct OpSum {
  template <typename C> __device__ static C apply(C a, C b) {
    using W = typename WideOf<C>::type;
    return static_cast<C>(static_cast<W>(a) + static_cast<W>(b));
  }
};
struct OpProd {
  template <typename C> __device__ static C apply(C a, C b) {
    using W = typename WideOf<C>::type;
    return static_cast<C>(static_cast<W>(a) * static_cast<W>(b));
  }
};
struct OpMax {
  template <typename C> __device__ static C apply(C a, C b) { return a > b ? a : b; }
};
struct OpMin {
  template <typename C> __device__ static C apply(C a, C b) { return a < b ? a : b; }
};

template <typename T, typename Op>
__global__ void reduceKernel(T* dst, const T* a, const T* b, size_t n) {
  using E = Elem<T>;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = E::store(Op::apply(E::load(a[i]), E::load(b[i])));
}

template <typename T>
__global__ void sumDivideKernel(T* dst, const T* a, const T* b, size_t n, int divisor) {
  using E = Elem<T>;
  using C = typename E::Compute;
  const C div = static_cast<C>(divisor);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = E::store(static_cast<C>(OpSum::apply(E::load(a[i]), E::load(b[i])) / div));
}

__global__ void copy16Kernel(uint4* dst, const uint4* src, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

__global__ void copy1Kernel(unsigned char* dst, const unsigned char* src, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

constexpr unsigned kThreads = 512;
// Enough blocks to fill a large GPU several times over; the loops stride over the rest.
unsigned blocksFor(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

template <typename T>
int reduceTyped(void* dst, const void* a, const void* b, size_t n, loomRedOp_t op, int divisor, cudaStream_t s) {
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  const unsigned g = blocksFor(n);
  switch (op) {
    case loomSum: reduceKernel<T, OpSum><<<g, kThreads, 0, s>>>(d, x, y, n); break;
    case loomProd: reduceKernel<T, OpProd><<<g, kThreads, 0, s>>>(d, x, y, n); break;
    case loomMax: reduceKernel<T, OpMax><<<g, kThreads, 0, s>>>(d, x, y, n); break;
    case loomMin: reduceKernel<T, OpMin><<<g, kThreads, 0, s>>>(d, x, y, n); break;
    case loomAvg: sumDivideKernel<T><<<g, kThreads, 0, s>>>(d, x, y, n, divisor); break;
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

// Calls f.template operator()<T>() with the storage type of `type`.
template <typename F>
int withType(loomDataType_t type, F f) {
  switch (type) {
    case loomInt8: return f(int8_t{});
    case loomUint8: return f(uint8_t{});
    case loomInt32: return f(int32_t{});
    case loomUint32: return f(uint32_t{});
    case loomInt64: return f(int64_t{});
    case loomUint64: return f(uint64_t{});
    case loomFloat16: return f(__half{});
    case loomFloat32: return f(float{});
    case loomFloat64: return f(double{});
    case loomBfloat16: return f(__nv_bfloat16{});
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

// cudaFuncGetAttributes loads a kernel that is not loaded yet (CUDA's lazy loading).
template <typename K>
cudaError_t load(K kernel) {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, kernel);
}

template <typename T>
int loadTyped() {
  for (cudaError_t e : {load(reduceKernel<T, OpSum>), load(reduceKernel<T, OpProd>), load(reduceKernel<T, OpMax>),
                        load(reduceKernel<T, OpMin>), load(sumDivideKernel<T>)})
    if (e != cudaSuccess) return static_cast<int>(e);
  return 0;
}

}  // namespace

int loadDeviceKernels() {
  for (int t = 0; t < loomNumTypes; ++t) {
    int e = withType(static_cast<loomDataType_t>(t), [](auto tag) { return loadTyped<decltype(tag)>(); });
    if (e != 0) return e;
  }
  for (cudaError_t e : {load(copy16Kernel), load(copy1Kernel)})
    if (e != cudaSuccess) return static_cast<int>(e);
  return 0;
}

int launchReduceKernel(void* dst, const void* a, const void* b, size_t count, loomDataType_t type, loomRedOp_t op,
                       int divisor, void* stream) {
  if (count == 0) return 0;
  return withType(type, [&](auto tag) {
    return reduceTyped<decltype(tag)>(dst, a, b, count, op, divisor, static_cast<cudaStream_t>(stream));
  });
}


int launchCopyKernel(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const bool aligned = (reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % 16 == 0;
  size_t wide = aligned ? bytes / 16 : 0;
  if (wide > 0) copy16Kernel<<<blocksFor(wide), kThreads, 0, s>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src), wide);
  size_t rest = bytes - wide * 16;
  if (rest > 0)
    copy1Kernel<<<blocksFor(rest), kThreads, 0, s>>>(static_cast<unsigned char*>(dst) + wide * 16,
                                                     static_cast<const unsigned char*>(src) + wide * 16, rest);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace loom
