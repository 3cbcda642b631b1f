// Element-wise reduction kernels for every (type, op) and the copy used between ranks, chosen once per process by CPU features and
// LOOM_SIMD.  The same template source (reduce_kernels.inc) is compiled twice: for the baseline x86-64
// ISA and with AVX2/F16C, so the vector code is whatever the compiler makes of one readable loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/float_convert.h"
#include "base/datatypes.h"
#include "loom.h"

namespace loom {

// dst[i] = a[i] op b[i] for count elements; dst may be a or b.  Integer arithmetic wraps (no UB);
// float16 and bfloat16 are computed in float32 and rounded to nearest even.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);
// dst[i] = (a[i] + b[i]) / divisor: the last step of loomAvg (integer division for integer types).
using ReduceDivFn = void (*)(void* dst, const void* a, const void* b, size_t count, int divisor);

constexpr int kNumBuiltinOps = 4;  // sum, prod, max, min; avg is sum plus a final divide

// dst <- src, n bytes (not overlapping).
using CopyFn = void (*)(void* dst, const void* src, size_t n);

// dst[i] = src[i] * scalar, where scalar points at one element of the type (PreMulSum's first step).
using ScaleFn = void (*)(void* dst, const void* src, size_t count, const void* scalar);

struct ReduceKernels {
  const char* isa;
  CopyFn copy;
  CopyFn copyStreaming;  // the same, bypassing the cache on the write side: for large outputs only
  ScaleFn scale[loomNumTypes];
  ReduceFn reduce[loomNumTypes][kNumBuiltinOps];
  ReduceDivFn sumDivide[loomNumTypes];
};

const ReduceKernels& reduceKernels();
// Kernels of one ISA ("generic" or "avx2"); nullptr when the CPU lacks it.  For tests and benchmarks.
const ReduceKernels* reduceKernelsFor(const char* isa);

}  // namespace loom
