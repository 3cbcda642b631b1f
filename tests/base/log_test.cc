#include <gtest/gtest.h>

#include "base/log.h"

namespace loom {
namespace {

TEST(Log, SubsystemMask) {
  EXPECT_EQ(parseSubsysMask("ALL"), kAllSubsys);
  EXPECT_EQ(parseSubsysMask(""), kAllSubsys);
  EXPECT_EQ(parseSubsysMask("INIT,COLL"), kInit | kColl);
  EXPECT_EQ(parseSubsysMask("init"), static_cast<uint32_t>(kInit));
  EXPECT_EQ(parseSubsysMask("^TRANSPORT"), ~static_cast<uint32_t>(kTransport));
  EXPECT_EQ(parseSubsysMask("NOPE"), 0u);
}

}  // namespace
}  // namespace loom
