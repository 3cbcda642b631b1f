// Every transport through the transport interface (transport.h), in one process: each case builds
// one-way connections the way two ranks would (createRecv on one side, connectSend with its description
// on the other) and holds shm, socket, UCX and verbs (on the emulated device: this machine has no RDMA
// NIC) to the same contract: frames whole and in order (through slots and, where offered, zero copy),
// streams of 0 B to 64 MB, peers interleaved, no CPU when idle, an aborted wait ending at once, flushed
// data outliving the sender, and a peer gone reported on either side, never a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <ostream>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "base/params.h"
#include "loom_build_config.h"
#include "tests/common/scoped_env.h"
#include "transport/shm/shm_transport.h"
#include "transport/socket/socket_transport.h"
#if LOOM_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif
#if LOOM_HAVE_VERBS
#include "transport/emulated_verbs.h"
#include "transport/ib/ib_transport.h"
#include "tests/common/multiprocess.h"
#include "tests/common/wait_context.h"
#endif

namespace loom {
namespace {

using testing::timeBound;

struct ContractCase {
  const char* transport;  // "shm", "socket", "ucx", or "ib" on an emulated device
  int nsocks;             // LOOM_NSOCKS (socket only)
  const char* device;     // ib only: "roce", "iwarp" or "infiniband" (emulated: this machine has no RDMA NIC)
  int qps = 1;            // LOOM_IB_QPS_PER_CONNECTION (ib only)
  bool odp = false;       // ib only: the device has implicit on-demand paging (zero copy)
};

std::ostream& operator<<(std::ostream& os, const ContractCase& c) {
  return os << c.transport << (*c.device ? " emulated " : "") << c.device << " (" << c.nsocks << " socket(s), " << c.qps
            << " qp(s)" << (c.odp ? ", on-demand paging" : "") << ")";
}

std::unique_ptr<Transport> makeTransport(const ContractCase& c) {
#if LOOM_HAVE_UCX
  if (std::string(c.transport) == "ucx") return std::make_unique<UcxTransport>();
#endif
#if LOOM_HAVE_VERBS
  if (std::string(c.transport) == "ib") {
    emulated::Options o;
    o.iwarp = std::string(c.device) == "iwarp";
    o.roce = std::string(c.device) == "roce";
    o.odp = c.odp ? emulated::Options::Odp::kImplicit : emulated::Options::Odp::kNone;
    emulated::install(o);
    return std::make_unique<IbTransport>();
  }
#endif
  if (std::string(c.transport) == "shm") return std::make_unique<ShmTransport>();
  return std::make_unique<SocketTransport>();
}

class TransportContract : public ::testing::TestWithParam<ContractCase> {
 protected:
  void SetUp() override {
    env_.set("LOOM_NSOCKS", std::to_string(GetParam().nsocks).c_str());
    env_.set("LOOM_IB_QPS_PER_CONNECTION", std::to_string(GetParam().qps).c_str());
    env_.set("UCX_TLS", "tcp");
    paramsReloadForTesting();
    transport_ = makeTransport(GetParam());
    a_.rank = 0, b_.rank = 1, c_.rank = 2;
    connect(a_, b_, &send_, &recv_);
  }
  // A one-way connection from rank `from` to rank `to`, set up the way the two ranks would.
  void connect(const PeerInfo& from, const PeerInfo& to, std::unique_ptr<SendQueue>* send,
               std::unique_ptr<RecvQueue>* recv) {
    ConnectInfo ci{};
    const uint64_t key = 0x5150000000000000ull ^ static_cast<uint64_t>(getpid());
    ConnectRequest atReceiver{to.rank, from.rank, 0, key, &to, &from};
    ConnectRequest atSender{from.rank, to.rank, 0, key, &from, &to};
    ASSERT_EQ(transport_->createRecv(atReceiver, &ci, recv), loomSuccess) << loomGetLastError(nullptr);
    ASSERT_EQ(transport_->connectSend(atSender, ci, send), loomSuccess) << loomGetLastError(nullptr);
  }
  void TearDown() override {
    send_.reset();
    recv_.reset();
#if LOOM_HAVE_VERBS
    setVerbsApiForTesting(nullptr);
#endif
  }

  testing::ScopedEnv env_;  // restored when the test ends, after the queues are gone
  PeerInfo a_{}, b_{}, c_{};
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<RecvQueue> recv_;
  std::unique_ptr<SendQueue> send_;
};

// Sizes from empty to a full slot, below and above the striping threshold, odd ones included.
size_t frameBytes(int i, size_t slot) {
  static const size_t sizes[] = {0, 1, 7, 4096, 65535, 65536, 65537, 100003, 200000};
  const size_t s = sizes[i % (sizeof sizes / sizeof sizes[0])];
  return i % 11 == 10 ? slot : std::min(s, slot);
}

uint8_t pattern(int frame, size_t k) { return static_cast<uint8_t>((frame * 131 + k * 7) ^ (k >> 9)); }

TEST_P(TransportContract, FramesArriveWholeAndInOrderAcrossWrapAround) {
  const int frames = 300;
  const size_t slot = send_->slotBytes();
  ASSERT_EQ(recv_->slotBytes(), slot);
  std::thread producer([&] {
    for (int i = 0; i < frames; ++i) {
      void* p;
      ASSERT_EQ(send_->acquire(&p, testing::waitUpTo(30)), loomSuccess);
      const size_t bytes = frameBytes(i, slot);
      for (size_t k = 0; k < bytes; ++k) static_cast<uint8_t*>(p)[k] = pattern(i, k);
      send_->post(bytes, 0x7700000000000000ull + static_cast<uint64_t>(i));
    }
    ASSERT_EQ(send_->flush(testing::waitUpTo(30)), loomSuccess);
  });
  for (int i = 0; i < frames; ++i) {
    const void* data;
    size_t bytes = 0;
    uint64_t sig = 0;
    ASSERT_EQ(recv_->wait(&data, &bytes, &sig, testing::waitUpTo(30)), loomSuccess) << loomGetLastError(nullptr);
    ASSERT_EQ(bytes, frameBytes(i, slot)) << "frame " << i;
    ASSERT_EQ(sig, 0x7700000000000000ull + static_cast<uint64_t>(i));
    size_t wrong = 0;
    for (size_t k = 0; k < bytes; ++k) wrong += static_cast<const uint8_t*>(data)[k] != pattern(i, k);
    ASSERT_EQ(wrong, 0u) << "frame " << i << " of " << bytes << " bytes";
    recv_->release();
  }
  producer.join();
}

// Zero copy through the interface (transport.h), where the transport offers it: frames posted from the
// caller's memory (postFrom, both landings) and from slots, interleaved, arrive whole and in order;
// those the receiver copies out land in its buffer through receiveInto, the others in a slot.  The
// sender's buffers stay untouched until flush(), as the interface asks.
TEST_P(TransportContract, ZeroCopyFramesArriveWholeAndInOrder) {
  // What the transport declares (caps(), which loom-info prints) is what its queues do.
  ASSERT_EQ(transport_->caps().zeroCopy, send_->postsFromCaller() && recv_->receivesIntoCaller());
  if (!send_->postsFromCaller() || !recv_->receivesIntoCaller())
    GTEST_SKIP() << GetParam().transport << " copies through its slots (no postFrom / receiveInto)";
  const int frames = 120;
  const size_t slot = send_->slotBytes();
  // Frame i: 0 from a slot, 1 from the caller landing in the receiver's buffer, 2 from the caller
  // landing in a slot.
  auto kind = [](int i) { return i % 3; };
  std::vector<std::vector<uint8_t>> sources(frames);
  std::thread producer([&] {
    for (int i = 0; i < frames; ++i) {
      void* p;
      ASSERT_EQ(send_->acquire(&p, testing::waitUpTo(30)), loomSuccess);
      const size_t bytes = frameBytes(i, slot);
      const uint64_t sig = 0x5500000000000000ull + static_cast<uint64_t>(i);
      if (kind(i) == 0) {
        for (size_t k = 0; k < bytes; ++k) static_cast<uint8_t*>(p)[k] = pattern(i, k);
        send_->post(bytes, sig);
        continue;
      }
      sources[i].resize(bytes);
      for (size_t k = 0; k < bytes; ++k) sources[i][k] = pattern(i, k);
      send_->postFrom(sources[i].data(), bytes, sig, kind(i) == 1 ? Landing::kCaller : Landing::kSlot);
    }
    ASSERT_EQ(send_->flush(testing::waitUpTo(30)), loomSuccess);
  });
  std::vector<uint8_t> into(slot + 64);
  for (int i = 0; i < frames; ++i) {
    const size_t want = frameBytes(i, slot);
    const uint64_t wantSig = 0x5500000000000000ull + static_cast<uint64_t>(i);
    size_t bytes = 0, wrong = 0;
    uint64_t sig = 0;
    if (kind(i) == 1) {
      std::fill(into.begin(), into.end(), 0xEE);
      ASSERT_EQ(recv_->receiveInto(into.data(), slot, &bytes, &sig, testing::waitUpTo(30)), loomSuccess)
          << loomGetLastError(nullptr);
      for (size_t k = 0; k < bytes; ++k) wrong += into[k] != pattern(i, k);
      for (size_t k = bytes; k < into.size(); ++k) wrong += into[k] != 0xEE;  // nothing past the message
    } else {
      const void* data;
      ASSERT_EQ(recv_->wait(&data, &bytes, &sig, testing::waitUpTo(30)), loomSuccess) << loomGetLastError(nullptr);
      for (size_t k = 0; k < bytes; ++k) wrong += static_cast<const uint8_t*>(data)[k] != pattern(i, k);
      recv_->release();
    }
    ASSERT_EQ(bytes, want) << "frame " << i;
    ASSERT_EQ(sig, wantSig) << "frame " << i;
    ASSERT_EQ(wrong, 0u) << "frame " << i << " (kind " << kind(i) << ") of " << bytes << " bytes";
  }
  producer.join();
}

// A connection nobody uses yet costs no CPU: its threads sleep, and no library thread spins on data
// left unread.  (UCX once left its wire-up reply unread on a send queue that had sent nothing, and its
// async thread spun on the readable socket: a core's worth of CPU per idle queue.)
TEST_P(TransportContract, AnIdleConnectionCostsNoCpu) {
  auto cpuSeconds = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // connection setup settles
  const double before = cpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_LT(cpuSeconds() - before, 0.15) << "CPU seconds used in one idle second";
}

TEST_P(TransportContract, FlushMeansTheDataSurvivesTheSender) {
  // UCX drops what its receiver has not read when the sender's endpoint closes; the ucx wire's goodbye
  // handshake is what makes this hold there (without it: 282 of 300 runs under load kept the data).
  void* p;
  ASSERT_EQ(send_->acquire(&p, testing::waitUpTo(10)), loomSuccess);
  std::memcpy(p, "last words", 10);
  send_->post(10, 5);
  ASSERT_EQ(send_->flush(testing::waitUpTo(10)), loomSuccess);
  send_.reset();  // the sender is gone; what it flushed is not
  const void* data;
  size_t bytes = 0;
  uint64_t sig = 0;
  ASSERT_EQ(recv_->wait(&data, &bytes, &sig, testing::waitUpTo(10)), loomSuccess);
  EXPECT_EQ(bytes, 10u);
  EXPECT_EQ(std::memcmp(data, "last words", 10), 0);
  recv_->release();
  // The next wait learns that the peer left: a remote error well before the timeout, not a hang.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(recv_->wait(&data, &bytes, &sig, testing::waitUpTo(20)), loomRemoteError);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), timeBound(10.0));
}

TEST_P(TransportContract, ReceiverGoneIsASendError) {
  recv_.reset();
  void* p = nullptr;
  loomResult_t r = loomSuccess;
  // The sender notices within a few frames (the first ones may sit in buffers) and never hangs.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000 && r == loomSuccess; ++i) {
    r = send_->acquire(&p, testing::waitUpTo(20));
    if (r == loomSuccess) send_->post(send_->slotBytes(), 0);
    if (r == loomSuccess) r = send_->flush(testing::waitUpTo(20));
  }
  EXPECT_EQ(r, loomRemoteError) << loomGetLastError(nullptr);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), timeBound(15.0));
}

// Sends a stream of `total` bytes as slot-sized frames (one empty frame for 0 bytes), from slots or,
// where `fromCaller`, from the caller's memory; the returned bytes are what the receiver got.
void sendStream(SendQueue* send, const std::vector<uint8_t>& src, bool fromCaller, uint64_t sigBase) {
  const size_t slot = send->slotBytes();
  size_t off = 0;
  int i = 0;
  do {
    const size_t n = std::min(slot, src.size() - off);
    void* p;
    ASSERT_EQ(send->acquire(&p, testing::waitUpTo(60)), loomSuccess) << loomGetLastError(nullptr);
    if (fromCaller) {
      send->postFrom(src.data() + off, n, sigBase + i, Landing::kCaller);
    } else {
      if (n > 0) std::memcpy(p, src.data() + off, n);
      send->post(n, sigBase + i);
    }
    off += n;
    ++i;
  } while (off < src.size());
  ASSERT_EQ(send->flush(testing::waitUpTo(60)), loomSuccess) << loomGetLastError(nullptr);
}

void receiveStream(RecvQueue* recv, std::vector<uint8_t>* dst, bool intoCaller, uint64_t sigBase) {
  const size_t slot = recv->slotBytes();
  size_t off = 0;
  int i = 0;
  do {
    const size_t want = std::min(slot, dst->size() - off);
    size_t bytes = 0;
    uint64_t sig = 0;
    if (intoCaller) {
      ASSERT_EQ(recv->receiveInto(dst->data() + off, want, &bytes, &sig, testing::waitUpTo(60)), loomSuccess)
          << loomGetLastError(nullptr);
    } else {
      const void* data;
      ASSERT_EQ(recv->wait(&data, &bytes, &sig, testing::waitUpTo(60)), loomSuccess) << loomGetLastError(nullptr);
      ASSERT_LE(bytes, want);
      if (bytes > 0) std::memcpy(dst->data() + off, data, bytes);
      recv->release();
    }
    ASSERT_EQ(bytes, want) << "frame " << i;
    ASSERT_EQ(sig, sigBase + i) << "frame " << i;
    off += bytes;
    ++i;
  } while (off < dst->size());
}

// Streams from empty to 64 MB, around the slot size, through slots and (where offered) zero copy: every
// byte arrives, in order, once.
TEST_P(TransportContract, StreamsOfEverySizeArriveWhole) {
  const size_t slot = send_->slotBytes();
  const bool zeroCopy = send_->postsFromCaller() && recv_->receivesIntoCaller();
  const size_t sizes[] = {0, 1, slot - 1, slot, slot + 1, 3 * slot + 5, size_t{64} << 20};
  uint64_t sigBase = 0x3300000000000000ull;
  for (size_t total : sizes) {
    for (bool viaCaller : {false, true}) {
      if (viaCaller && !zeroCopy) continue;
      std::vector<uint8_t> src(total), dst(total, 0xEE);
      for (size_t k = 0; k < total; ++k) src[k] = pattern(static_cast<int>(total % 251), k);
      std::thread producer([&] { sendStream(send_.get(), src, viaCaller, sigBase); });
      receiveStream(recv_.get(), &dst, viaCaller, sigBase);
      producer.join();
      size_t wrong = 0;
      for (size_t k = 0; k < total; ++k) wrong += dst[k] != src[k];
      ASSERT_EQ(wrong, 0u) << total << " bytes" << (viaCaller ? " (zero copy)" : " (slots)");
      sigBase += 0x10000;
    }
  }
}

// Two senders to one receiver, which takes their frames in an irregular interleaving: each connection
// keeps its own order and bytes, whatever the other does.
TEST_P(TransportContract, InterleavedPeersKeepTheirOwnOrder) {
  std::unique_ptr<SendQueue> send2;
  std::unique_ptr<RecvQueue> recv2;
  connect(c_, b_, &send2, &recv2);
  ASSERT_TRUE(send2 && recv2);
  const int frames = 200;
  const size_t slot = send_->slotBytes();
  auto produce = [&](SendQueue* q, int who) {
    for (int i = 0; i < frames; ++i) {
      void* p;
      ASSERT_EQ(q->acquire(&p, testing::waitUpTo(30)), loomSuccess);
      const size_t bytes = frameBytes(i + who, slot);
      for (size_t k = 0; k < bytes; ++k) static_cast<uint8_t*>(p)[k] = pattern(i * 2 + who, k);
      q->post(bytes, (static_cast<uint64_t>(who) << 32) + static_cast<uint64_t>(i));
    }
    ASSERT_EQ(q->flush(testing::waitUpTo(30)), loomSuccess);
  };
  std::thread first(produce, send_.get(), 0), second(produce, send2.get(), 1);
  RecvQueue* queues[2] = {recv_.get(), recv2.get()};
  int next[2] = {0, 0};
  std::mt19937 rng(7);
  while (next[0] < frames || next[1] < frames) {
    int who = static_cast<int>(rng() % 2);
    if (next[who] == frames) who ^= 1;
    const int i = next[who]++;
    const void* data;
    size_t bytes = 0;
    uint64_t sig = 0;
    ASSERT_EQ(queues[who]->wait(&data, &bytes, &sig, testing::waitUpTo(30)), loomSuccess) << loomGetLastError(nullptr);
    ASSERT_EQ(sig, (static_cast<uint64_t>(who) << 32) + static_cast<uint64_t>(i)) << "peer " << who;
    ASSERT_EQ(bytes, frameBytes(i + who, slot)) << "peer " << who << " frame " << i;
    size_t wrong = 0;
    for (size_t k = 0; k < bytes; ++k) wrong += static_cast<const uint8_t*>(data)[k] != pattern(i * 2 + who, k);
    ASSERT_EQ(wrong, 0u) << "peer " << who << " frame " << i;
    queues[who]->release();
  }
  first.join();
  second.join();
}

// A wait that nothing will end (no frame coming, no slot freed) ends as soon as the communicator's abort
// flag is set, on both sides, not at its timeout; the abandoned send queue is then destroyed at once.
TEST_P(TransportContract, AnAbortedWaitEndsAtOnce) {
  std::atomic<bool> abort{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    abort = true;
  });
  const void* data;
  size_t bytes = 0;
  uint64_t sig = 0;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(recv_->wait(&data, &bytes, &sig, testing::waitUpTo(60, &abort)), loomSuccess);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), timeBound(5.0));
  setter.join();

  // The sender fills every slot the receiver never frees, then waits for one more until aborted.
  abort = false;
  std::thread setter2([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    abort = true;
  });
  t0 = std::chrono::steady_clock::now();
  loomResult_t r = loomSuccess;
  for (int i = 0; i < 100000 && r == loomSuccess; ++i) {
    void* p;
    r = send_->acquire(&p, testing::waitUpTo(60, &abort));
    if (r == loomSuccess) send_->post(send_->slotBytes(), 0);
  }
  EXPECT_NE(r, loomSuccess);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), timeBound(10.0));
  setter2.join();
  // What the receiver never read is dropped: the queue goes at once, not after LOOM_TIMEOUT.
  send_->abandon();
  t0 = std::chrono::steady_clock::now();
  send_.reset();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), timeBound(5.0));
}

std::vector<ContractCase> cases() {
  std::vector<ContractCase> v = {{"shm", 1, ""}, {"socket", 1, ""}, {"socket", 3, ""}};
#if LOOM_HAVE_UCX
  v.push_back({"ucx", 1, ""});
#endif
#if LOOM_HAVE_VERBS
  for (const char* device : {"roce", "iwarp", "infiniband"}) v.push_back({"ib", 1, device});
  v.push_back({"ib", 1, "iwarp", 3});  // three queue pairs, each connected through rdma_cm
  // Zero copy: writes from callers' buffers and reads into them (RoCE and InfiniBand: iWARP has no ODP).
  v.push_back({"ib", 1, "roce", 1, true});
  v.push_back({"ib", 1, "infiniband", 2, true});
#endif
  return v;
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportContract, ::testing::ValuesIn(cases()), [](const auto& p) {
  const std::string name = p.param.transport;
  if (name == "shm") return name;
  if (name == "socket") return name + "_" + std::to_string(p.param.nsocks) + "socks";
  if (name == "ib")
    return name + "_emulated_" + p.param.device + (p.param.qps > 1 ? "_" + std::to_string(p.param.qps) + "qps" : "") +
           (p.param.odp ? "_odp" : "");
  return name;
});

}  // namespace
}  // namespace loom
