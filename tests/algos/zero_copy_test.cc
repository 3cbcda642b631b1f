// Zero copy over the network: a copy collective (alltoall too), a receive or a ring or tree reduction over the socket
// (and the UCX) transport moves every byte from the caller's buffer to the socket and from the socket to the
// caller's buffer, with no copy through a slot (transport.h, slotCopyBytes).  Over shared
// memory the pipelined calls go through slots, which shows that the count counts.  Every element of every
// result is checked too.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"
#include "tests/common/reference.h"
#include "transport/transport.h"
#if LOOM_HAVE_VERBS
#include "base/params.h"
#include "transport/emulated_verbs.h"
#endif

namespace loom {
namespace {

using testing::ScopedEnv;

using testing::countWrong;
using testing::countWrongCopied;
using testing::fillInput;
using testing::runRanks;

constexpr int kRanks = 3;  // a middle rank on the broadcast chain: it receives and forwards
// 4 MB of float32 and a ragged end: many slots, both ends.  The end is larger than the 48 bytes a socket
// frame head carries (a message that small is copied out of the head, and counted).
constexpr size_t kCount = (1u << 20) + 37;

struct Call {
  const char* name;
  const char* algo;  // LOOM_ALGO for it
  // Runs the call on `rank` and returns the number of wrong elements (first one in *first).
  size_t (*run)(int rank, loomComm_t comm, std::string* first);
  // Over shared memory, whether the call crosses slots: the pipelined algorithms do; large transfers
  // (flat allgather, send/recv) are read straight from the sender's memory there too (single copy).
  bool slotsOnShm;
};

size_t broadcastOnce(int rank, loomComm_t comm, std::string* first) {
  std::vector<float> buf(kCount);
  if (rank == 0) fillInput(loomFloat32, loomSum, 0, kCount, buf.data());
  if (loomBroadcast(buf.data(), buf.data(), kCount, loomFloat32, 0, comm, nullptr) != loomSuccess) return kCount;
  return countWrongCopied(loomFloat32, loomSum, 0, 0, kCount, buf.data(), first);
}

size_t allGatherOnce(int rank, loomComm_t comm, std::string* first) {
  std::vector<float> in(kCount), out(kCount * kRanks);
  fillInput(loomFloat32, loomSum, rank, kCount, in.data());
  if (loomAllGather(in.data(), out.data(), kCount, loomFloat32, comm, nullptr) != loomSuccess) return kCount;
  size_t wrong = 0;
  for (int r = 0; r < kRanks; ++r)
    wrong += countWrongCopied(loomFloat32, loomSum, r, 0, kCount, out.data() + r * kCount, first);
  return wrong;
}

size_t allReduceOnce(int rank, loomComm_t comm, std::string* first) {
  std::vector<float> in(kCount), out(kCount);
  fillInput(loomFloat32, loomSum, rank, kCount, in.data());
  if (loomAllReduce(in.data(), out.data(), kCount, loomFloat32, loomSum, comm, nullptr) != loomSuccess) return kCount;
  return countWrong(loomFloat32, loomSum, kRanks, kCount, out.data(), first);
}

size_t allReduceInPlaceOnce(int rank, loomComm_t comm, std::string* first) {
  std::vector<float> buf(kCount);
  fillInput(loomFloat32, loomSum, rank, kCount, buf.data());
  if (loomAllReduce(buf.data(), buf.data(), kCount, loomFloat32, loomSum, comm, nullptr) != loomSuccess) return kCount;
  return countWrong(loomFloat32, loomSum, kRanks, kCount, buf.data(), first);
}

size_t reduceScatterOnce(int rank, loomComm_t comm, std::string* first) {
  std::vector<float> in(kCount * kRanks), out(kCount);
  fillInput(loomFloat32, loomSum, rank, kCount * kRanks, in.data());
  if (loomReduceScatter(in.data(), out.data(), kCount, loomFloat32, loomSum, comm, nullptr) != loomSuccess)
    return kCount;
  return testing::countWrongReduced(loomFloat32, loomSum, kRanks, rank * kCount, kCount, out.data(), first);
}

// Block p of every rank's input goes to rank p: every peer's transfer in flight at once (algos/p2p.cc).
size_t allToAllOnce(int rank, loomComm_t comm, std::string* first) {
  std::vector<float> in(kCount * kRanks), out(kCount * kRanks);
  fillInput(loomFloat32, loomSum, rank, kCount * kRanks, in.data());
  if (loomAllToAll(in.data(), out.data(), kCount, loomFloat32, comm, nullptr) != loomSuccess) return kCount;
  size_t wrong = 0;
  for (int p = 0; p < kRanks; ++p)
    wrong += countWrongCopied(loomFloat32, loomSum, p, rank * kCount, kCount, out.data() + p * kCount, first);
  return wrong;
}

// Rank 0 sends rank 1 its input; the others take no part.
size_t sendRecvOnce(int rank, loomComm_t comm, std::string* first) {
  std::vector<float> buf(kCount);
  if (rank == 0) {
    fillInput(loomFloat32, loomSum, 0, kCount, buf.data());
    return loomSend(buf.data(), kCount, loomFloat32, 1, comm, nullptr) == loomSuccess ? 0 : kCount;
  }
  if (rank != 1) return 0;
  if (loomRecv(buf.data(), kCount, loomFloat32, 0, comm, nullptr) != loomSuccess) return kCount;
  return countWrongCopied(loomFloat32, loomSum, 0, 0, kCount, buf.data(), first);
}

const std::vector<Call>& calls() {
  static const std::vector<Call> v = {
      {"broadcast (chain)", "ring", broadcastOnce, true},
      {"allgather (ring)", "ring", allGatherOnce, true},
      {"allgather (flat)", "flat", allGatherOnce, false},
      {"allreduce (ring, out of place)", "ring", allReduceOnce, true},
      {"allreduce (ring, in place)", "ring", allReduceInPlaceOnce, true},
      {"allreduce (tree)", "tree", allReduceOnce, true},
      {"reducescatter (ring)", "ring", reduceScatterOnce, true},
      {"alltoall", "", allToAllOnce, false},
      {"send/recv", "", sendRecvOnce, false},
  };
  return v;
}

// Runs every call on kRanks ranks over `net` (nullptr: shared memory) and checks each rank's slot
// copies: none at all over the network (expectZero), some for the calls that cross slots on shm.
void countCopies(const char* net, bool expectZero) {
  ScopedEnv env;
  if (net != nullptr) {
    env.set("LOOM_SHM_DISABLE", "1");
    env.set("LOOM_NET", net);
  }
  for (const Call& call : calls()) {
    env.set("LOOM_ALGO", call.algo);
    runRanks(kRanks, [&](int rank, loomComm_t comm) {
      // A first call makes the connections and warms up; the count covers the second.
      std::string first;
      ASSERT_EQ(call.run(rank, comm, &first), 0u) << call.name << " (first call): " << first;
      const uint64_t before = slotCopyBytes().load();
      ASSERT_EQ(call.run(rank, comm, &first), 0u) << call.name << ": " << first;
      const uint64_t copied = slotCopyBytes().load() - before;
      if (expectZero || !call.slotsOnShm)
        EXPECT_EQ(copied, 0u) << call.name << " on rank " << rank << ": " << copied << " bytes went through a slot";
      else
        EXPECT_GT(copied, 0u) << call.name << " on rank " << rank << ": over shared memory the data crosses a slot";
    }, 600);
  }
}

TEST(ZeroCopy, NoSlotCopyOverSockets) { countCopies("socket", true); }
#if LOOM_HAVE_VERBS
// The verbs transport on the emulated device (this machine has no RDMA NIC) with implicit on-demand
// paging: frames leave from the caller's buffer by RDMA WRITE and land in the receiver's by RDMA READ.
// The emulated device is one per process, so the ranks are threads of one forked process here.  Besides
// no slot copy, the device moved each byte once per hop: for the calls whose hops are easy to count
// (`hops` payloads of kCount floats), what it moved is that plus frame headers, credits and
// notifications (at most 1%).
TEST(ZeroCopy, NoSlotCopyOverEmulatedIbWithOnDemandPaging) {
  const auto outcomes = testing::forkRanks(1, [](int) {
    emulated::Options nic;
    nic.odp = emulated::Options::Odp::kImplicit;
    emulated::install(nic);
    testing::setInForkedRank("LOOM_NET", "ib");
    testing::setInForkedRank("LOOM_SHM_DISABLE", "1");
    // The ragged end (37 floats) is read too: by default a piece under 16 KB is written into the
    // receiver's slot and copied out there (a read round trip costs more than that copy on a real NIC).
    testing::setInForkedRank("LOOM_IB_READ_MIN", "64");
    const std::map<std::string, int> hops = {{"broadcast (chain)", 2}, {"allgather (ring)", kRanks * (kRanks - 1)},
                                             {"allreduce (ring, out of place)", 2 * (kRanks - 1)}, {"send/recv", 1}};
    for (const Call& call : calls()) {
      testing::setInForkedRank("LOOM_ALGO", call.algo);
      paramsReloadForTesting();
      std::vector<loomComm_t> comms(kRanks, nullptr);
      if (loomCommInitAll(comms.data(), kRanks, nullptr) != loomSuccess)
        return std::fprintf(stderr, "%s: init: %s\n", call.name, loomGetLastError(nullptr)), 2;
      // Every rank runs the call on its own thread; a first round makes the connections and warms up.
      std::vector<size_t> wrong(kRanks, 0);
      std::vector<std::string> first(kRanks);
      auto round = [&] {
        std::vector<std::thread> threads;
        for (int r = 0; r < kRanks; ++r)
          threads.emplace_back([&, r] { wrong[r] += call.run(r, comms[r], &first[r]); });
        for (auto& t : threads) t.join();
      };
      round();
      const uint64_t copiedBefore = slotCopyBytes().load(), movedBefore = emulated::bytesMoved();
      const uint64_t readsBefore = emulated::reads();
      round();
      const uint64_t copied = slotCopyBytes().load() - copiedBefore, moved = emulated::bytesMoved() - movedBefore;
      const uint64_t reads = emulated::reads() - readsBefore;
      for (loomComm_t c : comms) loomCommDestroy(c);
      for (int r = 0; r < kRanks; ++r)
        if (wrong[r] != 0) return std::fprintf(stderr, "%s, rank %d: %s\n", call.name, r, first[r].c_str()), 3;
      if (copied != 0) return std::fprintf(stderr, "%s: %llu bytes went through a slot\n", call.name,
                                           static_cast<unsigned long long>(copied)), 4;
      // Reduce-scatter's frames are all reduced on arrival (written into the receiver's slot, from the
      // sender's: no caller buffer at either end); every other call lands some in a caller's buffer.
      const bool landsInCallers = std::string(call.name) != "reducescatter (ring)";
      if (landsInCallers && reads == 0) return std::fprintf(stderr, "%s: no byte was read from a sender's buffer\n", call.name), 5;
      auto it = hops.find(call.name);
      if (it == hops.end()) continue;
      const uint64_t payload = uint64_t{static_cast<uint64_t>(it->second)} * kCount * sizeof(float);
      if (moved < payload || moved > payload + payload / 100)
        return std::fprintf(stderr, "%s: the device moved %llu bytes for %llu of payload\n", call.name,
                            static_cast<unsigned long long>(moved), static_cast<unsigned long long>(payload)), 6;
    }
    return 0;
  }, testing::timeBound(300));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}
#endif
// UCX over its tcp transport: frames leave from the caller's buffer and their payload lands in the
// receiver's (UCX's own copies, like the kernel's, are not ours to count).
TEST(ZeroCopy, NoSlotCopyOverUcx) { countCopies("ucx", true); }
TEST(ZeroCopy, SharedMemoryCopiesThroughSlots) { countCopies(nullptr, false); }

}  // namespace
}  // namespace loom
