// Runs real ranks as forked processes, for the multi-process tests.  A rank's body may use gtest's
// EXPECT/ASSERT macros: the child prints its failures and exits non-zero, and the parent test fails
// with the rank named.  Every run is bounded: ranks still alive at the deadline are killed (SIGKILL)
// and reported as hung.
#pragma once

#include "loom_build_config.h"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "loom.h"

// The network transports this build has, for test matrices that run over each of them.
#if LOOM_HAVE_UCX
#define LOOM_TEST_NETS "socket", "ucx"
#else
#define LOOM_TEST_NETS "socket"
#endif

namespace loom::testing {

struct RankOutcome {
  int rank = -1;
  bool hung = false;  // killed at the deadline
  int exitCode = -1;  // when it exited
  int signal = 0;     // when a signal ended it
  bool ok() const { return !hung && signal == 0 && exitCode == 0; }
  std::string describe() const;
};

// Whether this process is a rank forked by forkRanks or runRanks (not the test process itself).
bool inForkedRank();

// Forks n processes running fn(rank); the return value of fn is the exit code.
std::vector<RankOutcome> forkRanks(int n, const std::function<int(int rank)>& fn, double timeoutSec);

// Forks n ranks that each join one communicator (with config.timeoutSec = commTimeoutSec when it is
// > 0), run body(rank, comm), and destroy it.  Adds a gtest failure for every rank that did not end
// cleanly, for any shared-memory segment of the job left in /dev/shm afterwards, and for any child
// process still there.
void runRanks(int n, const std::function<void(int rank, loomComm_t comm)>& body, double timeoutSec = 180,
              int commTimeoutSec = 0);

// Seconds since t0 (the tests' bounds on how long a failure may take to surface).
inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// An upper bound of `seconds` on how long something may take, stretched by LOOM_TEST_TIME_SCALE (default
// 1): a sanitizer build runs several times slower, and its CI run shares two cores with the other tests.
// Lower bounds ("waited for the timeout") are never stretched.
double timeBound(double seconds);

// /dev/shm entries that belong to the job of this unique id.
std::vector<std::string> shmSegmentsOf(const loomUniqueId& id);

}  // namespace loom::testing
