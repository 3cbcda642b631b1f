#include "tests/common/reference.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "algos/float_convert.h"
#include "core/datatypes.h"

namespace loom::testing {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool isFloat(loomDataType_t t) {
  return t == loomFloat16 || t == loomBfloat16 || t == loomFloat32 || t == loomFloat64;
}

double epsilon(loomDataType_t t) {
  switch (t) {
    case loomFloat16: return std::ldexp(1.0, -11);
    case loomBfloat16: return std::ldexp(1.0, -8);
    case loomFloat32: return std::ldexp(1.0, -24);
    case loomFloat64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

// Integer reference arithmetic in the type's own width, wrapping like the kernels.
template <typename T>
T wrapOp(T a, T b, loomRedOp_t op) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case loomSum: case loomAvg: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case loomProd: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case loomMax: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

template <typename T>
double intReference(loomDataType_t type, loomRedOp_t op, int nranks, size_t i) {
  T acc = static_cast<T>(inputValue(type, op, 0, i));
  for (int r = 1; r < nranks; ++r) acc = wrapOp<T>(acc, static_cast<T>(inputValue(type, op, r, i)), op);
  if (op == loomAvg) acc = static_cast<T>(acc / static_cast<T>(nranks));
  return static_cast<double>(acc);
}

// *scale bounds the magnitude of every partial result: each rounding is at most eps * scale.
double floatReference(loomDataType_t type, loomRedOp_t op, int nranks, size_t i, double* scale) {
  double acc = inputValue(type, op, 0, i);
  double absSum = std::fabs(acc);
  for (int r = 1; r < nranks; ++r) {
    double v = inputValue(type, op, r, i);
    absSum += std::fabs(v);
    switch (op) {
      case loomSum: case loomAvg: acc += v; break;
      case loomProd: acc *= v; break;
      case loomMax: acc = acc > v ? acc : v; break;
      default: acc = acc < v ? acc : v; break;
    }
  }
  *scale = (op == loomSum || op == loomAvg) ? absSum : std::fabs(acc);
  return op == loomAvg ? acc / nranks : acc;
}

double expected(loomDataType_t type, loomRedOp_t op, int nranks, size_t i, double* scale) {
  *scale = 0;
  switch (type) {
    case loomInt8: return intReference<int8_t>(type, op, nranks, i);
    case loomUint8: return intReference<uint8_t>(type, op, nranks, i);
    case loomInt32: return intReference<int32_t>(type, op, nranks, i);
    case loomUint32: return intReference<uint32_t>(type, op, nranks, i);
    case loomInt64: return intReference<int64_t>(type, op, nranks, i);
    case loomUint64: return intReference<uint64_t>(type, op, nranks, i);
    default: return floatReference(type, op, nranks, i, scale);
  }
}

}  // namespace

double readElement(loomDataType_t type, const void* buf, size_t i) {
  switch (type) {
    case loomInt8: return static_cast<const int8_t*>(buf)[i];
    case loomUint8: return static_cast<const uint8_t*>(buf)[i];
    case loomInt32: return static_cast<const int32_t*>(buf)[i];
    case loomUint32: return static_cast<const uint32_t*>(buf)[i];
    case loomInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case loomUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case loomFloat16: return halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case loomBfloat16: return bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case loomFloat32: return static_cast<const float*>(buf)[i];
    case loomFloat64: return static_cast<const double*>(buf)[i];
    default: return 0;
  }
}

void writeElement(loomDataType_t type, void* buf, size_t i, double v) {
  switch (type) {
    case loomInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case loomUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case loomInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case loomUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case loomInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case loomUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case loomFloat16: static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    case loomBfloat16: static_cast<uint16_t*>(buf)[i] = floatToBf16(static_cast<float>(v)); break;
    case loomFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case loomFloat64: static_cast<double*>(buf)[i] = v; break;
    default: break;
  }
}

double inputValue(loomDataType_t type, loomRedOp_t op, int rank, size_t i) {
  uint64_t h = mix((static_cast<uint64_t>(rank) << 40) ^ i ^ (static_cast<uint64_t>(type) << 56));
  double v;
  if (isFloat(type)) {
    // Products stay near 1 so that they neither overflow float16 nor vanish.
    v = op == loomProd ? 0.5 + static_cast<double>(h % 1001) / 1000.0 : static_cast<double>(h % 2001) / 1000.0 - 1.0;
  } else {
    bool isSigned = type == loomInt8 || type == loomInt32 || type == loomInt64;
    v = static_cast<double>(h % 11) - (isSigned ? 5 : 0);  // small: sums and most products stay exact
  }
  // Round through the type so the double is exactly the element that is sent.
  unsigned char tmp[8];
  writeElement(type, tmp, 0, v);
  return readElement(type, tmp, 0);
}

void fillInput(loomDataType_t type, loomRedOp_t op, int rank, size_t count, void* buf) {
  for (size_t i = 0; i < count; ++i) writeElement(type, buf, i, inputValue(type, op, rank, i));
}

namespace {
void describe(std::string* out, size_t i, double have, double want) {
  if (out == nullptr) return;
  char msg[200];
  snprintf(msg, sizeof(msg), "element %zu: got %.9g, want %.9g", i, have, want);
  *out = msg;
}
}  // namespace

size_t countWrongCopied(loomDataType_t type, loomRedOp_t op, int srcRank, size_t firstIndex, size_t count,
                        const void* got, std::string* firstMismatch) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = inputValue(type, op, srcRank, firstIndex + i), have = readElement(type, got, i);
    if (have != want && wrong++ == 0) describe(firstMismatch, firstIndex + i, have, want);
  }
  return wrong;
}

size_t countWrongReduced(loomDataType_t type, loomRedOp_t op, int nranks, size_t firstIndex, size_t count,
                         const void* got, std::string* firstMismatch) {
  size_t wrong = 0;
  const double eps = epsilon(type);
  for (size_t i = 0; i < count; ++i) {
    double scale = 0;
    double want = expected(type, op, nranks, firstIndex + i, &scale), have = readElement(type, got, i);
    bool ok;
    if (!isFloat(type) || op == loomMax || op == loomMin) {
      ok = have == want;
    } else {
      double tol = 2.0 * nranks * eps * std::fmax(scale, 1.0);
      ok = std::fabs(have - want) <= tol;
    }
    if (!ok && wrong++ == 0) describe(firstMismatch, firstIndex + i, have, want);
  }
  return wrong;
}

}  // namespace loom::testing
