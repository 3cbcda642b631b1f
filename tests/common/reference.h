// Deterministic inputs and the expected results of reductions, for every type and op.  Shared by the
// test suites and the perf tools' -c check, so both judge results the same way.
//
// Floating-point results are compared with a tolerance: |got - want| <= 2 * nranks * eps(type) * scale,
// where eps is the unit roundoff of the type (float16 2^-11, bfloat16 2^-8, float32 2^-24, float64 2^-53)
// and scale = max(1, sum of |inputs|) for sum/avg, max(1, |want|) for prod: each of the n-1 steps of a
// ring may round its partial result once, and no partial result is larger than scale.  Integers and
// min/max compare exactly.  Integer sums and products wrap, as loom's kernels do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom.h"

namespace loom::testing {

// Value of element i of `rank`'s input, already representable in `type`, as a double (integers exact).
double inputValue(loomDataType_t type, loomRedOp_t op, int rank, size_t i);
// Writes `count` elements of rank's input into buf.
void fillInput(loomDataType_t type, loomRedOp_t op, int rank, size_t count, void* buf);
// Checks got[0..count) against the reduction over nranks ranks of input elements
// [firstIndex, firstIndex + count).  Returns the number of elements that differ beyond the tolerance;
// the first one is described in *firstMismatch (if not null).
size_t countWrongReduced(loomDataType_t type, loomRedOp_t op, int nranks, size_t firstIndex, size_t count,
                         const void* got, std::string* firstMismatch);
inline size_t countWrong(loomDataType_t type, loomRedOp_t op, int nranks, size_t count, const void* got,
                         std::string* firstMismatch) {
  return countWrongReduced(type, op, nranks, 0, count, got, firstMismatch);
}
// Checks got[0..count) against srcRank's input elements [firstIndex, firstIndex + count), bit for bit.
size_t countWrongCopied(loomDataType_t type, loomRedOp_t op, int srcRank, size_t firstIndex, size_t count,
                        const void* got, std::string* firstMismatch);

// The counts every correctness matrix runs: empty, one element, odd sizes below a slot, and one far
// above it (1<<20 + 3 at 2 and 3 ranks: every pipelined path, many FIFO wrap-arounds, a ragged last
// slice).  At 4 ranks the large one is 1<<19 + 3, at 8 or more 1<<18 + 3: still several 256 KB slots
// per rank and per block, while the 4- and 8-process cases (oversubscribing a 2-core machine) spent most
// of CI's test time generating and checking the larger inputs (8 ranks x 8M elements per reducescatter).
std::vector<size_t> matrixCounts(int nranks);

// Reads element i of buf as a double.
double readElement(loomDataType_t type, const void* buf, size_t i);
// Stores v (converted with rounding) as element i of buf.
void writeElement(loomDataType_t type, void* buf, size_t i, double v);

}  // namespace loom::testing
