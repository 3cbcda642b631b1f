// A byte count given on a command line: a number with an optional K, M or G (powers of 1024) and an
// optional B ("64K", "1.5M", "256MB").  Header-only, for the tools that link nothing of loom's as well
// (copy_ceiling, tests/gpu/nccl_bench).
#pragma once

#include <cstddef>
#include <cstdlib>

namespace loom::perf {

// False for anything else (no number, a negative one, other trailing characters).
inline bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  double mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1 << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1 << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1 << 30, ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

}  // namespace loom::perf
