// Collectives on device buffers and device streams, against the emulated device (no GPU here; the real
// CUDA runtime is exercised by tests/gpu/run.sh on a GPU machine).  Every test is named Emulated.
// The emulated device memory is unreadable from the host (PROT_NONE): a test that passes shows that loom
// moved every device byte through the runtime's copies and kernels, never by touching it.  Both paths
// are covered: p2p (peers' buffers mapped through the emulated IPC) and staged (through host memory).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/datatypes.h"
#include "base/params.h"
#include "loom.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"
#include "tests/common/reference.h"
#include "tests/device/emulated_device.h"

namespace {

using loom::testing::EmulatedDevice;
using loom::testing::forkRanks;
using loom::testing::runRanks;
using loom::testing::secondsSince;
using loom::testing::timeBound;

// This (forked) rank's choice of path: LOOM_DEVICE_P2P, read again.
void usePath(bool p2p) {
  loom::testing::setInForkedRank("LOOM_DEVICE_P2P", p2p ? "1" : "0");
  loom::paramsReloadForTesting();
}

// The emulated device of this (forked) rank, installed for the rest of its life.
EmulatedDevice& device() {
  static EmulatedDevice* dev = [] {
    auto* d = new EmulatedDevice;  // outlives the communicator, whose staging buffers it frees
    loom::installDeviceApi(d);
    return d;
  }();
  return *dev;
}

// Device buffers that the test fills and reads through the emulator's view.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : bytes(bytes), ptr(device().deviceAlloc(bytes)) {}
  ~DeviceBuffer() { device().deviceFree(ptr); }
  void* host() { return device().view(ptr); }
  size_t bytes;
  void* ptr;
};

class DevicePath : public ::testing::TestWithParam<bool> {};

// Every collective, out of place and in place, on device buffers with the NULL stream (the call is
// complete when it returns), against the reference results: on the p2p path (peers' buffers mapped,
// nothing staged) and on the staged path (LOOM_DEVICE_P2P=0: nothing mapped).
TEST_P(DevicePath, EveryCollectiveOnDeviceBuffersMatchesTheReference) {
  const bool p2p = GetParam();
  for (int n : {2, 3}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    runRanks(n, [n, p2p](int rank, loomComm_t comm) {
      usePath(p2p);
      const loomDataType_t type = loomFloat32;
      const size_t es = loom::typeSize(type), count = 70001;  // several slots, not a multiple of anything
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(inPlace ? "in place" : "out of place");
        std::string why;
        {  // allreduce
          DeviceBuffer send(count * es), recv(count * es);
          loom::testing::fillInput(type, loomSum, rank, count, send.host());
          void* out = inPlace ? send.ptr : recv.ptr;
          ASSERT_EQ(loomAllReduce(send.ptr, out, count, type, loomSum, comm, nullptr), loomSuccess) << loomGetLastError(comm);
          EXPECT_EQ(loom::testing::countWrong(type, loomSum, n, count, device().view(out), &why), 0u) << why;
        }
        {  // reduce to the last rank, with max
          DeviceBuffer send(count * es), recv(count * es);
          loom::testing::fillInput(type, loomMax, rank, count, send.host());
          void* out = inPlace ? send.ptr : recv.ptr;
          ASSERT_EQ(loomReduce(send.ptr, out, count, type, loomMax, n - 1, comm, nullptr), loomSuccess);
          if (rank == n - 1) {
            EXPECT_EQ(loom::testing::countWrong(type, loomMax, n, count, device().view(out), &why), 0u) << why;
          }
        }
        {  // broadcast from rank 0
          DeviceBuffer send(count * es), recv(count * es);
          loom::testing::fillInput(type, loomSum, rank, count, send.host());
          void* out = inPlace ? send.ptr : recv.ptr;
          ASSERT_EQ(loomBroadcast(send.ptr, out, count, type, 0, comm, nullptr), loomSuccess);
          EXPECT_EQ(loom::testing::countWrongCopied(type, loomSum, 0, 0, count, device().view(out), &why), 0u) << why;
        }
        {  // allgather: in place, rank r's part already sits at r * count
          DeviceBuffer recv(count * es * n), send(count * es);
          char* mine = static_cast<char*>(recv.ptr) + rank * count * es;
          loom::testing::fillInput(type, loomSum, rank, count, inPlace ? device().view(mine) : send.host());
          ASSERT_EQ(loomAllGather(inPlace ? mine : send.ptr, recv.ptr, count, type, comm, nullptr), loomSuccess);
          for (int r = 0; r < n; ++r)
            EXPECT_EQ(loom::testing::countWrongCopied(type, loomSum, r, 0, count,
                                                      static_cast<char*>(recv.host()) + r * count * es, &why), 0u)
                << "part of rank " << r << ": " << why;
        }
        {  // reducescatter: in place, rank r's result lands at r * count of the input
          DeviceBuffer send(count * es * n), recv(count * es);
          loom::testing::fillInput(type, loomSum, rank, count * n, send.host());
          void* out = inPlace ? static_cast<char*>(send.ptr) + rank * count * es : recv.ptr;
          ASSERT_EQ(loomReduceScatter(send.ptr, out, count, type, loomSum, comm, nullptr), loomSuccess);
          EXPECT_EQ(loom::testing::countWrongReduced(type, loomSum, n, rank * count, count, device().view(out), &why), 0u)
              << why;
        }
        if (!inPlace) {  // alltoall (no in-place form)
          DeviceBuffer send(count * es * n), recv(count * es * n);
          loom::testing::fillInput(type, loomSum, rank, count * n, send.host());
          ASSERT_EQ(loomAllToAll(send.ptr, recv.ptr, count, type, comm, nullptr), loomSuccess);
          for (int r = 0; r < n; ++r)
            EXPECT_EQ(loom::testing::countWrongCopied(type, loomSum, r, rank * count, count,
                                                      static_cast<char*>(recv.host()) + r * count * es, &why), 0u)
                << "from rank " << r << ": " << why;
        }
      }
      if (p2p) {
        EXPECT_GT(device().ipcOpened(), 0) << "the p2p path mapped no peer buffer";
        EXPECT_EQ(device().pinnedLive(), 0) << "the p2p path staged through host memory";
      } else {
        EXPECT_EQ(device().ipcOpened(), 0);
        EXPECT_GT(device().pinnedLive(), 0);
      }
    });
  }
}

// Nothing inside a call on a device stream waits for the whole device: the stream waits for the call,
// so on a GPU such a wait never returns (on an H200 a staging buffer's cudaFreeHost and the p2p
// allreduce's first reduce-kernel launch both hung that way).  Calls of growing sizes on a stream, which
// grow the staging buffers, with the emulator counting device-wide waits made inside host calls.  The
// device is installed before the communicator, as a GPU rank's runtime is there when it joins.
TEST_P(DevicePath, NothingInAStreamCallWaitsForTheWholeDevice) {
  const bool p2p = GetParam();
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  auto outcomes = forkRanks(2, [&](int rank) {
    EmulatedDevice& dev = device();
    usePath(p2p);
    loomComm_t comm;
    if (loomCommInitRank(&comm, 2, id, rank) != loomSuccess) return 2;
    void* s = dev.streamCreate();
    for (size_t count : {size_t{300}, size_t{20000}, size_t{300000}, size_t{1} << 20}) {
      DeviceBuffer buf(count * sizeof(float)), part(count / 2 * sizeof(float));
      auto* v = static_cast<float*>(buf.host());
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank + 1);
      if (loomAllReduce(buf.ptr, buf.ptr, count, loomFloat32, loomSum, comm, s) != loomSuccess) return 3;
      if (loomReduceScatter(buf.ptr, part.ptr, count / 2, loomFloat32, loomSum, comm, s) != loomSuccess) return 4;
      dev.streamSynchronize(s);
      for (size_t i = 0; i < count; ++i)
        if (v[i] != 3.0f) return 5;
      const auto* p = static_cast<const float*>(part.host());
      for (size_t i = 0; i < count / 2; ++i)
        if (p[i] != 6.0f) return 6;
    }
    loomResult_t async = loomSuccess;
    if (loomCommGetAsyncError(comm, &async) != loomSuccess || async != loomSuccess) return 7;
    const int waits = dev.deviceWideWaitsInHostCalls();
    dev.streamDestroy(s);
    if (loomCommDestroy(comm) != loomSuccess) return 8;
    return waits == 0 ? 0 : 10 + waits;  // 10 + n: n device-wide waits, each a hang on a GPU
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

INSTANTIATE_TEST_SUITE_P(DeviceEmulated, DevicePath, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "p2p" : "staged"; });

// One rank whose runtime cannot share its memory: every rank takes the staged path for that call (they
// agree first), and the results are right.
TEST(DeviceEmulated, OneRankWithoutIpcMakesEveryRankStage) {
  runRanks(3, [](int rank, loomComm_t comm) {
    device().refuseIpc(rank == 1);
    const size_t count = 30000;
    DeviceBuffer buf(count * sizeof(float));
    loom::testing::fillInput(loomFloat32, loomSum, rank, count, buf.host());
    ASSERT_EQ(loomAllReduce(buf.ptr, buf.ptr, count, loomFloat32, loomSum, comm, nullptr), loomSuccess)
        << loomGetLastError(comm);
    std::string why;
    EXPECT_EQ(loom::testing::countWrong(loomFloat32, loomSum, 3, count, buf.host(), &why), 0u) << why;
    EXPECT_GT(device().pinnedLive(), 0) << "rank " << rank << " did not stage";
  });
}

// Ranks of one process (loomCommInitAll, a thread each) read each other's buffers by address.
TEST(DeviceEmulated, RanksOfOneProcessOnTheP2pPath) {
#if defined(__SANITIZE_THREAD__)
  // The ranks order their reads of each other's buffers through the shared-memory transport, whose
  // segment each rank maps at its own address: ThreadSanitizer cannot see that the two mappings are one
  // memory, so it reports the ordered accesses as a race.
  GTEST_SKIP() << "not under ThreadSanitizer (the shared-memory ordering is invisible to it)";
#endif
  auto outcomes = forkRanks(1, [](int) {
    EmulatedDevice& dev = device();
    const int n = 3;
    std::vector<loomComm_t> comms(n);
    if (loomCommInitAll(comms.data(), n, nullptr) != loomSuccess) return 2;
    const size_t count = 10000;
    std::vector<DeviceBuffer*> bufs;
    for (int r = 0; r < n; ++r) {
      bufs.push_back(new DeviceBuffer(count * sizeof(int32_t)));
      loom::testing::fillInput(loomInt32, loomSum, r, count, bufs[r]->host());
    }
    std::vector<std::thread> threads;
    std::vector<loomResult_t> results(n, loomInternalError);
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        results[r] = loomAllReduce(bufs[r]->ptr, bufs[r]->ptr, count, loomInt32, loomSum, comms[r], nullptr);
      });
    for (auto& t : threads) t.join();
    int status = 0;
    for (int r = 0; r < n; ++r) {
      if (results[r] != loomSuccess) status = 3;
      else if (loom::testing::countWrong(loomInt32, loomSum, n, count, bufs[r]->host(), nullptr) != 0) status = 4;
    }
    if (status == 0 && (dev.ipcOpened() != 0 || dev.pinnedLive() != 0)) status = 5;  // neither mapped nor staged
    for (int r = 0; r < n; ++r) loomCommDestroy(comms[r]), delete bufs[r];
    return status;
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// Every type and op of allreduce on device buffers (small counts: the types' kernels are the CPU's).
TEST(DeviceEmulated, AllReduceEveryTypeAndOp) {
  runRanks(3, [](int rank, loomComm_t comm) {
    for (int t = 0; t < loomNumTypes; ++t) {
      for (int o = 0; o < loomNumOps; ++o) {
        auto type = static_cast<loomDataType_t>(t);
        auto op = static_cast<loomRedOp_t>(o);
        const size_t count = 1023, es = loom::typeSize(type);
        DeviceBuffer buf(count * es);
        loom::testing::fillInput(type, op, rank, count, buf.host());
        ASSERT_EQ(loomAllReduce(buf.ptr, buf.ptr, count, type, op, comm, nullptr), loomSuccess);
        std::string why;
        EXPECT_EQ(loom::testing::countWrong(type, op, 3, count, buf.host(), &why), 0u)
            << loom::typeName(type) << " " << loom::opName(op) << ": " << why;
      }
    }
  });
}

// On a device stream the call returns at once; it reads its input only after the stream's earlier
// "kernel" wrote it (300 ms later), and the stream's later kernel sees the result.
TEST(DeviceEmulated, StreamCallWaitsForEarlierWorkAndLaterWorkWaitsForIt) {
  runRanks(2, [](int rank, loomComm_t comm) {
    EmulatedDevice& dev = device();
    void* s = dev.streamCreate();
    const size_t count = 100000;
    DeviceBuffer buf(count * sizeof(float));
    std::vector<float> seen(count, -1.0f);
    dev.launch(s, [&] {  // writes the input late
      usleep(300 * 1000);
      float* v = static_cast<float*>(buf.host());
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank + 1);
    });
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(loomAllReduce(buf.ptr, buf.ptr, count, loomFloat32, loomSum, comm, s), loomSuccess) << loomGetLastError(comm);
    EXPECT_LT(secondsSince(t0), timeBound(0.2)) << "issuing on a device stream must not wait for the stream";
    dev.launch(s, [&] { std::memcpy(seen.data(), buf.host(), count * sizeof(float)); });  // reads the output
    dev.streamSynchronize(s);
    EXPECT_EQ(seen.front(), 3.0f);
    EXPECT_EQ(seen[count / 2], 3.0f);
    EXPECT_EQ(seen.back(), 3.0f);
    loomResult_t async = loomSuccess;
    EXPECT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
    EXPECT_EQ(async, loomSuccess);
    dev.streamDestroy(s);
  });
}

// A group on a device stream: a ring of sends and receives issued in an order that would deadlock
// without the group, plus an allreduce, on host and device buffers mixed.
TEST(DeviceEmulated, GroupOnDeviceStream) {
  const int n = 3;
  runRanks(n, [n](int rank, loomComm_t comm) {
    EmulatedDevice& dev = device();
    void* s = dev.streamCreate();
    const size_t count = 50000;
    DeviceBuffer send(count * sizeof(int32_t)), recv(count * sizeof(int32_t));
    std::vector<double> host(1000, rank + 1.0);
    dev.launch(s, [&] {
      auto* v = static_cast<int32_t*>(send.host());
      for (size_t i = 0; i < count; ++i) v[i] = rank * 1000000 + static_cast<int32_t>(i);
    });
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomRecv(recv.ptr, count, loomInt32, (rank + n - 1) % n, comm, s), loomSuccess);
    ASSERT_EQ(loomSend(send.ptr, count, loomInt32, (rank + 1) % n, comm, s), loomSuccess);
    ASSERT_EQ(loomAllReduce(host.data(), host.data(), host.size(), loomFloat64, loomSum, comm, s), loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comm);
    dev.streamSynchronize(s);
    const int from = (rank + n - 1) % n;
    auto* got = static_cast<int32_t*>(recv.host());
    EXPECT_EQ(got[0], from * 1000000);
    EXPECT_EQ(got[count - 1], from * 1000000 + static_cast<int32_t>(count - 1));
    EXPECT_EQ(host[999], 6.0);
    dev.streamDestroy(s);
  });
}

// A PreMulSum op whose scalar lives in device memory (loomScalarDevice) is read at the call.
TEST(DeviceEmulated, PreMulSumWithDeviceScalar) {
  runRanks(2, [](int rank, loomComm_t comm) {
    DeviceBuffer scalar(sizeof(float)), buf(64 * sizeof(float));
    *static_cast<float*>(scalar.host()) = 0.5f;
    for (int i = 0; i < 64; ++i) static_cast<float*>(buf.host())[i] = 2.0f * (rank + 1);
    loomRedOp_t op;
    ASSERT_EQ(loomRedOpCreatePreMulSum(&op, scalar.ptr, loomFloat32, loomScalarDevice, comm), loomSuccess);
    ASSERT_EQ(loomAllReduce(buf.ptr, buf.ptr, 64, loomFloat32, op, comm, nullptr), loomSuccess) << loomGetLastError(comm);
    EXPECT_EQ(static_cast<float*>(buf.host())[63], 3.0f);  // 0.5 * 2 + 0.5 * 4
    EXPECT_EQ(loomRedOpDestroy(op, comm), loomSuccess);
  });
}

// A peer that never calls: the stream call fails by the communicator's timeout (not a hang), the
// stream is released (its later work runs), and the failure is the communicator's async error.
TEST(DeviceEmulated, PeerThatNeverCallsReleasesTheStreamWithAnError) {
  runRanks(2, [](int rank, loomComm_t comm) {
    if (rank == 1) {
      sleep(4);  // long past rank 0's timeout; then leaves without calling
      return;
    }
    EmulatedDevice& dev = device();
    void* s = dev.streamCreate();
    DeviceBuffer buf(4096);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(loomAllReduce(buf.ptr, buf.ptr, 1024, loomFloat32, loomSum, comm, s), loomSuccess);
    bool ranAfter = false;
    dev.launch(s, [&] { ranAfter = true; });
    dev.streamSynchronize(s);
    EXPECT_TRUE(ranAfter);
    EXPECT_GE(secondsSince(t0), 1.0) << "failed before the timeout";
    EXPECT_LT(secondsSince(t0), timeBound(3.5));
    loomResult_t async = loomSuccess;
    EXPECT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
    EXPECT_NE(async, loomSuccess);
    // The next call reports the failure, naming the call that failed and the silent rank.
    EXPECT_NE(loomAllReduce(buf.ptr, buf.ptr, 1024, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    const std::string message = loomGetLastError(comm);
    EXPECT_NE(message.find("allreduce on device buffers"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
    dev.streamDestroy(s);
  }, 60, /*commTimeoutSec=*/1);
}

// A pointer that is neither a loom stream nor a stream of the device runtime is refused, naming both.
TEST(DeviceEmulated, UnknownStreamHandleIsInvalidArgument) {
  runRanks(1, [](int, loomComm_t comm) {
    device();
    float v[4] = {};
    int notAStream = 0;
    EXPECT_EQ(loomAllReduce(v, v, 4, loomFloat32, loomSum, comm, &notAStream), loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(comm)).find("nor a stream of the emulated device"), std::string::npos)
        << loomGetLastError(comm);
  });
}

// The page-locked staging buffers are reused from call to call and freed with the communicator.
TEST(DeviceEmulated, StagingBuffersAreReusedAndFreedOnDestroy) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  auto outcomes = forkRanks(2, [&](int rank) {
    EmulatedDevice& dev = device();
    usePath(false);
    loomComm_t comm;
    if (loomCommInitRank(&comm, 2, id, rank) != loomSuccess) return 2;
    DeviceBuffer a(1 << 20), b(1 << 20);
    for (int i = 0; i < 5; ++i)
      if (loomAllReduce(a.ptr, b.ptr, (1 << 20) / 4, loomFloat32, loomSum, comm, nullptr) != loomSuccess) return 3;
    if (dev.pinnedLive() != 2) return 10 + dev.pinnedLive();  // one for the input, one for the output
    if (loomCommDestroy(comm) != loomSuccess) return 4;
    return dev.pinnedLive() == 0 ? 0 : 5;
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

}  // namespace
