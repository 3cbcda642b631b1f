#include "tests/common/reference.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <list>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/float_convert.h"
#include "base/datatypes.h"

namespace loom::testing {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Per type: the stored representation, whether it is a float type, and exact conversions to/from double.
template <loomDataType_t T> struct Traits;
#define LOOM_INT_TRAITS(E, S_)                                           \
  template <> struct Traits<E> {                                         \
    using S = S_;                                                        \
    static constexpr bool kFloat = false;                                \
    static constexpr bool kSigned = std::is_signed_v<S_>;                \
    static double load(S v) { return static_cast<double>(v); }           \
    static S store(double v) { return static_cast<S>(v); }               \
  };
LOOM_INT_TRAITS(loomInt8, int8_t)
LOOM_INT_TRAITS(loomUint8, uint8_t)
LOOM_INT_TRAITS(loomInt32, int32_t)
LOOM_INT_TRAITS(loomUint32, uint32_t)
LOOM_INT_TRAITS(loomInt64, int64_t)
LOOM_INT_TRAITS(loomUint64, uint64_t)
#undef LOOM_INT_TRAITS
template <> struct Traits<loomFloat32> {
  using S = float;
  static constexpr bool kFloat = true;
  static constexpr double kEps = 0x1p-24;
  static double load(S v) { return v; }
  static S store(double v) { return static_cast<float>(v); }
};
template <> struct Traits<loomFloat64> {
  using S = double;
  static constexpr bool kFloat = true;
  static constexpr double kEps = 0x1p-53;
  static double load(S v) { return v; }
  static S store(double v) { return v; }
};
template <> struct Traits<loomFloat16> {
  using S = uint16_t;
  static constexpr bool kFloat = true;
  static constexpr double kEps = 0x1p-11;
  static double load(S v) { return halfToFloat(v); }
  static S store(double v) { return floatToHalf(static_cast<float>(v)); }
};
template <> struct Traits<loomBfloat16> {
  using S = uint16_t;
  static constexpr bool kFloat = true;
  static constexpr double kEps = 0x1p-8;
  static double load(S v) { return bf16ToFloat(v); }
  static S store(double v) { return floatToBf16(static_cast<float>(v)); }
};

// Element i of rank's input, in the type's own representation.
template <loomDataType_t T>
typename Traits<T>::S input(loomRedOp_t op, int rank, size_t i) {
  uint64_t h = mix((static_cast<uint64_t>(rank) << 40) ^ i ^ (static_cast<uint64_t>(T) << 56));
  if constexpr (Traits<T>::kFloat) {
    // Products stay near 1 so that they neither overflow float16 nor vanish.
    double v = op == loomProd ? 0.5 + static_cast<double>(h % 1001) / 1000.0 : static_cast<double>(h % 2001) / 1000.0 - 1.0;
    return Traits<T>::store(v);
  } else {
    // Small values: sums and most products stay exact.
    return static_cast<typename Traits<T>::S>(static_cast<int>(h % 11) - (Traits<T>::kSigned ? 5 : 0));
  }
}

template <loomDataType_t T>
void describe(std::string* out, size_t i, typename Traits<T>::S have, double want) {
  if (out == nullptr) return;
  char msg[200];
  snprintf(msg, sizeof(msg), "element %zu: got %.9g, want %.9g", i, Traits<T>::load(have), want);
  *out = msg;
}

template <loomDataType_t T>
void fillT(loomRedOp_t op, int rank, size_t count, void* buf) {
  auto* p = static_cast<typename Traits<T>::S*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = input<T>(op, rank, i);
}

template <loomDataType_t T>
size_t copiedT(loomRedOp_t op, int srcRank, size_t first, size_t count, const void* got, std::string* msg) {
  auto* p = static_cast<const typename Traits<T>::S*>(got);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    auto want = input<T>(op, srcRank, first + i);
    if (std::memcmp(&p[i], &want, sizeof(want)) != 0 && wrong++ == 0)
      describe<T>(msg, first + i, p[i], Traits<T>::load(want));
  }
  return wrong;
}

template <loomDataType_t T>
size_t reducedT(loomRedOp_t op, int nranks, size_t first, size_t count, const void* got, std::string* msg) {
  using Tr = Traits<T>;
  using S = typename Tr::S;
  auto* p = static_cast<const S*>(got);
  size_t wrong = 0;
  for (size_t k = 0; k < count; ++k) {
    const size_t i = first + k;
    bool ok;
    double want;
    if constexpr (!Tr::kFloat) {
      // Integer arithmetic in the type's own width, wrapping like the kernels.
      using U = std::make_unsigned_t<S>;
      S acc = input<T>(op, 0, i);
      for (int r = 1; r < nranks; ++r) {
        S v = input<T>(op, r, i);
        switch (op) {
          case loomSum: case loomAvg: acc = static_cast<S>(static_cast<U>(acc) + static_cast<U>(v)); break;
          case loomProd: acc = static_cast<S>(static_cast<U>(acc) * static_cast<U>(v)); break;
          case loomMax: acc = acc > v ? acc : v; break;
          default: acc = acc < v ? acc : v; break;
        }
      }
      if (op == loomAvg) acc = static_cast<S>(acc / static_cast<S>(nranks));
      ok = p[k] == acc;
      want = Tr::load(acc);
    } else {
      double acc = Tr::load(input<T>(op, 0, i)), absSum = std::fabs(acc);
      for (int r = 1; r < nranks; ++r) {
        double v = Tr::load(input<T>(op, r, i));
        absSum += std::fabs(v);
        switch (op) {
          case loomSum: case loomAvg: acc += v; break;
          case loomProd: acc *= v; break;
          case loomMax: acc = acc > v ? acc : v; break;
          default: acc = acc < v ? acc : v; break;
        }
      }
      want = op == loomAvg ? acc / nranks : acc;
      double have = Tr::load(p[k]);
      if (op == loomMax || op == loomMin) {
        ok = have == want;
      } else {
        // Each of the n-1 steps may round its partial result once; none is larger than scale.
        double scale = (op == loomSum || op == loomAvg) ? absSum : std::fabs(acc);
        ok = std::fabs(have - want) <= 2.0 * nranks * Tr::kEps * std::fmax(scale, 1.0);
      }
    }
    if (!ok && wrong++ == 0) describe<T>(msg, i, p[k], want);
  }
  return wrong;
}

// Calls F<T>::run(args...) for the runtime type.
template <template <loomDataType_t> class F, typename... A>
auto dispatch(loomDataType_t type, A&&... args) {
  switch (type) {
    case loomInt8: return F<loomInt8>::run(args...);
    case loomUint8: return F<loomUint8>::run(args...);
    case loomInt32: return F<loomInt32>::run(args...);
    case loomUint32: return F<loomUint32>::run(args...);
    case loomInt64: return F<loomInt64>::run(args...);
    case loomUint64: return F<loomUint64>::run(args...);
    case loomFloat16: return F<loomFloat16>::run(args...);
    case loomFloat32: return F<loomFloat32>::run(args...);
    case loomFloat64: return F<loomFloat64>::run(args...);
    default: return F<loomBfloat16>::run(args...);
  }
}

template <loomDataType_t T> struct Fill {
  static int run(loomRedOp_t op, int rank, size_t count, void* buf) { return fillT<T>(op, rank, count, buf), 0; }
};
template <loomDataType_t T> struct Copied {
  static size_t run(loomRedOp_t op, int src, size_t first, size_t count, const void* got, std::string* msg) {
    return copiedT<T>(op, src, first, count, got, msg);
  }
};
template <loomDataType_t T> struct Reduced {
  static size_t run(loomRedOp_t op, int n, size_t first, size_t count, const void* got, std::string* msg) {
    return reducedT<T>(op, n, first, count, got, msg);
  }
};
template <loomDataType_t T> struct Value {
  static double run(loomRedOp_t op, int rank, size_t i) { return Traits<T>::load(input<T>(op, rank, i)); }
};
template <loomDataType_t T> struct Read {
  static double run(const void* buf, size_t i) { return Traits<T>::load(static_cast<const typename Traits<T>::S*>(buf)[i]); }
};
template <loomDataType_t T> struct Write {
  static int run(void* buf, size_t i, double v) {
    static_cast<typename Traits<T>::S*>(buf)[i] = Traits<T>::store(v);
    return 0;
  }
};

}  // namespace

double readElement(loomDataType_t type, const void* buf, size_t i) { return dispatch<Read>(type, buf, i); }
void writeElement(loomDataType_t type, void* buf, size_t i, double v) { dispatch<Write>(type, buf, i, v); }
double inputValue(loomDataType_t type, loomRedOp_t op, int rank, size_t i) { return dispatch<Value>(type, op, rank, i); }

namespace {

// The matrices fill and check large buffers over and over with the same arguments (both placements of a
// call; every op but prod shares its inputs), and generating inputs dominates their time.  Per thread, a
// few recent large inputs are kept (a repeat becomes a copy), and so are the last results that checked
// right: a result equal byte for byte to one verified for the same arguments is right too.
constexpr size_t kMemoMinBytes = 1 << 20;
constexpr size_t kMemoMaxBytes = 128 << 20;  // per cache, per thread

struct Memo {
  std::string key;
  std::vector<char> bytes;
};

struct MemoCache {
  std::list<Memo> entries;  // most recent first
  size_t total = 0;
  const Memo* find(const std::string& key) {
    for (auto it = entries.begin(); it != entries.end(); ++it)
      if (it->key == key) {
        entries.splice(entries.begin(), entries, it);
        return &entries.front();
      }
    return nullptr;
  }
  void put(const std::string& key, const void* data, size_t n) {
    if (n > kMemoMaxBytes) return;
    while (!entries.empty() && total + n > kMemoMaxBytes) {
      total -= entries.back().bytes.size();
      entries.pop_back();
    }
    const char* c = static_cast<const char*>(data);
    entries.push_front(Memo{key, std::vector<char>(c, c + n)});
    total += n;
  }
};

thread_local MemoCache tlsInputs, tlsVerified;

std::string memoKey(const char* what, std::initializer_list<uint64_t> parts) {
  std::string k(what);
  for (uint64_t p : parts) k += ":" + std::to_string(p);
  return k;
}

// Returns the count of wrong elements, checking with `full` unless a verified equal result is known.
template <typename Full>
size_t checkMemo(const std::string& key, const void* got, size_t bytes, Full full) {
  if (bytes < kMemoMinBytes) return full();
  if (const Memo* m = tlsVerified.find(key))
    if (std::memcmp(m->bytes.data(), got, bytes) == 0) return 0;
  size_t wrong = full();
  if (wrong == 0) tlsVerified.put(key, got, bytes);
  return wrong;
}

}  // namespace

void fillInput(loomDataType_t type, loomRedOp_t op, int rank, size_t count, void* buf) {
  const size_t bytes = count * typeSize(type);
  if (bytes < kMemoMinBytes) return static_cast<void>(dispatch<Fill>(type, op, rank, count, buf));
  const std::string key = memoKey("in", {static_cast<uint64_t>(type), op == loomProd, static_cast<uint64_t>(rank), count});
  if (const Memo* m = tlsInputs.find(key)) return static_cast<void>(std::memcpy(buf, m->bytes.data(), bytes));
  dispatch<Fill>(type, op, rank, count, buf);
  tlsInputs.put(key, buf, bytes);
}

size_t countWrongCopied(loomDataType_t type, loomRedOp_t op, int srcRank, size_t firstIndex, size_t count,
                        const void* got, std::string* firstMismatch) {
  const std::string key = memoKey("copied", {static_cast<uint64_t>(type), op == loomProd,
                                             static_cast<uint64_t>(srcRank), firstIndex, count});
  return checkMemo(key, got, count * typeSize(type), [&] {
    return dispatch<Copied>(type, op, srcRank, firstIndex, count, got, firstMismatch);
  });
}

size_t countWrongReduced(loomDataType_t type, loomRedOp_t op, int nranks, size_t firstIndex, size_t count,
                         const void* got, std::string* firstMismatch) {
  const std::string key = memoKey("reduced", {static_cast<uint64_t>(type), static_cast<uint64_t>(op),
                                              static_cast<uint64_t>(nranks), firstIndex, count});
  return checkMemo(key, got, count * typeSize(type), [&] {
    return dispatch<Reduced>(type, op, nranks, firstIndex, count, got, firstMismatch);
  });
}

std::vector<size_t> matrixCounts(int nranks) {
  const int shift = nranks >= 8 ? 18 : nranks >= 4 ? 19 : 20;
  return {0, 1, 7, 1023, (size_t{1} << shift) + 3};
}

}  // namespace loom::testing
