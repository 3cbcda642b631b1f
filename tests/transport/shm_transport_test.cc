#include "transport/shm/shm_transport.h"
#include "tests/common/multiprocess.h"
#include "tests/common/wait_context.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstring>
#include <thread>

namespace loom {
namespace {

using testing::timeBound;

PeerInfo info(int rank, uint64_t host) {
  PeerInfo p{};
  p.rank = rank;
  p.hostHash = host;
  return p;
}

int countSegments(uint64_t key) {
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "loom-%016" PRIx64 "-", key);
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) n += std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0;
    closedir(d);
  }
  return n;
}

// One FIFO from rank 0 to rank 1, set up the way two ranks would.
struct ShmLink {
  ShmTransport shm;
  PeerInfo a = info(0, 1), b = info(1, 1);
  uint64_t key = 0x1234000000000000ull ^ static_cast<uint64_t>(getpid());
  std::unique_ptr<RecvQueue> recv;
  std::unique_ptr<SendQueue> send;
  ShmLink() {
    ConnectInfo ci{};
    ConnectRequest atReceiver{1, 0, 0, key, &b, &a};
    ConnectRequest atSender{0, 1, 0, key, &a, &b};
    EXPECT_EQ(shm.createRecv(atReceiver, &ci, &recv), loomSuccess);
    EXPECT_EQ(countSegments(key), 1);
    EXPECT_EQ(shm.connectSend(atSender, ci, &send), loomSuccess);
    EXPECT_EQ(countSegments(key), 0) << "the name must be gone once both sides have mapped it";
  }
};

TEST(ShmTransport, ReachesOnlyTheSameHost) {
  ShmTransport shm;
  TransportEstimate est;
  std::string why;
  EXPECT_TRUE(shm.reaches(info(0, 1), info(1, 1), &est, &why));
  EXPECT_GT(est.bandwidthGBs, 0);
  EXPECT_FALSE(shm.reaches(info(0, 1), info(1, 2), &est, &why));
  EXPECT_NE(why.find("different hosts"), std::string::npos);
}

TEST(ShmTransport, InOrderAcrossWrapAroundBetweenThreads) {
  ShmLink l;
  const int messages = 5000;
  std::thread producer([&] {
    for (int i = 0; i < messages; ++i) {
      void* slot;
      ASSERT_EQ(l.send->acquire(&slot, testing::waitUpTo(30)), loomSuccess);
      size_t bytes = static_cast<size_t>(i % 97) * 8 + 8;
      for (size_t k = 0; k < bytes / 8; ++k) static_cast<uint64_t*>(slot)[k] = static_cast<uint64_t>(i) * 1000 + k;
      l.send->post(bytes, 0xabc0000000000000ull + static_cast<uint64_t>(i));
    }
  });
  for (int i = 0; i < messages; ++i) {
    const void* data;
    size_t bytes;
    uint64_t sig = 0;
    ASSERT_EQ(l.recv->wait(&data, &bytes, &sig, testing::waitUpTo(30)), loomSuccess);
    ASSERT_EQ(bytes, static_cast<size_t>(i % 97) * 8 + 8);
    ASSERT_EQ(sig, 0xabc0000000000000ull + static_cast<uint64_t>(i)) << "each slot carries its own signature";
    for (size_t k = 0; k < bytes / 8; ++k)
      ASSERT_EQ(static_cast<const uint64_t*>(data)[k], static_cast<uint64_t>(i) * 1000 + k);
    l.recv->release();
  }
  producer.join();
}

TEST(ShmTransport, FullFifoTimesOutInsteadOfOverwriting) {
  ShmLink l;
  void* slot;
  int posted = 0;
  while (l.send->acquire(&slot, testing::waitUpTo(0.2)) == loomSuccess) {
    l.send->post(1, 0);
    ASSERT_LT(++posted, 1000);
  }
  EXPECT_GE(posted, 2);
  EXPECT_EQ(l.send->acquire(&slot, testing::waitUpTo(0.1)), loomTimeout);
}

TEST(ShmTransport, EmptyFifoWaitEndsOnAbort) {
  ShmLink l;
  std::atomic<bool> abort{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    abort = true;
  });
  const void* data;
  size_t bytes;
  uint64_t sig;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(l.recv->wait(&data, &bytes, &sig, testing::waitUpTo(60, &abort)), loomRemoteError);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), timeBound(2.0));
  t.join();
}

TEST(ShmTransport, SleepingReceiverIsWokenAcrossProcesses) {
  ShmLink l;
  pid_t child = fork();
  if (child == 0) {
    usleep(300000);  // the parent is asleep on the futex by now
    void* slot;
    if (l.send->acquire(&slot, testing::waitUpTo(5)) != loomSuccess) _exit(1);
    std::memcpy(slot, "wake", 4);
    l.send->post(4, 7);
    _exit(0);
  }
  const void* data;
  size_t bytes;
  uint64_t sig;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(l.recv->wait(&data, &bytes, &sig, testing::waitUpTo(10)), loomSuccess);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(std::memcmp(data, "wake", 4), 0);
  EXPECT_LT(s, timeBound(3.0));
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ShmTransport, NonBlockingCallsNeverWait) {
  ShmLink l;
  const void* data;
  size_t bytes;
  uint64_t sig;
  EXPECT_FALSE(l.recv->tryWait(&data, &bytes, &sig)) << "nothing posted yet";
  void* slot;
  int posted = 0;
  while (l.send->tryAcquire(&slot)) {
    std::memcpy(slot, &posted, sizeof(posted));
    l.send->post(sizeof(posted), 100 + posted);
    ASSERT_LT(++posted, 1000);
  }
  EXPECT_GE(posted, 2) << "a FIFO holds several slots";
  for (int i = 0; i < posted; ++i) {
    ASSERT_TRUE(l.recv->tryWait(&data, &bytes, &sig));
    EXPECT_EQ(sig, static_cast<uint64_t>(100 + i));
    EXPECT_EQ(*static_cast<const int*>(data), i);
    l.recv->release();
  }
  EXPECT_FALSE(l.recv->tryWait(&data, &bytes, &sig));
  EXPECT_TRUE(l.send->tryAcquire(&slot)) << "released slots are free again";
}

TEST(ShmTransport, MalformedPeerInfoIsRefused) {
  ShmTransport shm;
  PeerInfo a = info(0, 1), b = info(1, 1);
  ConnectInfo ci{};
  std::memcpy(ci.bytes, "/etc/passwd", 12);
  std::unique_ptr<SendQueue> send;
  EXPECT_EQ(shm.connectSend(ConnectRequest{0, 1, 0, 99, &a, &b}, ci, &send), loomRemoteError);
  EXPECT_EQ(send, nullptr);
}

}  // namespace
}  // namespace loom
