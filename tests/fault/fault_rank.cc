// One rank of a peer-death trial (driven by fault_trials.py): joins the communicator named by LOOM_COMM_ID
// and runs PHASE.  The victim rank (FAULT_VICTIM) kills itself with SIGKILL after FAULT_DELAY_US
// microseconds of that phase, from a helper thread, so the death lands at an arbitrary point of whatever
// the rank is doing; it first writes the moment of death (CLOCK_MONOTONIC, shared by all processes of the
// machine) to its report.  Survivors write what the library told them and when.
//   init       the kill comes while the communicator is being built (then one allreduce and destroy)
//   allreduce  the kill comes during a stream of allreduces of mixed sizes; survivors run until one fails
//   destroy    the kill comes while the ranks are destroying the communicator after a few allreduces
//   stream     nobody dies: allreduces for FAULT_STREAM_S seconds while the driver breaks the network
//   group      as shrink, with the kill inside a stream of grouped sends and receives to both neighbours
//   shrink     as allreduce, then the survivors shrink the communicator without the victim
//              (loomCommShrink, LOOM_SHRINK_ABORT), check 20 allreduces of mixed sizes on the new one,
//              time a re-init of the survivors beside it, abort the old one and destroy the new one
// Report lines ("key value"): comm_key (the communicator's key, which names its shared-memory segments),
// result, seconds (monotonic time the failing or last call returned), killed_at, message, longest_call
// (stream: the longest allreduce, i.e. how long the network stalled it), init_seconds (the first
// communicator's init); shrink adds blamed (the rank loomCommGetFailedRank names, which it leaves out),
// shrink_result, shrink_seconds (from the failed call's return to the new communicator's first
// allreduce done), after_wrong (wrong elements in the 20 allreduces), comm_key_new, reinit_seconds (a
// new communicator of the survivors from a new unique id, to its first allreduce), and fds_before/fds_after,
// threads_before/threads_after (open descriptors and threads before init and once both communicators
// are gone).  Exit code 0 when the rank ended on its own (whatever the library said); the driver judges
// the reports.
#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/unique_id.h"
#include "loom.h"
#include "runtime/comm.h"

namespace {

double monotonicSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

FILE* gReport = nullptr;

// Entries of a /proc/self directory (open descriptors, threads), "." and ".." not counted; the
// descriptor that reads the directory is one of them.
int countEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// One float summed over `comm`: what makes a communicator "working" (its first call connects).
bool firstAllReduceWorks(loomComm_t comm, int n) {
  float one = 1.0f;
  return loomAllReduce(&one, &one, 1, loomFloat32, loomSum, comm, nullptr) == loomSuccess &&
         one == static_cast<float>(n);
}

// What a job without shrink would do instead: a new communicator of the survivors from a new unique id
// (made by the first survivor and passed on over `small`), timed to its first allreduce.  Returns the
// seconds, or -1 on failure.
double reinitSeconds(loomComm_t small, int survivors) {
  int me = -1;
  loomCommUserRank(small, &me);
  loomUniqueId raw{};
  if (me == 0) {
    loom::UniqueIdData id{};
    int fd = -1;
    if (loom::makeUniqueId(&id, &fd, /*jobId=*/false) != loomSuccess || loom::startRoot(id, fd, 10) != loomSuccess)
      return -1;
    loom::encodeUniqueId(id, &raw);
  }
  if (loomBroadcast(&raw, &raw, sizeof raw, loomUint8, 0, small, nullptr) != loomSuccess) return -1;
  const double t0 = monotonicSeconds();
  loomComm_t again = nullptr;
  const bool ok = loomCommInitRank(&again, survivors, raw, me) == loomSuccess && firstAllReduceWorks(again, survivors);
  const double seconds = monotonicSeconds() - t0;
  if (again != nullptr) loomCommDestroy(again);
  return ok ? seconds : -1;
}

// After the allreduce that failed because `victim` died: shrink without it, check 20 allreduces on the
// survivors' communicator, time a re-init beside it, free everything.  Writes what happened to the report.
void shrinkAndGoOn(loomComm_t comm, int n, int victim, int fdsBefore, int threadsBefore) {
  const double t0 = monotonicSeconds();
  // The rank to leave out, as loom names it (the driver checks it is the victim).
  int blamed = -1;
  loomCommGetFailedRank(comm, &blamed);
  std::fprintf(gReport, "blamed %d\n", blamed);
  const int dead = blamed >= 0 ? blamed : victim;
  loomComm_t small = nullptr;
  loomResult_t r = loomCommShrink(comm, &dead, 1, &small, nullptr, LOOM_SHRINK_ABORT);
  if (r == loomSuccess && !firstAllReduceWorks(small, n - 1)) r = loomInternalError;
  std::fprintf(gReport, "shrink_result %d\nshrink_seconds %.6f\n", static_cast<int>(r), monotonicSeconds() - t0);
  if (r != loomSuccess) std::fprintf(gReport, "shrink_message %s\n", loomGetLastError(small ? small : comm));
  long wrong = 0;
  if (r == loomSuccess) {
    std::fprintf(gReport, "comm_key_new %016" PRIx64 "\n", small->key);
    std::vector<float> buf(size_t{1} << 18);
    for (int i = 0; i < 20 && wrong == 0; ++i) {
      const size_t count = size_t{1} << (i % 19);  // 1 .. 256K elements
      for (size_t k = 0; k < count; ++k) buf[k] = static_cast<float>(k % 5 + 1);
      if (loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, small, nullptr) != loomSuccess) {
        std::fprintf(gReport, "after_message %s\n", loomGetLastError(small));
        wrong = -1;
        break;
      }
      for (size_t k = 0; k < count; ++k) wrong += buf[k] != static_cast<float>((k % 5 + 1) * (n - 1));
    }
    if (wrong == 0) std::fprintf(gReport, "reinit_seconds %.6f\n", reinitSeconds(small, n - 1));
  }
  std::fprintf(gReport, "after_wrong %ld\n", wrong);
  loomCommAbort(comm);
  if (small != nullptr) loomCommDestroy(small);
  // Threads that end on their own (the bootstrap roots, the helpers) get a moment to go.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::fprintf(gReport, "fds_before %d\nfds_after %d\nthreads_before %d\nthreads_after %d\n", fdsBefore,
               countEntries("/proc/self/fd"), threadsBefore, countEntries("/proc/self/task"));
  std::fflush(gReport);
}

void report(const char* phase, loomResult_t r, const char* message) {
  std::fprintf(gReport, "phase %s\nresult %d\nseconds %.6f\nmessage %s\n", phase, static_cast<int>(r),
               monotonicSeconds(), message != nullptr ? message : "");
  std::fflush(gReport);
}

// The victim's death: SIGKILL from a helper thread after `delayUs`, with the moment written first.
void armDeath(long delayUs) {
  std::thread([delayUs] {
    std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
    std::fprintf(gReport, "killed_at %.6f\n", monotonicSeconds());
    std::fflush(gReport);
    raise(SIGKILL);
  }).detach();
}

// Phase group: each rank sends to both neighbours and receives from both in one group, sizes varying,
// until a call fails; then the survivors shrink.
int groupStream(loomComm_t comm, int n, int rank, int victim, int fdsBefore, int threadsBefore) {
  std::vector<float> out(size_t{1} << 18), left(out.size()), right(out.size());
  for (int i = 0;; ++i) {
    const size_t count = size_t{1} << (4 + (i * 5) % 15);  // 16 .. 256K elements
    for (size_t k = 0; k < count; ++k) out[k] = static_cast<float>(rank * 7 + i % 3);
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    loomResult_t r = loomGroupStart();
    if (r == loomSuccess) {
      loomSend(out.data(), count, loomFloat32, next, comm, nullptr);
      loomSend(out.data(), count, loomFloat32, prev, comm, nullptr);
      loomRecv(left.data(), count, loomFloat32, prev, comm, nullptr);
      loomRecv(right.data(), count, loomFloat32, next, comm, nullptr);
      r = loomGroupEnd();
    }
    if (r != loomSuccess) {
      report("group", r, loomGetLastError(comm));
      shrinkAndGoOn(comm, n, victim, fdsBefore, threadsBefore);
      return 0;
    }
    const float fromLeft = static_cast<float>(prev * 7 + i % 3), fromRight = static_cast<float>(next * 7 + i % 3);
    for (size_t k = 0; k < count; ++k)
      if (left[k] != fromLeft || right[k] != fromRight) {
        report("group", loomInternalError, "wrong data received");
        loomCommDestroy(comm);
        return 0;
      }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: fault_rank init|allreduce|destroy|stream|shrink|group NRANKS RANK REPORT  (LOOM_COMM_ID=host:port, "
                         "FAULT_VICTIM=rank, FAULT_DELAY_US=microseconds, FAULT_STREAM_S=seconds)\n");
    return 2;
  }
  const std::string phase = argv[1];
  const int n = std::atoi(argv[2]), rank = std::atoi(argv[3]);
  gReport = std::fopen(argv[4], "w");
  if (gReport == nullptr) return 2;
  const int victim = std::atoi(std::getenv("FAULT_VICTIM") != nullptr ? std::getenv("FAULT_VICTIM") : "-1");
  const long delayUs = std::atol(std::getenv("FAULT_DELAY_US") != nullptr ? std::getenv("FAULT_DELAY_US") : "0");
  const bool dies = rank == victim;
  const int fdsBefore = countEntries("/proc/self/fd"), threadsBefore = countEntries("/proc/self/task");

  if (dies && phase == "init") armDeath(delayUs);
  loomUniqueId id;
  loomComm_t comm = nullptr;
  loomResult_t r = loomGetUniqueId(&id);
  if (r == loomSuccess) {
    // The communicator's key names its shared-memory segments: the driver counts only this job's as
    // left behind (other tests may run beside it and hold segments of their own for a moment).
    loom::UniqueIdData d{};
    if (loom::decodeUniqueId(id, &d) == loomSuccess) {
      std::fprintf(gReport, "comm_key %016" PRIx64 "\n", loom::hashBytes(d.secret, sizeof d.secret));
      std::fflush(gReport);
    }
    const double initStart = monotonicSeconds();
    r = loomCommInitRank(&comm, n, id, rank);
    std::fprintf(gReport, "init_seconds %.6f\n", monotonicSeconds() - initStart);
  }
  if (r != loomSuccess) {
    report("init", r, loomGetLastError(nullptr));
    return 0;
  }
  const bool shrinks = phase == "shrink" || phase == "group";
  if (dies && (phase == "allreduce" || shrinks)) armDeath(delayUs);
  if (phase == "group") return groupStream(comm, n, rank, victim, fdsBefore, threadsBefore);
  const int rounds = phase == "allreduce" || phase == "stream" || phase == "shrink" ? 1000000 : 3;
  const double streamEnd =
      monotonicSeconds() + std::atof(std::getenv("FAULT_STREAM_S") != nullptr ? std::getenv("FAULT_STREAM_S") : "0");
  std::vector<float> buf(size_t{1} << 20);
  double longestCall = 0;  // how long the network's trouble stalled the stream
  for (int i = 0; i < rounds; ++i) {
    if (phase == "stream" && i % 16 == 0) {
      // The ranks stop together: each one's clock says whether its time is up, the maximum decides.
      int32_t over = monotonicSeconds() > streamEnd ? 1 : 0;
      r = loomAllReduce(&over, &over, 1, loomInt32, loomMax, comm, nullptr);
      if (r != loomSuccess) {
        report("stream", r, loomGetLastError(comm));
        loomCommDestroy(comm);
        return 0;
      }
      if (over != 0) break;
    }
    const size_t count = size_t{1} << (4 + (i * 7) % 17);  // 16 .. 1M elements
    for (size_t k = 0; k < count; ++k) buf[k] = 1.0f;
    const double callStart = monotonicSeconds();
    r = loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, comm, nullptr);
    longestCall = std::max(longestCall, monotonicSeconds() - callStart);
    if (r != loomSuccess) {
      report(phase == "shrink" ? "shrink" : "allreduce", r, loomGetLastError(comm));
      if (phase == "shrink") shrinkAndGoOn(comm, n, victim, fdsBefore, threadsBefore);
      else loomCommDestroy(comm);
      return 0;
    }
    if (buf[count - 1] != static_cast<float>(n)) {
      report("allreduce", loomInternalError, "wrong result");
      loomCommDestroy(comm);
      return 0;
    }
  }
  if (dies && phase == "destroy") armDeath(delayUs);
  if (phase == "stream") {
    std::fprintf(gReport, "longest_call %.3f\n", longestCall);
    report("stream", loomSuccess, "");
  }
  r = loomCommDestroy(comm);
  if (phase != "stream") report(phase == "destroy" ? "destroy" : "end", r, r != loomSuccess ? loomGetLastError(nullptr) : "");
  if (dies) std::this_thread::sleep_for(std::chrono::seconds(60));  // the death must come in destroy or later
  return 0;
}
