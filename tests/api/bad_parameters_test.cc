// Every numeric parameter set to 0, to -1 and one past its maximum (base/params.h declares the ranges),
// over shared memory and over the socket transport: where the value is outside the declared range, both
// ranks' init returns loomInvalidArgument naming the variable within a second, never waiting for
// LOOM_TIMEOUT.  Values the range admits (0 where it starts at 0, -1 for "automatic") are left out: they
// are settings, not bad input.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "base/params.h"
#include "loom.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"

namespace loom {
namespace {

using testing::ScopedEnv;

class BadParameters : public ::testing::TestWithParam<const char*> {};

TEST_P(BadParameters, EveryNumericParameterAtZeroMinusOneAndPastItsMaximum) {
  const bool overSockets = std::string(GetParam()) == "socket";
  int count = 0;
  const ParamSpec* table = paramTable(&count);
  int refused = 0;
  for (int i = 0; i < count; ++i) {
    const ParamSpec& p = table[i];
    int64_t lo = 0, hi = 0, step = 0;
    if (p.type == loom::ParamType::String || !paramRangeBounds(p.type, p.range, &lo, &hi, &step)) continue;
    for (int64_t v : {int64_t{0}, int64_t{-1}, hi + 1}) {
      if (v >= lo && v <= hi && (step <= 1 || v % step == 0)) continue;  // a setting the range admits
      const std::string var = std::string("LOOM_") + p.name, value = std::to_string(v);
      const std::string wanted = var + "=" + value;
      // The id first, with the environment clean (making an id reads it too); LOOM_COMM_ID: no root
      // thread here, rank 0 would start it.
      ScopedEnv env{{"LOOM_COMM_ID", "127.0.0.1:29511"}, {"LOOM_TIMEOUT", "30"}};
      loomUniqueId id;
      ASSERT_EQ(loomGetUniqueId(&id), loomSuccess) << loomGetLastError(nullptr);
      ScopedEnv bad{
          {"LOOM_SHM_DISABLE", overSockets ? "1" : "0"}, {"LOOM_NET", "socket"}, {var.c_str(), value.c_str()}};
      auto outcomes = testing::forkRanks(2, [&](int rank) {
        const auto t0 = std::chrono::steady_clock::now();
        loomComm_t comm;
        const loomResult_t r = loomCommInitRank(&comm, 2, id, rank);
        if (r != loomInvalidArgument) return 1;
        if (std::strstr(loomGetLastError(nullptr), wanted.c_str()) == nullptr) return 2;
        return testing::secondsSince(t0) < testing::timeBound(1.0) ? 0 : 3;
      }, 60);
      ASSERT_EQ(outcomes.size(), 2u);
      for (const auto& o : outcomes)
        EXPECT_TRUE(o.ok()) << wanted << " over " << GetParam() << ": " << o.describe()
                            << " (1: init did not return loomInvalidArgument, 2: message without " << wanted
                            << ", 3: slower than a second)";
      ++refused;
    }
  }
  EXPECT_GE(refused, 20) << "the table's numeric parameters should give at least this many bad values";
}

INSTANTIATE_TEST_SUITE_P(Transports, BadParameters, ::testing::Values("shm", "socket"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
}  // namespace loom
