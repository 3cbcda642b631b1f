#include "kernels/reduce_kernels.h"

#include <cstring>

#include "base/log.h"
#include "base/params.h"

namespace loom {

namespace generic {
const ReduceKernels& table();
}
namespace avx2 {
const ReduceKernels& table();
}

namespace {
bool cpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
}
}  // namespace

const ReduceKernels* reduceKernelsFor(const char* isa) {
  if (std::strcmp(isa, "generic") == 0) return &generic::table();
  if (std::strcmp(isa, "avx2") == 0) return cpuHasAvx2() ? &avx2::table() : nullptr;
  return nullptr;
}

const ReduceKernels& reduceKernels() {
  static const ReduceKernels* chosen = [] {
    const std::string& want = params().SIMD;
    const ReduceKernels* k = nullptr;
    if (want == "generic") k = reduceKernelsFor("generic");
    else if (want == "avx2" || want == "auto") k = reduceKernelsFor("avx2");
    if (k == nullptr) {
      if (want == "avx2") LOOM_WARN(kEnv, "LOOM_SIMD=avx2 but this CPU lacks AVX2/F16C/FMA; using generic kernels");
      else if (want != "auto" && want != "generic") LOOM_WARN(kEnv, "LOOM_SIMD=%s unknown; using auto", want.c_str());
      k = reduceKernelsFor(cpuHasAvx2() ? "avx2" : "generic");
    }
    LOOM_INFO(kInit, "reduction kernels: %s", k->isa);
    return k;
  }();
  return *chosen;
}

}  // namespace loom
