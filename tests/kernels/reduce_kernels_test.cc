#include "kernels/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tests/common/reference.h"

namespace loom {
namespace {

using testing::readElement;
using testing::writeElement;

TEST(ReduceKernels, HalfConversionRoundTripsEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToHalf(f), h) << "half 0x" << std::hex << h;
  }
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00) << "rounds to infinity";
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 4096), 0x3c00) << "ties to even";
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)) << "smallest subnormal";
}

TEST(ReduceKernels, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(floatToBf16(3.140625f)), 3.140625f);
  float tie;
  uint32_t u = 0x3f808000u;  // exactly halfway between 0x3f80 and 0x3f81
  std::memcpy(&tie, &u, 4);
  EXPECT_EQ(floatToBf16(tie), 0x3f80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
}

// Every (ISA, type, op) against a scalar computation in double, on lengths that exercise vector bodies
// and scalar tails, including aliasing dst == a.
TEST(ReduceKernels, EveryIsaTypeAndOpMatchesScalar) {
  for (const char* isa : {"generic", "avx2"}) {
    const ReduceKernels* k = reduceKernelsFor(isa);
    if (k == nullptr) {
      std::printf("(%s kernels not available on this CPU: skipped)\n", isa);
      continue;
    }
    for (int t = 0; t < loomNumTypes; ++t) {
      auto type = static_cast<loomDataType_t>(t);
      for (int o = 0; o <= kNumBuiltinOps; ++o) {  // the last one is sum-then-divide
        auto op = static_cast<loomRedOp_t>(o);
        for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{33}, size_t{1000}}) {
          std::vector<char> a(n * typeSize(type)), b(a.size()), d(a.size());
          testing::fillInput(type, op == loomAvg ? loomSum : op, 0, n, a.data());
          testing::fillInput(type, op == loomAvg ? loomSum : op, 1, n, b.data());
          std::vector<char> a0 = a;
          for (bool alias : {false, true}) {
            char* dst = alias ? a.data() : d.data();
            if (alias) a = a0;
            if (op == loomAvg) k->sumDivide[t](dst, a0.data(), b.data(), n, 3);
            else k->reduce[t][o](dst, alias ? dst : a0.data(), b.data(), n);
            for (size_t i = 0; i < n; ++i) {
              double x = readElement(type, a0.data(), i), y = readElement(type, b.data(), i), want;
              // Expected value computed in the element type's own arithmetic.
              std::vector<char> w(typeSize(type));
              switch (op) {
                case loomSum: want = x + y; break;
                case loomProd: want = x * y; break;
                case loomMax: want = x > y ? x : y; break;
                case loomMin: want = x < y ? x : y; break;
                default: want = (x + y) / 3; break;
              }
              // sum-then-divide computes in the kernel's type: float for float32/float16/bfloat16 (the sum
              // of two such values is exact in float; the division rounds once), truncating for integers.
              if (op == loomAvg && t <= loomUint64) want = std::trunc((x + y) / 3);
              if (op == loomAvg && (type == loomFloat32 || type == loomFloat16 || type == loomBfloat16))
                want = static_cast<float>(static_cast<float>(x + y) / 3.0f);
              writeElement(type, w.data(), 0, want);
              double wantRounded = readElement(type, w.data(), 0);
              ASSERT_EQ(readElement(type, dst, i), wantRounded)
                  << isa << " " << typeName(type) << " " << (op == loomAvg ? "sum/3" : opName(op)) << " n=" << n
                  << " i=" << i << (alias ? " aliased" : "");
            }
          }
        }
      }
    }
  }
}

TEST(ReduceKernels, IntegerOverflowWraps) {
  const ReduceKernels& k = reduceKernels();
  int8_t a[2] = {127, -128}, b[2] = {1, -1}, d[2];
  k.reduce[loomInt8][loomSum](d, a, b, 2);
  EXPECT_EQ(d[0], -128);
  EXPECT_EQ(d[1], 127);
  int32_t x = INT32_MAX, y = 2, z;
  k.reduce[loomInt32][loomProd](&z, &x, &y, 1);
  EXPECT_EQ(z, -2);
}

}  // namespace
}  // namespace loom
