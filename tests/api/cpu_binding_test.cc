// LOOM_BIND (runtime/cpu_binding.cc): a CPU rank that nothing bound takes its block of the machine's
// CPUs at init; a rank bound by its launcher, in-process ranks and LOOM_BIND=0 are left alone.  Every
// case runs in forked processes: the test process itself is never bound.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "base/params.h"
#include "loom.h"
#include "tests/common/multiprocess.h"
#include "tests/common/scoped_env.h"

namespace {

using loom::testing::forkRanks;
using loom::testing::setInForkedRank;
using loom::testing::timeBound;

std::vector<int> allowedCpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

// 2 ranks in 2 processes; check(rank, cpusBefore, cpusAfter) after init; an allreduce must still add up.
void runTwo(const std::function<void(int)>& before, const std::function<void(int, const std::vector<int>&,
                                                                         const std::vector<int>&)>& check) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  const auto outcomes = forkRanks(2, [&](int rank) {
    before(rank);
    const std::vector<int> was = allowedCpus();
    loomComm_t comm = nullptr;
    if (loomCommInitRank(&comm, 2, id, rank) != loomSuccess) {
      ADD_FAILURE() << "rank " << rank << ": " << loomGetLastError(nullptr);
      return 2;
    }
    check(rank, was, allowedCpus());
    float v = static_cast<float>(rank + 1);
    EXPECT_EQ(loomAllReduce(&v, &v, 1, loomFloat32, loomSum, comm, nullptr), loomSuccess);
    EXPECT_EQ(v, 3.0f);
    EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
    return ::testing::Test::HasFailure() ? 1 : 0;
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

bool unboundWithCpusToShare() {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online >= 2 && static_cast<long>(allowedCpus().size()) == online;
}

TEST(CpuBinding, TwoRanksOfThisMachineTakeABlockEach) {
  if (!unboundWithCpusToShare()) GTEST_SKIP() << "one CPU, or this test process is bound already";
  runTwo([](int) {}, [](int rank, const std::vector<int>& was, const std::vector<int>& now) {
    const size_t block = was.size() / 2;
    const std::vector<int> want(was.begin() + static_cast<long>(rank * block),
                                was.begin() + static_cast<long>((rank + 1) * block));
    EXPECT_EQ(now, want) << "rank " << rank;
    // A thread started after init keeps the rank's block.
    std::vector<int> inThread;
    std::thread([&] { inThread = allowedCpus(); }).join();
    EXPECT_EQ(inThread, want) << "rank " << rank;
  });
}

TEST(CpuBinding, OffLeavesAffinityAlone) {
  if (!unboundWithCpusToShare()) GTEST_SKIP() << "one CPU, or this test process is bound already";
  runTwo(
      [](int) {
        setInForkedRank("LOOM_BIND", "0");
        loom::paramsReloadForTesting();
      },
      [](int rank, const std::vector<int>& was, const std::vector<int>& now) { EXPECT_EQ(now, was) << rank; });
}

TEST(CpuBinding, ARankItsLauncherBoundIsLeftAlone) {
  if (!unboundWithCpusToShare()) GTEST_SKIP() << "one CPU, or this test process is bound already";
  runTwo(
      [](int) {  // as `taskset -c 0` or mpirun --bind-to core would
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(allowedCpus().front(), &one);
        ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
      },
      [](int rank, const std::vector<int>& was, const std::vector<int>& now) {
        EXPECT_EQ(was.size(), 1u);
        EXPECT_EQ(now, was) << rank;
      });
}

TEST(CpuBinding, InProcessRanksAreLeftAlone) {
  if (!unboundWithCpusToShare()) GTEST_SKIP() << "one CPU, or this test process is bound already";
  const auto outcomes = forkRanks(1, [](int) {
    const std::vector<int> was = allowedCpus();
    loomComm_t comms[2] = {nullptr, nullptr};
    if (loomCommInitAll(comms, 2, nullptr) != loomSuccess) return 2;
    EXPECT_EQ(allowedCpus(), was);
    for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
    return ::testing::Test::HasFailure() ? 1 : 0;
  }, timeBound(60));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
}

}  // namespace
