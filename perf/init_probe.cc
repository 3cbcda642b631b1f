// What a job pays before its first collective: init, then the first allreduce, per rank, and the
// memory that costs (perf/init_scale.py runs it at 8 to 1024 ranks and draws the table and plot).
//
//   init_probe loom            one rank, as a process: LOOM_COMM_ID, INIT_PROBE_NRANKS, INIT_PROBE_RANK set
//                              by the driver; prints its numbers on one line
//   init_probe threads N       N ranks in this process (loomCommInitAll), one thread each
//   init_probe mpi             under mpirun: MPI_Init + the first MPI_Allreduce (rank 0 prints the slowest)
//
// Line printed: "init_s X first_s Y rss_kb Z" (the slowest rank's init and first allreduce, and this
// process's peak resident set; for threads, the process's: divide by N for a rank's share).
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "loom.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

long peakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

int envInt(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : -1;
}

int loomProcess() {
  const int n = envInt("INIT_PROBE_NRANKS"), rank = envInt("INIT_PROBE_RANK");
  if (n < 1 || rank < 0 || rank >= n || std::getenv("LOOM_COMM_ID") == nullptr) {
    std::fprintf(stderr, "init_probe loom: set LOOM_COMM_ID, INIT_PROBE_NRANKS and INIT_PROBE_RANK\n");
    return 2;
  }
  const double t0 = now();
  loomUniqueId id;
  loomComm_t comm = nullptr;
  if (loomGetUniqueId(&id) != loomSuccess || loomCommInitRank(&comm, n, id, rank) != loomSuccess) {
    std::fprintf(stderr, "rank %d: init: %s\n", rank, loomGetLastError(nullptr));
    return 1;
  }
  const double t1 = now();
  float x = 1;
  if (loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comm, nullptr) != loomSuccess || x != static_cast<float>(n)) {
    std::fprintf(stderr, "rank %d: first allreduce: %s (%g)\n", rank, loomGetLastError(comm), x);
    return 1;
  }
  const double t2 = now();
  std::printf("init_s %.6f first_s %.6f rss_kb %ld\n", t1 - t0, t2 - t1, peakRssKb());
  loomCommDestroy(comm);
  return 0;
}

int loomThreads(int n) {
  std::vector<loomComm_t> comms(n);
  const double t0 = now();
  if (loomCommInitAll(comms.data(), n, nullptr) != loomSuccess) {
    std::fprintf(stderr, "loomCommInitAll(%d): %s\n", n, loomGetLastError(nullptr));
    return 1;
  }
  const double t1 = now();
  std::vector<int> bad(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      float x = 1;
      bad[r] = loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[r], nullptr) != loomSuccess || x != n;
    });
  for (auto& t : threads) t.join();
  const double t2 = now();
  for (loomComm_t c : comms) loomCommDestroy(c);
  if (std::count(bad.begin(), bad.end(), 1) > 0) {
    std::fprintf(stderr, "threads: a first allreduce failed\n");
    return 1;
  }
  std::printf("init_s %.6f first_s %.6f rss_kb %ld\n", t1 - t0, t2 - t1, peakRssKb());
  return 0;
}

int mpiProcess(int argc, char** argv) {
  const double t0 = now();
  MPI_Init(&argc, &argv);
  const double t1 = now();
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  float x = 1, sum = 0;
  MPI_Allreduce(&x, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const double t2 = now();
  double mine[2] = {t1 - t0, t2 - t1}, slowest[2] = {0, 0};
  long rss = peakRssKb(), rssMax = 0;
  MPI_Reduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&rss, &rssMax, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) std::printf("init_s %.6f first_s %.6f rss_kb %ld\n", slowest[0], slowest[1], rssMax);
  MPI_Finalize();
  return sum == static_cast<float>(n) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "loom") return loomProcess();
  if (mode == "threads" && argc > 2) return loomThreads(std::atoi(argv[2]));
  if (mode == "mpi") return mpiProcess(argc, argv);
  std::fprintf(stderr, "usage: init_probe loom | threads N | mpi   (see the top of perf/init_probe.cc)\n");
  return 2;
}
