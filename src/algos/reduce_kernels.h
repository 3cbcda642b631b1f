// Element-wise reduction kernels for every (type, op), chosen once per process by CPU features and
// LOOM_SIMD.  The same template source (reduce_kernels.inc) is compiled twice: for the baseline x86-64
// ISA and with AVX2/F16C, so the vector code is whatever the compiler makes of one readable loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom.h"

namespace loom {

// dst[i] = a[i] op b[i] for count elements; dst may be a or b.  Integer arithmetic wraps (no UB);
// float16 and bfloat16 are computed in float32 and rounded to nearest even.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);
// dst[i] = (a[i] + b[i]) / divisor: the last step of loomAvg (integer division for integer types).
using ReduceDivFn = void (*)(void* dst, const void* a, const void* b, size_t count, int divisor);

constexpr int kNumBuiltinOps = 4;  // sum, prod, max, min; avg is sum plus a final divide

struct ReduceKernels {
  const char* isa;
  ReduceFn reduce[loomNumTypes][kNumBuiltinOps];
  ReduceDivFn sumDivide[loomNumTypes];
};

const ReduceKernels& reduceKernels();
// Kernels of one ISA ("generic" or "avx2"); nullptr when the CPU lacks it.  For tests and benchmarks.
const ReduceKernels* reduceKernelsFor(const char* isa);

size_t typeSize(loomDataType_t type);
const char* typeName(loomDataType_t type);
const char* opName(loomRedOp_t op);

// Scalar conversions shared by the kernels and the tests' reference.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
inline float bf16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace loom
