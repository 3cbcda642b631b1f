// Sizes and names of loom's data types and reduction ops (header-only: the perf tools and test
// references use them without linking loom's internals).
#pragma once

#include <cstddef>

#include "loom.h"

namespace loom {

inline size_t typeSize(loomDataType_t type) {
  switch (type) {
    case loomInt8: case loomUint8: return 1;
    case loomFloat16: case loomBfloat16: return 2;
    case loomInt32: case loomUint32: case loomFloat32: return 4;
    case loomInt64: case loomUint64: case loomFloat64: return 8;
    default: return 0;
  }
}

// nccl-tests' spelling, so perf output reads the same.
inline const char* typeName(loomDataType_t type) {
  static const char* const names[] = {"int8", "uint8", "int32", "uint32", "int64",
                                      "uint64", "half", "float", "double", "bfloat16"};
  return (type >= 0 && type < loomNumTypes) ? names[type] : "?";
}

inline const char* opName(loomRedOp_t op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return (op >= 0 && op < loomNumOps) ? names[op] : "?";
}

}  // namespace loom
