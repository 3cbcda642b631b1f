// Shared pieces of the *_perf tools' descriptions: nccl-tests' bus-bandwidth factors and the reference
// checks from tests/common/reference.h.
#pragma once

#include <cstring>

#include "base/datatypes.h"
#include "perf/perf_harness.h"
#include "tests/common/reference.h"

namespace loom::perf {

inline double factorAllToAll(int n) { return static_cast<double>(n - 1) / n; }  // allgather, reducescatter
inline double factorOne(int) { return 1.0; }                                    // broadcast, reduce

// Every rank's input is the reference input of its rank (the root's, for broadcast).
inline void fillOwnInput(const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int rank, int) {
  loom::testing::fillInput(t, op, rank, b.count, b.send);
}

}  // namespace loom::perf
