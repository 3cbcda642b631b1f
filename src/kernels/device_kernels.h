// The GPU twins of reduce_kernels.h (kernels/device_kernels.cu), callable from host C++ without CUDA
// headers: streams travel as void* (a cudaStream_t), results as the CUDA error number (0 = success).
#pragma once

#include <cstddef>

#include "loom.h"

namespace loom {

// dst[i] = a[i] op b[i] for every type and builtin op (sum, prod, max, min; loomAvg: (a + b) / divisor).
// Integers wrap, float16 and bfloat16 are computed in float32 and rounded to nearest even, as on the CPU
// (kernels/reduce_kernels.h).  dst may be a or b.
int launchReduceKernel(void* dst, const void* a, const void* b, size_t count, loomDataType_t type, loomRedOp_t op,
                       int divisor, void* stream);
// dst <- src, bytes (not overlapping), 16 bytes per thread where both are aligned.
int launchCopyKernel(void* dst, const void* src, size_t bytes, void* stream);
// Loads every kernel above on the current device now.  CUDA loads a kernel at its first launch, and
// loading synchronises the device; a first launch inside a call that the user's stream is waiting for
// would wait for itself (seen on an H200: the p2p allreduce's first reduce kernel never launched).
int loadDeviceKernels();

}  // namespace loom
