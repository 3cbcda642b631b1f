#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/socket.h"
#include "tests/common/multiprocess.h"

namespace loom {
namespace {

using testing::timeBound;

TEST(Socket, InterfaceSpec) {
  EXPECT_TRUE(interfaceMatches("", "eth0"));
  EXPECT_TRUE(interfaceMatches("eth", "eth0"));
  EXPECT_TRUE(interfaceMatches("ib,eth", "eth1"));
  EXPECT_FALSE(interfaceMatches("ib", "eth0"));
  EXPECT_FALSE(interfaceMatches("^eth", "eth0"));
  EXPECT_TRUE(interfaceMatches("^docker,lo", "eth0"));
  EXPECT_TRUE(interfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(interfaceMatches("=eth0", "eth01"));
}

TEST(Socket, ParseHostPort) {
  SocketAddress a{};
  ASSERT_EQ(parseHostPort("127.0.0.1:5555", &a), loomSuccess);
  EXPECT_EQ(a.toString(), "127.0.0.1:5555");
  ASSERT_EQ(parseHostPort("[::1]:80", &a), loomSuccess);
  EXPECT_EQ(a.toString(), "[::1]:80");
  for (const char* bad : {"", "host", ":80", "1.2.3.4:", "1.2.3.4:0", "1.2.3.4:70000", "[::1]80", "1.2.3.4:8x"})
    EXPECT_EQ(parseHostPort(bad, &a), loomInvalidArgument) << bad;
}

struct Pair {
  int listenFd = -1, client = -1, server = -1;
  Pair() {
    SocketAddress addr{};
    EXPECT_EQ(parseHostPort("127.0.0.1:1", &addr), loomSuccess);
    reinterpret_cast<sockaddr_in*>(&addr.storage)->sin_port = 0;
    EXPECT_EQ(listenSocket(&addr, &listenFd), loomSuccess);
    Deadline d = Deadline::afterSeconds(5);
    EXPECT_EQ(connectSocket(addr, d, nullptr, &client), loomSuccess);
    EXPECT_EQ(acceptSocket(listenFd, d, nullptr, &server), loomSuccess);
  }
  ~Pair() {
    closeSocket(&listenFd);
    closeSocket(&client);
    closeSocket(&server);
  }
};

TEST(Socket, MovesWholeBuffersLargerThanSocketBuffers) {
  Pair p;
  std::vector<char> out(8 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7);
  std::thread t([&] { EXPECT_EQ(sendAll(p.client, out.data(), out.size(), Deadline::afterSeconds(20), nullptr, "t"), loomSuccess); });
  EXPECT_EQ(recvAll(p.server, in.data(), in.size(), Deadline::afterSeconds(20), nullptr, "t"), loomSuccess);
  t.join();
  EXPECT_EQ(in, out);
}

TEST(Socket, PeerClosingIsARemoteError) {
  Pair p;
  closeSocket(&p.client);
  char buf[4];
  EXPECT_EQ(recvAll(p.server, buf, sizeof(buf), Deadline::afterSeconds(5), nullptr, "t"), loomRemoteError);
}

TEST(Socket, SilentPeerTimesOut) {
  Pair p;
  char buf[4];
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(recvAll(p.server, buf, sizeof(buf), Deadline::afterSeconds(0.3), nullptr, "t"), loomTimeout);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, timeBound(5.0));
}

TEST(Socket, AbortStopsAWait) {
  Pair p;
  std::atomic<bool> abort{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort = true;
  });
  char buf[4];
  EXPECT_EQ(recvAll(p.server, buf, sizeof(buf), Deadline::afterSeconds(60), &abort, "t"), loomRemoteError);
  t.join();
}

TEST(Socket, ConnectToNothingTimesOut) {
  SocketAddress addr{};
  int fd = -1;
  // Bind and close to get a port that refuses.
  ASSERT_EQ(parseHostPort("127.0.0.1:1", &addr), loomSuccess);
  reinterpret_cast<sockaddr_in*>(&addr.storage)->sin_port = 0;
  ASSERT_EQ(listenSocket(&addr, &fd), loomSuccess);
  closeSocket(&fd);
  EXPECT_EQ(connectSocket(addr, Deadline::afterSeconds(0.3), nullptr, &fd), loomTimeout);
}

}  // namespace
}  // namespace loom
