#include "base/params.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace loom {

namespace {

const ParamSpec kSpecs[] = {
#define LOOM_PARAM_SPEC(name, type, def, range, help) {#name, ParamType::type, def, range, help},
    LOOM_PARAM_LIST(LOOM_PARAM_SPEC)
#undef LOOM_PARAM_SPEC
};
constexpr int kCount = sizeof(kSpecs) / sizeof(kSpecs[0]);

struct Loaded {
  Params values;
  std::string error;  // first malformed variable, empty when all parsed
};

void assign(int64_t* field, ParamType type, const char* name, const char* def, const char* range,
            std::string* error) {
  std::string why;
  const char* env = std::getenv((std::string("LOOM_") + name).c_str());
  parseParamValue(type, def, field, &why);  // defaults are well-formed and in range by construction (tested)
  if (env == nullptr || *env == '\0') return;
  int64_t v = 0;
  if (parseParamValue(type, env, &v, &why) && paramInRange(type, range, v, &why)) {
    *field = v;
  } else if (error->empty()) {
    *error = std::string("LOOM_") + name + "=" + env + ": " + why;
  }
}

void assign(std::string* field, ParamType, const char* name, const char* def, const char*, std::string*) {
  const char* env = std::getenv((std::string("LOOM_") + name).c_str());
  *field = (env != nullptr && *env != '\0') ? env : def;
}

Loaded* load() {
  auto* r = new Loaded();
#define LOOM_PARAM_LOAD(name, type, def, range, help) \
  assign(&r->values.name, ParamType::type, #name, def, range, &r->error);
  LOOM_PARAM_LIST(LOOM_PARAM_LOAD)
#undef LOOM_PARAM_LOAD
  return r;
}

Loaded*& current() {
  static Loaded* l = load();  // never freed: parameters are read during static destruction too
  return l;
}

const Loaded& loaded() { return *current(); }

}  // namespace

bool parseParamValue(ParamType type, const char* text, int64_t* out, std::string* why) {
  if (type == ParamType::String) return true;
  if (text == nullptr || *text == '\0') {
    *why = "empty value";
    return false;
  }
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (end == text || errno == ERANGE) {
    *why = "not a number";
    return false;
  }
  if (type == ParamType::Size && *end != '\0') {
    long long mult = 1;
    switch (*end) {
      case 'k': case 'K': mult = 1LL << 10; break;
      case 'm': case 'M': mult = 1LL << 20; break;
      case 'g': case 'G': mult = 1LL << 30; break;
      case 't': case 'T': mult = 1LL << 40; break;
      default: *why = "unknown size suffix (use K, M, G or T)"; return false;
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
    if (v < 0 || v > (INT64_MAX / mult)) {
      *why = "size out of range";
      return false;
    }
    v *= mult;
  }
  if (*end != '\0') {
    *why = "trailing characters after the number";
    return false;
  }
  if (type == ParamType::Size && v < 0) {
    *why = "a size cannot be negative";
    return false;
  }
  *out = v;
  return true;
}

bool paramRangeBounds(ParamType type, const char* range, int64_t* lo, int64_t* hi, int64_t* step) {
  if (type == ParamType::String || range == nullptr || *range == '\0') return false;
  const std::string r = range;
  const size_t dots = r.find(".."), slash = r.find('/');
  const std::string loText = r.substr(0, dots);
  const std::string hiText = r.substr(dots + 2, slash == std::string::npos ? std::string::npos : slash - dots - 2);
  // The bounds are written in the type's notation, but may be negative for an Int.
  std::string ignored;
  auto bound = [&](const std::string& text, int64_t* out) {
    return parseParamValue(ParamType::Int, text.c_str(), out, &ignored) ||
           parseParamValue(type, text.c_str(), out, &ignored);
  };
  *step = 1;
  const bool ok = bound(loText, lo) && bound(hiText, hi);
  if (slash != std::string::npos) parseParamValue(ParamType::Int, r.c_str() + slash + 1, step, &ignored);
  return ok;
}

bool paramInRange(ParamType type, const char* range, int64_t v, std::string* why) {
  if (type == ParamType::String || range == nullptr || *range == '\0') return true;
  int64_t lo = 0, hi = 0, step = 1;
  if (!paramRangeBounds(type, range, &lo, &hi, &step)) {
    *why = std::string("malformed range ") + range;
    return false;
  }
  if (v < lo || v > hi) {
    const std::string r = range;
    *why = "out of range (" + r.substr(0, r.find('/')) + ")";
    return false;
  }
  if (step > 1 && v % step != 0) {
    *why = "must be a multiple of " + std::to_string(step);
    return false;
  }
  return true;
}

const Params& params() { return loaded().values; }

void paramsReloadForTesting() {
  // The previous values stay allocated (and reachable): another thread may still read them.
  static auto* retired = new std::vector<Loaded*>();
  retired->push_back(current());
  current() = load();
}

loomResult_t paramsCheck() {
  const Loaded& l = loaded();
  if (!l.error.empty()) return setError(loomInvalidArgument, "bad environment parameter %s", l.error.c_str());
  return loomSuccess;
}

const ParamSpec* paramTable(int* count) {
  *count = kCount;
  return kSpecs;
}

std::string paramEnvText(int i) {
  if (i < 0 || i >= kCount) return "";
  const char* env = std::getenv((std::string("LOOM_") + kSpecs[i].name).c_str());
  return env ? env : "<unset>";
}

}  // namespace loom
