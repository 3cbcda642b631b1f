// AVX2 + F16C build of the kernels (this file is compiled with -mavx2 -mf16c -mfma; it is only called
// after the CPU was checked for those features).
#define LOOM_KERNEL_NS avx2
#include "kernels/reduce_kernels.inc"
