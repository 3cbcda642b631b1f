// A shared library opened at run time (dlopen), for the optional parts that libloom must not need to
// load: rdma-core (the ib transport) and UCX.  Linking them would make libloom fail to start on a machine
// without them, and loading UCX installs its signal handlers and memory hooks in every process that
// loads loom, whether or not it ever uses UCX.  Opened libraries stay open for the life of the process
// (they start threads of their own; unloading them is never safe).
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace loom {

class DynLib {
 public:
  // Opens the first of `sonames` that loads (RTLD_NOW | RTLD_GLOBAL: a library's plugins, such as
  // rdma-core's providers, resolve against it).  False, with error() naming every soname tried and
  // why each failed, when none does.
  bool open(std::initializer_list<const char*> sonames);
  // Resolves `symbol` into *fn.  A missing symbol is remembered in error() and makes ok() false, so that a
  // table is bound whole and checked once.
  template <typename F>
  void bind(const char* symbol, F** fn) {
    void* p = handle_ != nullptr ? dlsym(handle_, symbol) : nullptr;
    if (p == nullptr && handle_ != nullptr) {
      ok_ = false;
      error_ += (error_.empty() ? "" : "; ") + std::string(soname_) + " lacks " + symbol;
    }
    *fn = reinterpret_cast<F*>(p);
  }
  bool ok() const { return ok_ && handle_ != nullptr; }
  const std::string& error() const { return error_; }

 private:
  void* handle_ = nullptr;
  const char* soname_ = "";
  bool ok_ = true;
  std::string error_;
};

}  // namespace loom
