// loomCommInitRankScalable: several roots share the rendezvous, each meeting a block of the ranks, and
// the communicator they make is the one loomCommInitRank would (every rank in, each at its place).
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/unique_id.h"
#include "loom.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"

namespace {

using loom::testing::forkRanks;

// Whether some socket of this machine listens on `port` (/proc/net/tcp and tcp6: state 0A).
bool listening(unsigned port) {
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string sl, local, remote, state, line;
    std::getline(f, line);  // the header
    while (f >> sl >> local >> remote >> state) {
      if (state == "0A" && local.size() >= 5 && local.compare(local.size() - 5, 5, want) == 0) return true;
      std::getline(f, line);
    }
  }
  return false;
}

// 5 ranks over 2 roots (blocks of 2 and 3) and over 5 (a rank each): count, rank and an allreduce
// whose sum only comes out with every rank in, each contributing its own rank.
TEST(ScalableInit, RootsShareTheRendezvous) {
  for (int nId : {2, 5}) {
    std::vector<loomUniqueId> ids(static_cast<size_t>(nId));
    for (loomUniqueId& id : ids) ASSERT_EQ(loomGetUniqueId(&id), loomSuccess) << loomGetLastError(nullptr);
    auto outcomes = forkRanks(5, [&](int rank) {
      loomComm_t comm;
      if (loomCommInitRankScalable(&comm, 5, rank, nId, ids.data(), nullptr) != loomSuccess) return 3;
      int count = 0, me = -1;
      loomCommCount(comm, &count);
      loomCommUserRank(comm, &me);
      float x = static_cast<float>(rank + 1);
      const bool summed = loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comm, nullptr) == loomSuccess;
      loomCommDestroy(comm);
      if (!summed) return 4;
      return count == 5 && me == rank && x == 15.0f ? 0 : 5;
    }, 60);
    for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << "nId " << nId << ": " << o.describe();
  }
}

// A rank of the second block never comes: every rank that did fails within the timeouts, none hangs,
// and the rank whose root waited for it names it.  The roots (3 s of LOOM_TIMEOUT) run in a process of
// their own, forked like the ranks, so that this test process never changes its parameters while a
// root thread may read them.
TEST(ScalableInit, AMissingRankFailsEveryRankNamingIt) {
  struct Shared {
    std::atomic<int> ready;
    loomUniqueId ids[2];
  };
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) Shared{};
  auto outcomes = forkRanks(4, [&](int rank) {
    if (rank == 3) {  // not rank 3 of the job (which never comes): the process of the two roots
      loom::testing::setInForkedRank("LOOM_TIMEOUT", "3");
      loom::paramsReloadForTesting();
      for (loomUniqueId& id : shared->ids)
        if (loomGetUniqueId(&id) != loomSuccess) return 6;
      shared->ready.store(1);
      // The roots give up 3 s after they started and then report: they live until they closed their
      // listeners (at most 20 s).
      for (int waited = 0; waited < 1000; ++waited) {
        bool open = false;
        for (const loomUniqueId& raw : shared->ids) {
          loom::UniqueIdData id{};
          open |= loom::decodeUniqueId(raw, &id) == loomSuccess && listening(id.root.port);
        }
        if (!open) return 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return 7;
    }
    for (int waited = 0; shared->ready.load() == 0; ++waited) {  // ranks 0..2 of 4: blocks {0, 1}, {2, 3}
      if (waited > 500) return 8;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.timeoutSec = 3;
    loomComm_t comm;
    const loomResult_t r = loomCommInitRankScalable(&comm, 4, rank, 2, shared->ids, &config);
    if (r == loomSuccess) return 3;
    const std::string why = loomGetLastError(nullptr);
    return rank == 2 && why.find("rank 3 never joined") == std::string::npos ? 4 : 0;
  }, 40);
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
  munmap(mem, sizeof(Shared));
}

TEST(ScalableInit, RefusesBadArguments) {
  loomUniqueId ids[2];
  ASSERT_EQ(loomGetUniqueId(&ids[0]), loomSuccess);
  ASSERT_EQ(loomGetUniqueId(&ids[1]), loomSuccess);
  loomComm_t comm = reinterpret_cast<loomComm_t>(&ids[0]);
  EXPECT_EQ(loomCommInitRankScalable(&comm, 2, 0, 0, ids, nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("nId 0"), std::string::npos) << loomGetLastError(nullptr);
  EXPECT_EQ(comm, nullptr) << "the output is cleared on a refusal";
  EXPECT_EQ(loomCommInitRankScalable(&comm, 2, 0, 3, ids, nullptr), loomInvalidArgument);  // nId > nranks
  EXPECT_EQ(loomCommInitRankScalable(&comm, 2, 0, 2, nullptr, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommInitRankScalable(&comm, 2, 5, 2, ids, nullptr), loomInvalidArgument);  // rank out of range
  std::memset(ids[1].internal, 0x5a, sizeof ids[1].internal);  // not an id
  EXPECT_EQ(loomCommInitRankScalable(&comm, 2, 0, 2, ids, nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("corrupt"), std::string::npos) << loomGetLastError(nullptr);
}

}  // namespace
