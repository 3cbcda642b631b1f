// Baseline x86-64 (SSE2) build of the kernels.
#define LOOM_KERNEL_NS generic
#include "kernels/reduce_kernels.inc"

namespace loom::generic {
const ReduceKernels& table() {
  static const ReduceKernels k = makeTable("generic");
  return k;
}
}  // namespace loom::generic
