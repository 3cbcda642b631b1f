// Bad input at the C API: every case returns the right code and a message; nothing crashes or hangs.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/params.h"
#include "loom.h"
#include "tests/common/scoped_env.h"

namespace {

using loom::testing::ScopedEnv;

void expectMessage(const char* needle) {
  std::string msg = loomGetLastError(nullptr);
  EXPECT_NE(msg.find(needle), std::string::npos) << "message was: " << msg;
}

TEST(Api, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(loomGetVersion(&v), loomSuccess);
  EXPECT_EQ(v, LOOM_VERSION_CODE);
  EXPECT_EQ(loomGetVersion(nullptr), loomInvalidArgument);
  for (int r = 0; r < loomNumResults; ++r)
    EXPECT_GT(std::strlen(loomGetErrorString(static_cast<loomResult_t>(r))), 3u) << r;
  EXPECT_STREQ(loomGetErrorString(static_cast<loomResult_t>(1234)), "unknown result code");
}

TEST(Api, InitRejectsBadArguments) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = reinterpret_cast<loomComm_t>(0x1);
  EXPECT_EQ(loomCommInitRank(nullptr, 2, id, 0), loomInvalidArgument);
  EXPECT_EQ(loomCommInitRank(&comm, 0, id, 0), loomInvalidArgument);
  EXPECT_EQ(comm, nullptr) << "the output is cleared on failure";
  expectMessage("nranks");
  EXPECT_EQ(loomCommInitRank(&comm, -3, id, 0), loomInvalidArgument);
  EXPECT_EQ(loomCommInitRank(&comm, 2, id, 2), loomInvalidArgument);
  expectMessage("rank 2 out of range");
  EXPECT_EQ(loomCommInitRank(&comm, 2, id, -1), loomInvalidArgument);
  EXPECT_EQ(loomGetUniqueId(nullptr), loomInvalidArgument);
}

TEST(Api, CorruptUniqueIdIsRefused) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  id.internal[20] ^= 0x40;
  loomComm_t comm = nullptr;
  EXPECT_EQ(loomCommInitRank(&comm, 2, id, 0), loomInvalidArgument);
  expectMessage("corrupt");
  loomUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_EQ(loomCommInitRank(&comm, 1, zero, 0), loomInvalidArgument);
}

TEST(Api, ConfigMustComeFromTheInitializer) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = nullptr;
  loomConfig_t cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  EXPECT_EQ(loomCommInitRankConfig(&comm, 1, id, 0, &cfg), loomInvalidArgument);
  expectMessage("LOOM_CONFIG_INITIALIZER");
  loomConfig_t nb = LOOM_CONFIG_INITIALIZER;
  nb.blocking = 2;
  EXPECT_EQ(loomCommInitRankConfig(&comm, 1, id, 0, &nb), loomInvalidArgument);
  expectMessage("blocking = 2");
  loomConfig_t badTimeout = LOOM_CONFIG_INITIALIZER;
  badTimeout.timeoutSec = -5;
  EXPECT_EQ(loomCommInitRankConfig(&comm, 1, id, 0, &badTimeout), loomInvalidArgument);
}

// A network transport this build does not have is named at init, with the ones it has.
TEST(Api, UnknownNetworkTransportIsRefusedAtInit) {
  ScopedEnv env;
  env.set("LOOM_NET", "carrier-pigeon");
  loom::paramsReloadForTesting();
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = nullptr;
  EXPECT_EQ(loomCommInitRank(&comm, 1, id, 0), loomInvalidArgument);
  expectMessage("LOOM_NET=carrier-pigeon");
  expectMessage("socket");
}

class SingleRank : public ::testing::Test {
 protected:
  void SetUp() override {
    loomUniqueId id;
    ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
    loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
    cfg.commName = "single";
    ASSERT_EQ(loomCommInitRankConfig(&comm, 1, id, 0, &cfg), loomSuccess) << loomGetLastError(nullptr);
  }
  void TearDown() override {
    if (comm != nullptr) {
      EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
    }
  }
  loomComm_t comm = nullptr;
};

TEST_F(SingleRank, QueriesAndTrivialAllReduce) {
  int n = 0, r = -1;
  ASSERT_EQ(loomCommCount(comm, &n), loomSuccess);
  ASSERT_EQ(loomCommUserRank(comm, &r), loomSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(loomCommCount(comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommUserRank(comm, nullptr), loomInvalidArgument);
  float in[3] = {1, 2, 3}, out[3] = {};
  ASSERT_EQ(loomAllReduce(in, out, 3, loomFloat32, loomAvg, comm, nullptr), loomSuccess);
  EXPECT_EQ(out[2], 3.0f);
  loomResult_t async = loomInternalError;
  ASSERT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
  EXPECT_EQ(async, loomSuccess);
}

TEST_F(SingleRank, AllReduceRejectsBadArguments) {
  float buf[4] = {};
  EXPECT_EQ(loomAllReduce(nullptr, buf, 4, loomFloat32, loomSum, comm, nullptr), loomInvalidArgument);
  expectMessage("sendbuff is NULL");
  EXPECT_EQ(loomAllReduce(buf, nullptr, 4, loomFloat32, loomSum, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomAllReduce(nullptr, nullptr, 0, loomFloat32, loomSum, comm, nullptr), loomSuccess)
      << "count 0 needs no buffers";
  EXPECT_EQ(loomAllReduce(buf, buf, 4, static_cast<loomDataType_t>(42), loomSum, comm, nullptr), loomInvalidArgument);
  expectMessage("datatype 42");
  EXPECT_EQ(loomAllReduce(buf, buf, 4, static_cast<loomDataType_t>(-1), loomSum, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomAllReduce(buf, buf, 4, loomFloat32, static_cast<loomRedOp_t>(17), comm, nullptr), loomInvalidArgument);
  expectMessage("op 17");
  EXPECT_EQ(loomAllReduce(buf, buf, static_cast<size_t>(-1), loomFloat32, loomSum, comm, nullptr), loomInvalidArgument);
  expectMessage("overflows");
  EXPECT_EQ(loomAllReduce(buf, buf + 1, 3, loomFloat32, loomSum, comm, nullptr), loomInvalidArgument);
  expectMessage("overlap");
  EXPECT_EQ(loomAllReduce(buf, buf, 4, loomFloat32, loomSum, comm, reinterpret_cast<loomStream_t>(0x10)),
            loomInvalidArgument);
  expectMessage("not a live stream from loomStreamCreate");
  EXPECT_EQ(loomAllReduce(buf, buf, 4, loomFloat32, loomSum, nullptr, nullptr), loomInvalidArgument);
  expectMessage("not a live communicator");
  // The communicator is still healthy after refused calls: they never reached it.
  EXPECT_EQ(loomAllReduce(buf, buf, 4, loomFloat32, loomSum, comm, nullptr), loomSuccess);
}

TEST_F(SingleRank, RootedAndSpreadCollectivesCheckTheirArguments) {
  char b[64] = {};
  EXPECT_EQ(loomBroadcast(b, b, 8, loomInt8, 1, comm, nullptr), loomInvalidArgument);
  expectMessage("root 1 out of range");
  EXPECT_EQ(loomReduce(b, b, 8, loomInt8, loomSum, -1, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomReduce(b, b, 8, loomInt8, static_cast<loomRedOp_t>(9), 0, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomBroadcast(nullptr, b, 8, loomInt8, 0, comm, nullptr), loomInvalidArgument)
      << "the root needs a sendbuff";
  EXPECT_EQ(loomAllGather(b, b + 4, 8, loomInt8, comm, nullptr), loomInvalidArgument);
  expectMessage("in-place layout");
  EXPECT_EQ(loomAllGather(b, b, 8, loomInt8, comm, nullptr), loomSuccess) << "rank 0's block is in place";
  EXPECT_EQ(loomReduceScatter(b, b, 8, loomInt8, loomMax, comm, nullptr), loomSuccess);
  EXPECT_EQ(loomReduceScatter(b, nullptr, 8, loomInt8, loomMax, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomAllGather(b, b, static_cast<size_t>(1) << 62, loomInt64, comm, nullptr), loomInvalidArgument);
  expectMessage("overflows");
  int8_t v[4] = {1, 2, 3, 4}, w[4] = {};
  ASSERT_EQ(loomBroadcast(v, w, 4, loomInt8, 0, comm, nullptr), loomSuccess);
  EXPECT_EQ(w[3], 4);
  ASSERT_EQ(loomReduce(v, w, 4, loomInt8, loomProd, 0, comm, nullptr), loomSuccess);
  EXPECT_EQ(w[2], 3);
}

// Every entry point that takes a communicator, given none, a freed one and a pointer to something else:
// loomInvalidArgument with a message, never a crash.
TEST_F(SingleRank, EveryEntryPointRefusesAMissingOrFreedComm) {
  loomComm_t freed = nullptr;
  {
    loomUniqueId id;
    ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
    ASSERT_EQ(loomCommInitRank(&freed, 1, id, 0), loomSuccess);
    ASSERT_EQ(loomCommDestroy(freed), loomSuccess);
  }
  int notAComm[64] = {};
  float buf[8] = {};
  int n = 0;
  loomResult_t e = loomSuccess;
  loomRedOp_t op = loomSum;
  float scalar = 2.0f;
  for (loomComm_t bad : {static_cast<loomComm_t>(nullptr), freed, reinterpret_cast<loomComm_t>(notAComm)}) {
    SCOPED_TRACE(bad == nullptr ? "NULL comm" : bad == freed ? "freed comm" : "not a comm");
    const std::vector<std::pair<const char*, std::function<loomResult_t()>>> calls = {
        {"loomCommCount", [&] { return loomCommCount(bad, &n); }},
        {"loomCommUserRank", [&] { return loomCommUserRank(bad, &n); }},
        {"loomCommGetAsyncError", [&] { return loomCommGetAsyncError(bad, &e); }},
        {"loomAllReduce", [&] { return loomAllReduce(buf, buf, 8, loomFloat32, loomSum, bad, nullptr); }},
        {"loomBroadcast", [&] { return loomBroadcast(buf, buf, 8, loomFloat32, 0, bad, nullptr); }},
        {"loomReduce", [&] { return loomReduce(buf, buf, 8, loomFloat32, loomSum, 0, bad, nullptr); }},
        {"loomAllGather", [&] { return loomAllGather(buf, buf, 8, loomFloat32, bad, nullptr); }},
        {"loomReduceScatter", [&] { return loomReduceScatter(buf, buf, 8, loomFloat32, loomSum, bad, nullptr); }},
        {"loomAllToAll", [&] { return loomAllToAll(buf, buf, 8, loomFloat32, bad, nullptr); }},
        {"loomSend", [&] { return loomSend(buf, 8, loomFloat32, 0, bad, nullptr); }},
        {"loomRecv", [&] { return loomRecv(buf, 8, loomFloat32, 0, bad, nullptr); }},
        {"loomCommSplit", [&] {
           loomComm_t sub = nullptr;
           return loomCommSplit(bad, 0, 0, &sub, nullptr);
         }},
        {"loomRedOpCreatePreMulSum",
         [&] { return loomRedOpCreatePreMulSum(&op, &scalar, loomFloat32, loomScalarHostImmediate, bad); }},
        {"loomRedOpDestroy", [&] { return loomRedOpDestroy(static_cast<loomRedOp_t>(loomNumOps), bad); }},
        {"loomCommDestroy", [&] { return loomCommDestroy(bad); }},
        {"loomCommAbort", [&] { return loomCommAbort(bad); }},
    };
    for (const auto& [name, call] : calls) {
      EXPECT_EQ(call(), loomInvalidArgument) << name;
      EXPECT_NE(std::string(loomGetLastError(nullptr)).find(name), std::string::npos)
          << name << " should be named in: " << loomGetLastError(nullptr);
    }
  }
}

// Output pointers, counts, peers and ops out of range: refused with a message, the comm unharmed.
TEST_F(SingleRank, PointersCountsPeersAndOpsAreChecked) {
  float buf[8] = {};
  EXPECT_EQ(loomGetUniqueId(nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommGetAsyncError(comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommSplit(comm, 0, 0, nullptr, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommInitAll(nullptr, 2, nullptr), loomInvalidArgument);
  loomComm_t comms[2];
  EXPECT_EQ(loomCommInitAll(comms, 0, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommInitAll(comms, -3, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomSend(buf, 8, loomFloat32, 1, comm, nullptr), loomInvalidArgument) << "peer 1 of 1 rank";
  EXPECT_EQ(loomRecv(buf, 8, loomFloat32, -1, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomSend(nullptr, 8, loomFloat32, 0, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomRecv(nullptr, 8, loomFloat32, 0, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomSend(buf, static_cast<size_t>(-1), loomFloat32, 0, comm, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomAllToAll(buf, buf + 1, 2, loomFloat32, comm, nullptr), loomInvalidArgument) << "overlap";
  EXPECT_EQ(loomAllToAll(buf, buf, static_cast<size_t>(1) << 62, loomFloat64, comm, nullptr), loomInvalidArgument);
  loomRedOp_t op;
  float scalar = 0.5f;
  EXPECT_EQ(loomRedOpCreatePreMulSum(nullptr, &scalar, loomFloat32, loomScalarHostImmediate, comm), loomInvalidArgument);
  EXPECT_EQ(loomRedOpCreatePreMulSum(&op, nullptr, loomFloat32, loomScalarHostImmediate, comm), loomInvalidArgument);
  EXPECT_EQ(loomRedOpCreatePreMulSum(&op, &scalar, static_cast<loomDataType_t>(77), loomScalarHostImmediate, comm),
            loomInvalidArgument);
  EXPECT_EQ(loomRedOpCreatePreMulSum(&op, &scalar, loomFloat32, static_cast<loomScalarResidence_t>(9), comm),
            loomInvalidArgument);
  EXPECT_EQ(loomRedOpDestroy(loomSum, comm), loomInvalidArgument) << "built-in ops are not destroyed";
  EXPECT_EQ(loomRedOpDestroy(static_cast<loomRedOp_t>(loomNumOps + 40), comm), loomInvalidArgument);
  ASSERT_EQ(loomRedOpCreatePreMulSum(&op, &scalar, loomFloat32, loomScalarHostImmediate, comm), loomSuccess);
  int ints[2] = {};
  EXPECT_EQ(loomAllReduce(ints, ints, 2, loomInt32, op, comm, nullptr), loomInvalidArgument)
      << "an op made for float32 used with int32";
  ASSERT_EQ(loomRedOpDestroy(op, comm), loomSuccess);
  EXPECT_EQ(loomRedOpDestroy(op, comm), loomInvalidArgument) << "destroyed twice";
  EXPECT_EQ(loomAllReduce(buf, buf, 8, loomFloat32, op, comm, nullptr), loomInvalidArgument) << "used after destroy";
  EXPECT_EQ(loomGroupEnd(), loomInvalidUsage) << "GroupEnd without GroupStart";
  // None of it reached the communicator.
  loomResult_t async = loomInternalError;
  ASSERT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
  EXPECT_EQ(async, loomSuccess);
  EXPECT_EQ(loomAllReduce(buf, buf, 8, loomFloat32, loomSum, comm, nullptr), loomSuccess);
}

TEST_F(SingleRank, DestroyedCommIsRefusedNotUsed) {
  ASSERT_EQ(loomCommDestroy(comm), loomSuccess);
  loomComm_t dead = comm;
  comm = nullptr;
  float buf[2] = {};
  int n = 0;
  EXPECT_EQ(loomAllReduce(buf, buf, 2, loomFloat32, loomSum, dead, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommCount(dead, &n), loomInvalidArgument);
  EXPECT_EQ(loomCommDestroy(dead), loomInvalidArgument);
  EXPECT_EQ(loomCommAbort(dead), loomInvalidArgument);
  loomResult_t e;
  EXPECT_EQ(loomCommGetAsyncError(dead, &e), loomInvalidArgument);
}

}  // namespace
