#include "algos/reduce_kernels.h"

#include <cmath>
#include <cstring>

#include "core/log.h"
#include "core/params.h"

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

size_t typeSize(loomDataType_t type) {
  switch (type) {
    case loomInt8: case loomUint8: return 1;
    case loomFloat16: case loomBfloat16: return 2;
    case loomInt32: case loomUint32: case loomFloat32: return 4;
    case loomInt64: case loomUint64: case loomFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(loomDataType_t type) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
  return (type >= 0 && type < loomNumTypes) ? names[type] : "?";
}

const char* opName(loomRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return (op >= 0 && op < loomNumOps) ? names[op] : "?";
}

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (absu < 0x38800000u) {  // result is subnormal or zero: let the FPU round (x * 2^24 is exact integer math)
    float scaled = std::fabs(f) * 16777216.0f;  // 2^24: half subnormal step is 2^-24
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absu & 0x7fffffu;
  uint32_t exp = (absu >> 23) - 127 + 15;
  uint32_t half = exp << 10 | mant >> 13;
  uint32_t rest = mant & 0x1fffu;  // round to nearest even on the 13 dropped bits
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

}  // namespace loom
