#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/params.h"

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
