#include <gtest/gtest.h>

#include <cstring>

#include "bootstrap/unique_id.h"
#include "loom.h"

namespace loom {
namespace {

TEST(UniqueId, RoundTripsAndDetectsCorruption) {
  loomUniqueId raw;
  ASSERT_EQ(loomGetUniqueId(&raw), loomSuccess);
  UniqueIdData id{};
  ASSERT_EQ(decodeUniqueId(raw, &id), loomSuccess);
  EXPECT_NE(id.root.port, 0);
  for (size_t byte : {size_t{0}, size_t{9}, offsetof(UniqueIdData, root) + 3, sizeof(UniqueIdData) - 1}) {
    loomUniqueId bad = raw;
    bad.internal[byte] ^= 0x5a;
    EXPECT_EQ(decodeUniqueId(bad, &id), loomInvalidArgument) << "byte " << byte;
  }
  loomUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_EQ(decodeUniqueId(zero, &id), loomInvalidArgument);
}

TEST(UniqueId, SecretsDiffer) {
  loomUniqueId a, b;
  ASSERT_EQ(loomGetUniqueId(&a), loomSuccess);
  ASSERT_EQ(loomGetUniqueId(&b), loomSuccess);
  UniqueIdData x{}, y{};
  ASSERT_EQ(decodeUniqueId(a, &x), loomSuccess);
  ASSERT_EQ(decodeUniqueId(b, &y), loomSuccess);
  EXPECT_NE(std::memcmp(x.secret, y.secret, sizeof(x.secret)), 0);
}

}  // namespace
}  // namespace loom
