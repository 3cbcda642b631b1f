#include "tests/common/multiprocess.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/params.h"
#include "bootstrap/unique_id.h"

namespace loom::testing {

namespace {
bool& forkedRank() {
  static bool forked = false;
  return forked;
}
}  // namespace

bool inForkedRank() { return forkedRank(); }

double timeBound(double seconds) {
  static const double scale = [] {
    const char* v = getenv("LOOM_TEST_TIME_SCALE");
    const double x = v ? atof(v) : 1.0;
    return x >= 1.0 ? x : 1.0;
  }();
  return seconds * scale;
}

std::string RankOutcome::describe() const {
  std::string s = "rank " + std::to_string(rank) + ": ";
  if (hung) return s + "hung (killed at the deadline)";
  if (signal != 0) return s + "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return s + "exit code " + std::to_string(exitCode);
}

namespace {
// Waits (2 s at most) until every other thread of this process sleeps.  The thread loomGetUniqueId has
// just started for the bootstrap root allocates while it sets up, and a fork then could copy a malloc
// lock it holds into a child (AddressSanitizer's allocator has no fork handlers in this GCC, and a rank
// hung so); once set up it sleeps in poll until a rank connects.
void waitForOtherThreadsToSleep() {
  const std::string self = std::to_string(syscall(SYS_gettid));
  for (int i = 0; i < 2000; ++i) {
    bool allAsleep = true;
    DIR* d = opendir("/proc/self/task");
    if (d == nullptr) return;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' || self == e->d_name) continue;
      char buf[256] = {};
      const std::string path = std::string("/proc/self/task/") + e->d_name + "/stat";
      FILE* f = std::fopen(path.c_str(), "r");
      if (f == nullptr) continue;
      const size_t got = std::fread(buf, 1, sizeof buf - 1, f);
      std::fclose(f);
      const char* paren = std::strrchr(buf, ')');  // "tid (name) S ..."
      if (got > 0 && paren != nullptr && paren[1] == ' ' && paren[2] != 'S') allAsleep = false;
    }
    closedir(d);
    if (allAsleep) return;
    usleep(1000);
  }
}
}  // namespace

std::vector<RankOutcome> forkRanks(int n, const std::function<int(int rank)>& fn, double timeoutSec) {
  waitForOtherThreadsToSleep();
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(n, -1);
  std::vector<RankOutcome> out(n);
  // No rank starts before the last one is forked: a rank that starts early talks to the bootstrap root
  // thread of this process, which then allocates while the next fork copies the process (see above).
  // Each child waits for the end of this pipe to close.
  int go[2];
  if (pipe(go) != 0) {
    for (int r = 0; r < n; ++r) out[r].rank = r, out[r].exitCode = 127;
    return out;
  }
  for (int r = 0; r < n; ++r) {
    out[r].rank = r;
    pid_t pid = fork();
    if (pid == 0) {
      forkedRank() = true;
      close(go[1]);
      char byte;
      while (read(go[0], &byte, 1) < 0 && errno == EINTR) {
      }
      close(go[0]);
      paramsReloadForTesting();  // the test may have changed LOOM_* variables since the parent read them
      int code = fn(r);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids[r] = pid;
  }
  close(go[0]);
  close(go[1]);  // every rank starts now
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec);
  int left = n;
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] != pid) continue;
        if (WIFEXITED(status)) out[r].exitCode = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) out[r].signal = WTERMSIG(status);
        pids[r] = -1;
        --left;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] < 0) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        out[r].hung = true;
        pids[r] = -1;
        --left;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return out;
}

std::vector<std::string> shmSegmentsOf(const loomUniqueId& uid) {
  UniqueIdData id{};
  std::memcpy(&id, uid.internal, sizeof(id));
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "loom-%016" PRIx64 "-", hashBytes(id.secret, sizeof(id.secret)));
  std::vector<std::string> found;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) found.push_back(e->d_name);
    closedir(d);
  }
  return found;
}

void runRanks(int n, const std::function<void(int rank, loomComm_t comm)>& body, double timeoutSec,
              int commTimeoutSec) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess) << loomGetLastError(nullptr);
  auto outcomes = forkRanks(
      n,
      [&](int rank) {
        loomComm_t comm = nullptr;
        loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
        if (commTimeoutSec > 0) cfg.timeoutSec = commTimeoutSec;
        loomResult_t r = loomCommInitRankConfig(&comm, n, id, rank, &cfg);
        if (r != loomSuccess) {
          std::fprintf(stderr, "rank %d: loomCommInitRank: %s\n", rank, loomGetLastError(nullptr));
          return 3;
        }
        body(rank, comm);
        loomCommDestroy(comm);  // refused harmlessly if the body destroyed or aborted it
        return ::testing::Test::HasFailure() ? 1 : 0;
      },
      timeoutSec);
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << o.describe();
  for (const auto& s : shmSegmentsOf(id)) ADD_FAILURE() << "shared-memory segment left behind: /dev/shm/" << s;
  errno = 0;
  EXPECT_TRUE(waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD) << "a child process was left behind";
}

}  // namespace loom::testing
