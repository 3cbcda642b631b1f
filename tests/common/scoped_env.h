// Environment settings for the length of a scope: each variable set (or unset) through a ScopedEnv gets
// its earlier value (or absence) back when the scope ends, also when a failing ASSERT returns early, so
// no setting leaks into a later test.  loom reads its parameters once per process (base/params.h): the
// ranks of runRanks re-read them after the fork, a test in this process calls paramsReloadForTesting()
// after setting them, and the restore re-reads them too.  A forked rank sets its own with setInForkedRank
// (it exits with them: nothing to restore).
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/params.h"
#include "tests/common/multiprocess.h"

namespace loom::testing {

class ScopedEnv {
 public:
  ScopedEnv() = default;
  // {{"LOOM_NET", "socket"}, {"LOOM_ALGO", nullptr}}: nullptr unsets.
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) set(name, value);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else ::unsetenv(it->first.c_str());
    }
    if (!saved_.empty()) paramsReloadForTesting();
  }
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  void unset(const char* name) { set(name, nullptr); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A forked rank's own setting.  Refused (abort) in the test process itself, where a setting must go
// through a ScopedEnv so that it cannot leak into a later test.
inline void setInForkedRank(const char* name, const char* value) {
  if (!inForkedRank()) std::abort();
  ::setenv(name, value, 1);
}

}  // namespace loom::testing
