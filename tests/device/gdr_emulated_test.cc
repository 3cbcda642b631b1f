// GPUDirect RDMA on emulated hardware: the emulated GPU (tests/device/emulated_device.h: device memory
// the host cannot touch) and the emulated verbs device (tests/transport/emulated_verbs.h), which
// registers the GPU's memory from its dma-buf and reads and writes it the way a NIC does.  There is no
// GPU and no RDMA NIC on this machine: every test here is named Emulated.
//
// What they show: a direct frame carries a GPU buffer to another GPU buffer by one RDMA READ with no
// host copy (a host access to device memory would kill the test with SIGSEGV), sends, receives and
// alltoall on device buffers take that path when the topology puts the GPU and the NIC within
// LOOM_NET_GDR_LEVEL and are staged otherwise, and an end that stages still meets an end that does not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm.h"
#include "base/params.h"
#include "device_runtime/device_api.h"
#include "loom.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"
#include "tests/common/reference.h"
#include "tests/common/wait_context.h"
#include "tests/device/emulated_device.h"
#include "transport/emulated_verbs.h"
#include "transport/ib/ib_transport.h"

// A check inside a forked rank, which returns its exit code: a failed one says what failed (stderr, which
// the harness shows beside the code) before the rank returns `code`.
#define FAIL_IF(cond, code)                                                                     \
  do {                                                                                          \
    if (cond) {                                                                                 \
      std::fprintf(stderr, "%s:%d: failed (exit %d): %s\n", __FILE__, __LINE__, code, #cond); \
      return code;                                                                              \
    }                                                                                           \
  } while (0)

namespace {

using loom::testing::EmulatedDevice;
using loom::testing::forkRanks;
using loom::testing::timeBound;

constexpr const char* kGpuBus = "0000:11:00.0";

// One host: a GPU and an RDMA NIC behind one PCIe switch (PIX: within the default LOOM_NET_GDR_LEVEL).
constexpr const char* kTopology = R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85" cores="2">
    <pci busid="0000:10:00.0" class="0x060400" vendor="0x1000" device="0xc010" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" vendor="0x10de" device="0x20b2" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="80" rank="0" gdr="1"/>
      </pci>
      <pci busid="0000:12:00.0" class="0x020700" vendor="0x15b3" device="0x101b" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="emu_rxe0" dev="0" speed="100000" port="1" gdr="1" link_layer="RoCE"/>
        </nic>
      </pci>
    </pci>
  </cpu>
</system>
)";

// The emulated GPU and RDMA device of this (forked) process, and the environment that sends two ranks of
// one process over the ib transport as if they were on two hosts.
EmulatedDevice& setUp(const char* gdrLevel, const loom::emulated::Options& nic = {}) {
  static EmulatedDevice* dev = [] {
    auto* d = new EmulatedDevice;  // outlives the communicators, whose staging buffers it frees
    d->setBusId(kGpuBus);
    loom::installDeviceApi(d);
    return d;
  }();
  loom::emulated::install(nic);
  const std::string topo = "/tmp/loom-gdr-topo-" + std::to_string(getpid()) + ".xml";
  FILE* f = std::fopen(topo.c_str(), "w");
  if (f == nullptr || std::fputs(kTopology, f) < 0 || std::fclose(f) != 0) std::abort();
  // Only ever called in a forked rank (forkRanks): the settings die with it.
  loom::testing::setInForkedRank("LOOM_TOPO_FILE", topo.c_str());
  loom::testing::setInForkedRank("LOOM_NET", "ib");
  loom::testing::setInForkedRank("LOOM_SHM_DISABLE", "1");
  loom::testing::setInForkedRank("LOOM_DEVICE_P2P", "0");  // not the same-host CUDA IPC path: the network one
  if (gdrLevel != nullptr) loom::testing::setInForkedRank("LOOM_NET_GDR_LEVEL", gdrLevel);
  loom::paramsReloadForTesting();
  return *dev;
}

// Fills a buffer (device or host) with a pattern of `salt`, and checks one.
void fill(EmulatedDevice& dev, void* p, size_t bytes, int salt) {
  auto* b = static_cast<unsigned char*>(dev.view(p));
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>((i * 131 + static_cast<size_t>(salt)) % 251);
}
bool holds(EmulatedDevice& dev, const void* p, size_t bytes, int salt) {
  const auto* b = static_cast<const unsigned char*>(dev.view(p));
  for (size_t i = 0; i < bytes; ++i)
    if (b[i] != static_cast<unsigned char>((i * 131 + static_cast<size_t>(salt)) % 251)) return false;
  return true;
}

// Runs fn(rank, comm) on n ranks of this process (a thread each) and returns the first failure.
template <typename Fn>
int someRanks(int n, Fn fn) {
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  if (loomCommInitAll(comms.data(), n, nullptr) != loomSuccess) {
    std::fprintf(stderr, "init: %s\n", loomGetLastError(nullptr));
    return 2;
  }
  std::vector<int> status(static_cast<size_t>(n), 0);
  std::vector<std::thread> others;
  for (int r = 1; r < n; ++r) others.emplace_back([&, r] { status[r] = fn(r, comms[r]); });
  status[0] = fn(0, comms[0]);
  for (auto& t : others) t.join();
  for (loomComm_t c : comms) loomCommDestroy(c);
  for (int st : status)
    if (st != 0) return st;
  return 0;
}
template <typename Fn>
int twoRanks(Fn fn) {
  return someRanks(2, fn);
}

// Broadcast from `bcastRoot` and reduce (sum, avg, max; in and out of place at the root) to `reduceRoot`
// of `count` floats on device buffers (host buffers where `onHost`), against the reference.
int chainCalls(EmulatedDevice& dev, int rank, int n, loomComm_t comm, size_t count, int bcastRoot, int reduceRoot,
               bool onHost = false) {
  const size_t bytes = count * sizeof(float);
  auto alloc = [&] { return onHost ? std::malloc(bytes) : dev.deviceAlloc(bytes); };
  auto release = [&](void* p) { onHost ? std::free(p) : dev.deviceFree(p); };
  void* buf = alloc();
  fill(dev, buf, bytes, rank == bcastRoot ? 5 : 77);
  if (loomBroadcast(buf, buf, count, loomFloat32, bcastRoot, comm, nullptr) != loomSuccess)
    return std::fprintf(stderr, "broadcast: %s\n", loomGetLastError(comm)), 80;
  if (!holds(dev, buf, bytes, 5)) return std::fprintf(stderr, "broadcast: rank %d holds the wrong data\n", rank), 81;
  for (const loomRedOp_t op : {loomSum, loomAvg, loomMax}) {
    for (const bool inPlace : {false, true}) {
      void* out = inPlace ? buf : alloc();
      loom::testing::fillInput(loomFloat32, op, rank, count, dev.view(buf));
      if (loomReduce(buf, out, count, loomFloat32, op, reduceRoot, comm, nullptr) != loomSuccess)
        return std::fprintf(stderr, "reduce: %s\n", loomGetLastError(comm)), 82;
      std::string first;
      if (rank == reduceRoot && loom::testing::countWrong(loomFloat32, op, n, count, dev.view(out), &first) != 0)
        return std::fprintf(stderr, "reduce op %d%s: %s\n", static_cast<int>(op), inPlace ? " in place" : "",
                            first.c_str()), 83;
      if (!inPlace) release(out);
    }
  }
  release(buf);
  return 0;
}

// One ib connection on the installed (emulated) device: rank 0 sends, rank 1 receives.
struct OneConnection {
  loom::IbTransport ib;
  loom::PeerInfo a{}, b{};
  std::unique_ptr<loom::RecvQueue> recv;
  std::unique_ptr<loom::SendQueue> send;
  bool open() {
    const uint64_t key = 0x6d00000000000000ull ^ static_cast<uint64_t>(getpid());
    loom::ConnectInfo ci{};
    loom::ConnectRequest atReceiver{1, 0, 0, key, &b, &a}, atSender{0, 1, 0, key, &a, &b};
    return ib.createRecv(atReceiver, &ci, &recv) == loomSuccess && ib.connectSend(atSender, ci, &send) == loomSuccess;
  }
  ~OneConnection() {
    send.reset();  // the sender first: it waits for nothing the receiver still holds
    recv.reset();
  }
};

// A rank's GPU is the one current when it joins (as in NCCL): the communicator places it there, and its
// NIC is the one nearest that GPU.
TEST(GdrEmulated, RanksArePlacedOnTheirCurrentGpu) {
  auto outcomes = forkRanks(1, [](int) {
    setUp(nullptr);
    return twoRanks([](int rank, loomComm_t comm) {
      const loom::Cluster& c = *comm->cluster;
      FAIL_IF(!c.isGpu(rank), 60);
      const loom::TopoSystem& s = c.sys(rank);
      FAIL_IF(s.nodes[c.ranks[rank].device].busId != kGpuBus, 61);
      FAIL_IF(c.ranks[rank].nic < 0 || s.nodes[c.ranks[rank].nic].busId != "0000:12:00.0", 62);
      return 0;
    });
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// A frame from device memory to device memory: the receiver reads the sender's GPU buffer with one RDMA
// READ, both registered from their dma-bufs.  The queues alone, no communicator; RoCE (queue pairs
// connected by attributes) and iWARP (through rdma_cm, the read's sink registered for remote writes).
class GdrEmulatedNic : public ::testing::TestWithParam<bool> {};

TEST_P(GdrEmulatedNic, DirectFrameMovesGpuMemoryByRdmaRead) {
  const bool iwarp = GetParam();
  auto outcomes = forkRanks(1, [iwarp](int) {
    loom::emulated::Options nic;
    nic.iwarp = iwarp;
    EmulatedDevice& dev = setUp(nullptr, nic);
    OneConnection c;
    FAIL_IF(!c.open(), 2);
    auto& send = c.send;
    auto& recv = c.recv;
    const size_t bytes = 3 * 1024 * 1024 + 5;  // larger than any slot
    void* src = dev.deviceAlloc(bytes);
    void* dst = dev.deviceAlloc(bytes);
    FAIL_IF(!send->canPostDirectFrom(src, bytes) || !recv->canReadDirectInto(dst, bytes), 3);
    fill(dev, src, bytes, 7);
    void* slot = nullptr;
    FAIL_IF(send->acquire(&slot, loom::testing::waitUpTo(20)) != loomSuccess, 4);
    send->postDirect(src, bytes, 99);
    const void* data = nullptr;
    size_t got = 0;
    uint64_t signature = 0;
    FAIL_IF(recv->wait(&data, &got, &signature, loom::testing::waitUpTo(20)) != loomSuccess, 5);
    FAIL_IF(!recv->isDirect() || got != bytes || signature != 99 || data != nullptr, 6);
    FAIL_IF(send->directDone(), 7);  // not before the receiver has read it
    FAIL_IF(recv->readDirect(dst, loom::testing::waitUpTo(20)) != loomSuccess, 8);
    recv->release();
    FAIL_IF(send->waitDirectDone(loom::testing::waitUpTo(20)) != loomSuccess || !send->directDone(), 9);
    FAIL_IF(!holds(dev, dst, bytes, 7), 10);
    FAIL_IF(loom::emulated::reads() != 1 || loom::emulated::dmabufRegistrations() != 2, 11);
    return 0;
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

INSTANTIATE_TEST_SUITE_P(Emulated, GdrEmulatedNic, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "iwarp" : "roce"; });

// A registration pins its GPU allocation: once the application frees the allocation, its registration
// goes when the next one is made (not only when the cache evicts it); live allocations stay registered.
TEST(GdrEmulated, AFreedGpuBufferIsUnregisteredBeforeTheNextRegistration) {
  auto outcomes = forkRanks(1, [](int) {
    EmulatedDevice& dev = setUp(nullptr, loom::emulated::Options{});
    OneConnection c;
    FAIL_IF(!c.open(), 2);
    const size_t bytes = 1 << 20;
    void* freed = dev.deviceAlloc(bytes);
    void* kept = dev.deviceAlloc(bytes);
    FAIL_IF(!c.send->canPostDirectFrom(freed, bytes) || !c.send->canPostDirectFrom(kept, bytes), 3);
    FAIL_IF(loom::emulated::dmabufRegionsNow() != 2, 4);
    dev.deviceFree(freed);
    void* fresh = dev.deviceAlloc(bytes);  // may reuse the freed address: a new allocation all the same
    FAIL_IF(!c.send->canPostDirectFrom(fresh, bytes), 5);
    FAIL_IF(loom::emulated::dmabufRegionsNow() != 2, 6);  // kept and fresh; the freed one is gone
    FAIL_IF(!c.send->canPostDirectFrom(kept, bytes) || loom::emulated::dmabufRegistrations() != 3, 7);
    return 0;
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// Without a GPU runtime the ib queues do not offer device memory (and a call with device buffers could
// not exist).
TEST(GdrEmulated, NoGpuRuntimeNoDirectFromDevice) {
  auto outcomes = forkRanks(1, [](int) {
    // Not the CUDA runtime either, where a GPU is present.
    loom::testing::setInForkedRank("LOOM_CUDA", "0");
    loom::paramsReloadForTesting();
    loom::emulated::install(loom::emulated::Options{});
    loom::installDeviceApi(nullptr);
    OneConnection c;
    FAIL_IF(!c.open(), 2);
    auto& send = c.send;
    int device = 0;  // an address the transport must not take for device memory
    return send->canPostDirectFrom(&device, sizeof device) || c.recv->canReadDirectInto(&device, sizeof device) ? 3 : 0;
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// Allreduce (every op, out of place and in place, a count that two ranks do not split evenly) and
// reduce-scatter on device buffers, against the reference.
int reductions(EmulatedDevice& dev, int rank, loomComm_t comm) {
  const size_t count = 100003;
  for (int o = 0; o < loomNumOps; ++o) {
    const auto op = static_cast<loomRedOp_t>(o);
    for (const bool inPlace : {false, true}) {
      void* in = dev.deviceAlloc(count * sizeof(float));
      void* out = inPlace ? in : dev.deviceAlloc(count * sizeof(float));
      loom::testing::fillInput(loomFloat32, op, rank, count, dev.view(in));
      if (loomAllReduce(in, out, count, loomFloat32, op, comm, nullptr) != loomSuccess)
        return std::fprintf(stderr, "allreduce: %s\n", loomGetLastError(comm)), 70;
      std::string first;
      if (loom::testing::countWrong(loomFloat32, op, 2, count, dev.view(out), &first) != 0)
        return std::fprintf(stderr, "allreduce op %d%s: %s\n", o, inPlace ? " in place" : "", first.c_str()), 71;
      dev.deviceFree(in);
      if (!inPlace) dev.deviceFree(out);
    }
  }
  // Reduce-scatter: rank r's output is block r of the sum of every rank's input.
  const size_t block = 50001;
  void* in = dev.deviceAlloc(2 * block * sizeof(int32_t));
  void* out = dev.deviceAlloc(block * sizeof(int32_t));
  auto* v = static_cast<int32_t*>(dev.view(in));
  for (size_t i = 0; i < 2 * block; ++i) v[i] = static_cast<int32_t>(i) * (rank + 1);
  if (loomReduceScatter(in, out, block, loomInt32, loomSum, comm, nullptr) != loomSuccess)
    return std::fprintf(stderr, "reducescatter: %s\n", loomGetLastError(comm)), 72;
  const auto* o = static_cast<const int32_t*>(dev.view(out));
  for (size_t i = 0; i < block; ++i)
    FAIL_IF(o[i] != static_cast<int32_t>(rank * block + i) * 3, 73);
  dev.deviceFree(in), dev.deviceFree(out);
  return 0;
}

// Send, receive (alone and grouped), alltoall, allgather, allreduce and reduce-scatter on device buffers
// between two ranks whose GPU and NIC share a PCIe switch: GPUDirect RDMA (RDMA READs, reductions on
// the device, nothing staged through host memory).  With LOOM_NET_GDR_LEVEL=LOC the
// same calls are staged (pinned host buffers, no READ).  Results exact either way.
void gpuBufferCalls(const char* gdrLevel, bool expectGdr) {
  auto outcomes = forkRanks(1, [=](int) {
    EmulatedDevice& dev = setUp(gdrLevel);
    // In the forked rank; allgather must still run flat where every rank uses GPUDirect RDMA.
    loom::testing::setInForkedRank("LOOM_ALGO", "ring");
    loom::paramsReloadForTesting();
    const size_t count = 300000;  // 1.2 MB of int32: several slots
    const int status = twoRanks([&](int rank, loomComm_t comm) {
      const size_t bytes = count * sizeof(int32_t);
      void* mine = dev.deviceAlloc(bytes);
      fill(dev, mine, bytes, 10 + rank);
      void* theirs = dev.deviceAlloc(bytes);
      // Rank 0 sends first, rank 1 receives first: one exchange each way.
      loomResult_t r = rank == 0 ? loomSend(mine, count, loomInt32, 1, comm, nullptr)
                                 : loomRecv(theirs, count, loomInt32, 0, comm, nullptr);
      if (r == loomSuccess)
        r = rank == 0 ? loomRecv(theirs, count, loomInt32, 1, comm, nullptr)
                      : loomSend(mine, count, loomInt32, 0, comm, nullptr);
      if (r != loomSuccess) return std::fprintf(stderr, "send/recv: %s\n", loomGetLastError(comm)), 20;
      FAIL_IF(!holds(dev, theirs, bytes, 11 - rank), 21);
      // The same exchange as one group (both at once, as batched isend/irecv do).
      fill(dev, theirs, bytes, 99);
      loomGroupStart();
      loomSend(mine, count, loomInt32, 1 - rank, comm, nullptr);
      loomRecv(theirs, count, loomInt32, 1 - rank, comm, nullptr);
      if (loomGroupEnd() != loomSuccess) return std::fprintf(stderr, "group: %s\n", loomGetLastError(comm)), 27;
      FAIL_IF(!holds(dev, theirs, bytes, 11 - rank), 28);
      // Alltoall: block p of the output is rank p's block for me.
      const size_t block = 100001;
      void* in = dev.deviceAlloc(2 * block * sizeof(int32_t));
      void* out = dev.deviceAlloc(2 * block * sizeof(int32_t));
      auto* v = static_cast<int32_t*>(dev.view(in));
      for (size_t i = 0; i < 2 * block; ++i) v[i] = static_cast<int32_t>(rank * 1000000 + static_cast<int>(i));
      if (loomAllToAll(in, out, block, loomInt32, comm, nullptr) != loomSuccess)
        return std::fprintf(stderr, "alltoall: %s\n", loomGetLastError(comm)), 22;
      const auto* o = static_cast<const int32_t*>(dev.view(out));
      for (int p = 0; p < 2; ++p)
        for (size_t i = 0; i < block; ++i)
          FAIL_IF(o[static_cast<size_t>(p) * block + i] != p * 1000000 + static_cast<int>(rank * block + i), 23);
      // Allgather, out of place and in place: block p of the output is rank p's input.
      for (const bool inPlace : {false, true}) {
        auto* gathered = static_cast<int32_t*>(dev.view(out));
        auto* input = inPlace ? static_cast<int32_t*>(out) + rank * block : static_cast<int32_t*>(in);
        auto* inputView = static_cast<int32_t*>(dev.view(input));
        for (size_t i = 0; i < block; ++i) inputView[i] = static_cast<int32_t>(rank * 7000000 + static_cast<int>(i));
        if (loomAllGather(input, out, block, loomInt32, comm, nullptr) != loomSuccess)
          return std::fprintf(stderr, "allgather: %s\n", loomGetLastError(comm)), 25;
        for (int p = 0; p < 2; ++p)
          for (size_t i = 0; i < block; ++i)
            FAIL_IF(gathered[static_cast<size_t>(p) * block + i] != p * 7000000 + static_cast<int>(i), 26);
      }
      dev.deviceFree(mine), dev.deviceFree(theirs), dev.deviceFree(in), dev.deviceFree(out);
      if (int bad = reductions(dev, rank, comm)) return bad;
      if (int bad = chainCalls(dev, rank, 2, comm, 100003, 1, 0)) return bad;
      // Staging buffers live as long as the communicator: none on the GPUDirect path.
      return (dev.pinnedLive() == 0) == expectGdr ? 0 : 24;
    });
    if (status != 0) return status;
    const bool read = loom::emulated::reads() > 0, registered = loom::emulated::dmabufRegistrations() > 0;
    std::fprintf(stderr, "reads %llu, dma-buf registrations %llu, staging buffers %d\n",
                 static_cast<unsigned long long>(loom::emulated::reads()),
                 static_cast<unsigned long long>(loom::emulated::dmabufRegistrations()), dev.pinnedLive());
    if (expectGdr) return read && registered ? 0 : 30;
    return !read && !registered ? 0 : 31;
  }, timeBound(120));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

TEST(GdrEmulated, CallsOnGpuBuffersGoOverGpuDirectRdmaWhereTheTopologyAllows) {
  gpuBufferCalls(nullptr, true);
}

TEST(GdrEmulated, GpuAndNicFartherThanTheGdrLevelAreStaged) { gpuBufferCalls("LOC", false); }

// Broadcast and reduce along a chain of four ranks (the middle ones pass on what they receive, and add
// to it on the GPU), in several chunks (9 MB: three of 4 MB), roots inside the chain: over GPUDirect
// RDMA (each chunk read where it lies), nothing staged, results exact.
TEST(GdrEmulated, BroadcastAndReduceRunAlongAChainOfTransfers) {
  auto outcomes = forkRanks(1, [](int) {
    EmulatedDevice& dev = setUp(nullptr);
    const int n = 4;
    const int status = someRanks(n, [&](int rank, loomComm_t comm) {
      if (int bad = chainCalls(dev, rank, n, comm, (size_t{9} << 20) / sizeof(float) + 3, 1, 2)) return bad;
      return dev.pinnedLive() == 0 ? 0 : 84;
    });
    if (status != 0) return status;
    std::fprintf(stderr, "reads %llu, dma-buf registrations %llu\n",
                 static_cast<unsigned long long>(loom::emulated::reads()),
                 static_cast<unsigned long long>(loom::emulated::dmabufRegistrations()));
    // Every chunk a rank receives is one RDMA READ: 3 chunks x 3 receiving ranks x 7 calls.
    return loom::emulated::reads() == 3 * 3 * 7 ? 0 : 85;
  }, timeBound(120));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// A GPU buffer the NIC cannot register (the driver exports no dma-buf and no peer-memory module lets the
// NIC pin the device address) is staged, not failed.
TEST(GdrEmulated, GpuBufferTheNicCannotRegisterIsStaged) {
  auto outcomes = forkRanks(1, [](int) {
    EmulatedDevice& dev = setUp(nullptr);
    dev.refuseDmabuf(true);
    const size_t count = 100000, bytes = count * sizeof(int32_t);
    const int status = twoRanks([&](int rank, loomComm_t comm) {
      void* gpu = dev.deviceAlloc(bytes);
      if (rank == 0) fill(dev, gpu, bytes, 5);
      const loomResult_t r = rank == 0 ? loomSend(gpu, count, loomInt32, 1, comm, nullptr)
                                       : loomRecv(gpu, count, loomInt32, 0, comm, nullptr);
      const bool ok = r == loomSuccess && holds(dev, gpu, bytes, 5) && dev.pinnedLive() > 0;
      if (r != loomSuccess) std::fprintf(stderr, "rank %d: %s\n", rank, loomGetLastError(comm));
      dev.deviceFree(gpu);
      return ok ? 0 : 50;
    });
    if (status != 0) return status;
    return loom::emulated::reads() == 0 && loom::emulated::dmabufRegistrations() == 0 ? 0 : 51;
  }, timeBound(120));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// Where every rank may use GPUDirect RDMA every rank runs allreduce over transfers, whatever its
// buffers: a rank with GPU buffers (reducing on the device) and one with host buffers (on the CPU)
// reduce together.
TEST(GdrEmulated, AGpuRankAndAHostRankReduceTogether) {
  auto outcomes = forkRanks(1, [](int) {
    EmulatedDevice& dev = setUp(nullptr);
    return twoRanks([&](int rank, loomComm_t comm) {
      const size_t count = 70001;
      std::vector<int64_t> host(count);
      void* buf = rank == 0 ? dev.deviceAlloc(count * sizeof(int64_t)) : host.data();
      loom::testing::fillInput(loomInt64, loomMax, rank, count, dev.view(buf));
      loomResult_t r = loomAllReduce(buf, buf, count, loomInt64, loomMax, comm, nullptr);
      if (r != loomSuccess) std::fprintf(stderr, "rank %d: %s\n", rank, loomGetLastError(comm));
      const bool ok = r == loomSuccess && loom::testing::countWrong(loomInt64, loomMax, 2, count, dev.view(buf), nullptr) == 0;
      if (rank == 0) dev.deviceFree(buf);
      return ok ? 0 : 80;
    });
  }, timeBound(120));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// The same with one rank of three on host buffers, in the middle of the chain and at its ends: every
// rank still runs the chain of transfers (the choice is the communicator's), and results are exact.
TEST(GdrEmulated, AHostRankInAChainOfGpuRanks) {
  auto outcomes = forkRanks(1, [](int) {
    EmulatedDevice& dev = setUp(nullptr);
    return someRanks(3, [&](int rank, loomComm_t comm) {
      for (const int roots : {0, 1, 2})
        if (int bad = chainCalls(dev, rank, 3, comm, 1000003, roots, (roots + 1) % 3, rank == 1)) return bad;
      return 0;
    });
  }, timeBound(120));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

// The ends decide alone: a GPU buffer sent over GPUDirect RDMA into a host buffer (read into registered
// host memory), and a host buffer's ordinary frames received into a GPU buffer (copied in by the copy
// engine).
TEST(GdrEmulated, AGpuEndMeetsAHostEnd) {
  auto outcomes = forkRanks(1, [](int) {
    EmulatedDevice& dev = setUp(nullptr);
    const size_t count = 200003;
    const int status = twoRanks([&](int rank, loomComm_t comm) {
      const size_t bytes = count * sizeof(int32_t);
      std::vector<char> host(bytes);
      void* gpu = dev.deviceAlloc(bytes);
      loomResult_t r;
      if (rank == 0) {  // GPU -> host, then GPU <- host
        fill(dev, gpu, bytes, 3);
        r = loomSend(gpu, count, loomInt32, 1, comm, nullptr);
        if (r == loomSuccess) r = loomRecv(gpu, count, loomInt32, 1, comm, nullptr);
        if (r == loomSuccess && !holds(dev, gpu, bytes, 4)) r = loomInternalError;
      } else {  // host <- GPU, then host -> GPU
        r = loomRecv(host.data(), count, loomInt32, 0, comm, nullptr);
        if (r == loomSuccess && !holds(dev, host.data(), bytes, 3)) r = loomInternalError;
        fill(dev, host.data(), bytes, 4);
        if (r == loomSuccess) r = loomSend(host.data(), count, loomInt32, 0, comm, nullptr);
      }
      dev.deviceFree(gpu);
      if (r != loomSuccess) std::fprintf(stderr, "rank %d: %s\n", rank, loomGetLastError(comm));
      FAIL_IF(r != loomSuccess, 40);
      return dev.pinnedLive() == 0 ? 0 : 41;  // nothing staged
    });
    if (status != 0) return status;
    return loom::emulated::reads() == 1 ? 0 : 42;  // the GPU's send, read into the host buffer
  }, timeBound(120));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

}  // namespace
