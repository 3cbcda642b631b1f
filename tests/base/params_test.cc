#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/params.h"
#include "tests/common/scoped_env.h"

namespace loom {
namespace {

TEST(Params, EveryDefaultParses) {
  int n = 0;
  const ParamSpec* t = paramTable(&n);
  ASSERT_GT(n, 5);
  std::set<std::string> names;
  for (int i = 0; i < n; ++i) {
    int64_t v = 0;
    std::string why;
    EXPECT_TRUE(parseParamValue(t[i].type, t[i].defaultValue, &v, &why)) << t[i].name << ": " << why;
    EXPECT_TRUE(names.insert(t[i].name).second) << "duplicate parameter " << t[i].name;
    EXPECT_GT(std::string(t[i].help).size(), 10u) << t[i].name << " needs a help text";
    EXPECT_TRUE(paramInRange(t[i].type, t[i].range, v, &why)) << t[i].name << " default: " << why;
    EXPECT_EQ(t[i].type == ParamType::String, *t[i].range == '\0') << t[i].name << ": numbers declare a range";
  }
}

TEST(Params, RangesBoundBothEndsAndSteps) {
  std::string why;
  EXPECT_TRUE(paramInRange(ParamType::Int, "2..64", 2, &why));
  EXPECT_TRUE(paramInRange(ParamType::Int, "2..64", 64, &why));
  EXPECT_FALSE(paramInRange(ParamType::Int, "2..64", 1, &why));
  EXPECT_EQ(why, "out of range (2..64)");
  EXPECT_FALSE(paramInRange(ParamType::Int, "2..64", 65, &why));
  EXPECT_TRUE(paramInRange(ParamType::Int, "-1..1", -1, &why));
  EXPECT_FALSE(paramInRange(ParamType::Int, "-1..1", -2, &why));
  EXPECT_TRUE(paramInRange(ParamType::Size, "4K..1G/64", 4096, &why));
  EXPECT_TRUE(paramInRange(ParamType::Size, "4K..1G/64", int64_t{1} << 30, &why));
  EXPECT_FALSE(paramInRange(ParamType::Size, "4K..1G/64", 4095, &why));
  EXPECT_FALSE(paramInRange(ParamType::Size, "4K..1G/64", (int64_t{1} << 30) + 64, &why));
  EXPECT_FALSE(paramInRange(ParamType::Size, "4K..1G/64", 4100, &why));
  EXPECT_EQ(why, "must be a multiple of 64");
  EXPECT_TRUE(paramInRange(ParamType::String, "", 0, &why));
}

// Every numeric parameter's range is enforced when the environment is read: one past either end is
// refused (paramsCheck names the variable), and the value in force stays the default.
TEST(Params, EveryRangeIsCheckedWhenTheEnvironmentIsRead) {
  int n = 0;
  const ParamSpec* t = paramTable(&n);
  for (int i = 0; i < n; ++i) {
    if (t[i].type == ParamType::String) continue;
    const std::string var = std::string("LOOM_") + t[i].name;
    int64_t lo = 0, hi = 0, step = 1;
    ASSERT_TRUE(paramRangeBounds(t[i].type, t[i].range, &lo, &hi, &step)) << var << ": range " << t[i].range;
    ASSERT_LE(lo, hi) << var;
    for (int64_t outside : {lo - 1, hi + 1}) {
      if (outside < 0 && t[i].type == ParamType::Size) continue;  // not even a size
      const std::string text = std::to_string(outside);
      testing::ScopedEnv env{{var.c_str(), text.c_str()}};
      paramsReloadForTesting();
      EXPECT_EQ(paramsCheck(), loomInvalidArgument) << var << "=" << text;
      EXPECT_NE(std::string(loomGetLastError(nullptr)).find(var + "=" + text), std::string::npos)
          << loomGetLastError(nullptr);
    }
  }
}

TEST(Params, IntegersAndSizes) {
  int64_t v = 0;
  std::string why;
  EXPECT_TRUE(parseParamValue(ParamType::Int, "42", &v, &why));
  EXPECT_EQ(v, 42);
  EXPECT_TRUE(parseParamValue(ParamType::Int, "-1", &v, &why));
  EXPECT_EQ(v, -1);
  EXPECT_TRUE(parseParamValue(ParamType::Size, "256K", &v, &why));
  EXPECT_EQ(v, 256 << 10);
  EXPECT_TRUE(parseParamValue(ParamType::Size, "2MB", &v, &why));
  EXPECT_EQ(v, 2 << 20);
  EXPECT_TRUE(parseParamValue(ParamType::Size, "1g", &v, &why));
  EXPECT_EQ(v, int64_t{1} << 30);
}

TEST(Params, MalformedValuesAreRefusedWithAReason) {
  int64_t v = 7;
  for (const char* bad : {"", "abc", "12x", "1.5", "99999999999999999999999", "4Q"}) {
    std::string why;
    EXPECT_FALSE(parseParamValue(ParamType::Int, bad, &v, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  std::string why;
  EXPECT_FALSE(parseParamValue(ParamType::Size, "-4K", &v, &why));
  EXPECT_FALSE(parseParamValue(ParamType::Size, "9999999999G", &v, &why));
  EXPECT_EQ(v, 7) << "a refused value must not change the output";
}

}  // namespace
}  // namespace loom
