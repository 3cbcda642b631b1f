// Zero copy over the network: a copy collective, a receive or a ring or tree reduction over the socket
// (and the UCX) transport moves every byte from the caller's buffer to the socket and from the socket to the
// caller's buffer, with no copy through a slot (transport.h, slotCopyBytes).  Over shared
// memory the pipelined calls go through slots, which shows that the count counts.  Every element of every
// result is checked too.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/comm.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"
#include "tests/common/reference.h"
#include "transport/transport.h"

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
// UCX over its tcp transport: frames leave from the caller's buffer and their payload lands in the
// receiver's (UCX's own copies, like the kernel's, are not ours to count).
TEST(ZeroCopy, NoSlotCopyOverUcx) { countCopies("ucx", true); }
TEST(ZeroCopy, SharedMemoryCopiesThroughSlots) { countCopies(nullptr, false); }

}  // namespace
}  // namespace loom
