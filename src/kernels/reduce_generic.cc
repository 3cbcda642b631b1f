// Baseline x86-64 (SSE2) build of the kernels.
#define LOOM_KERNEL_NS generic
#include "kernels/reduce_kernels.inc"
