#include "base/dynlib.h"

namespace loom {

bool DynLib::open(std::initializer_list<const char*> sonames) {
  std::string tried;
  for (const char* name : sonames) {
    handle_ = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (handle_ != nullptr) {
      soname_ = name;
      return true;
    }
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why != nullptr ? why : name);
  }
  ok_ = false;
  error_ = "cannot load " + tried;
  return false;
}

}  // namespace loom
