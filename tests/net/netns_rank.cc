// One rank of a multi-host job for the network-namespace tests (netns_test.sh): joins the communicator
// named by LOOM_COMM_ID, runs allreduce (every algorithm LOOM_ALGO allows), broadcast, reduce, allgather,
// reducescatter and alltoall at several sizes, checks every result, and prints how its connections were made.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/comm.h"
#include "loom.h"

namespace {

int fail(const char* what, loomComm_t comm) {
  std::fprintf(stderr, "netns_rank: %s: %s\n", what, loomGetLastError(comm));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Rank and size from the command line, or from OpenMPI's environment when mpirun launched us.
  const char* mpiSize = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* mpiRank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (argc != 3 && (argc != 1 || mpiSize == nullptr || mpiRank == nullptr)) {
    std::fprintf(stderr, "usage: netns_rank NRANKS RANK  (or under mpirun; with LOOM_COMM_ID=host:port)\n");
    return 2;
  }
  const int n = atoi(argc == 3 ? argv[1] : mpiSize), rank = atoi(argc == 3 ? argv[2] : mpiRank);
  loomUniqueId id;
  if (loomGetUniqueId(&id) != loomSuccess) return fail("unique id", nullptr);
  loomComm_t comm;
  if (loomCommInitRank(&comm, n, id, rank) != loomSuccess) return fail("init", nullptr);
  int bad = 0;
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    std::vector<float> buf(count);
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1) + static_cast<float>(i % 7);
    if (loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, comm, nullptr) != loomSuccess)
      return fail("allreduce", comm);
    for (size_t i = 0; i < count; ++i)
      if (buf[i] != static_cast<float>(n * (n + 1) / 2) + static_cast<float>(n * (i % 7))) ++bad;
    std::vector<int> all(count * n), mine(count, rank);
    if (loomAllGather(mine.data(), all.data(), count, loomInt32, comm, nullptr) != loomSuccess) return fail("allgather", comm);
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] != static_cast<int>(i / count)) ++bad;
    // From the last rank, the first and one in the middle: the tree of hosts and the chains inside them
    // start wherever the root is.
    for (const int root : {n - 1, 0, n / 2}) {
      std::vector<int> b(count, rank == root ? 42 + root : 0);
      if (loomBroadcast(b.data(), b.data(), count, loomInt32, root, comm, nullptr) != loomSuccess)
        return fail("broadcast", comm);
      for (int v : b)
        if (v != 42 + root) ++bad;
    }
    std::vector<double> r(count, rank + 0.5);
    if (loomReduce(r.data(), r.data(), count, loomFloat64, loomMax, 0, comm, nullptr) != loomSuccess)
      return fail("reduce", comm);
    if (rank == 0)
      for (double v : r)
        if (v != n - 0.5) ++bad;
    std::vector<int64_t> rsIn(count * n), rsOut(count);
    for (size_t i = 0; i < rsIn.size(); ++i) rsIn[i] = static_cast<int64_t>(i) * (rank + 1);
    if (loomReduceScatter(rsIn.data(), rsOut.data(), count, loomInt64, loomSum, comm, nullptr) != loomSuccess)
      return fail("reducescatter", comm);
    for (size_t i = 0; i < count; ++i)
      if (rsOut[i] != static_cast<int64_t>(rank * count + i) * n * (n + 1) / 2) ++bad;
    std::vector<int> send(count * n), recv(count * n);
    for (size_t i = 0; i < send.size(); ++i) send[i] = rank * 1000 + static_cast<int>(i / count);
    if (loomAllToAll(send.data(), recv.data(), count, loomInt32, comm, nullptr) != loomSuccess) return fail("alltoall", comm);
    for (size_t i = 0; i < recv.size(); ++i)
      if (recv[i] != static_cast<int>(i / count) * 1000 + rank) ++bad;
  }
  // LOOM_NETNS_BENCH=bytes: also time float32 sum allreduces of that size (for perf/netns_bench.sh).
  if (const char* b = std::getenv("LOOM_NETNS_BENCH")) {
    const size_t bytes = std::strtoull(b, nullptr, 10), count = bytes / 4;
    std::vector<float> x(count, 1.0f);
    const int iters = 20;
    for (int i = 0; i < 3; ++i) loomAllReduce(x.data(), x.data(), count, loomFloat32, loomSum, comm, nullptr);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      if (loomAllReduce(x.data(), x.data(), count, loomFloat32, loomSum, comm, nullptr) != loomSuccess)
        return fail("allreduce (bench)", comm);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    if (rank == 0)
      std::printf("bench allreduce %zu bytes: %.1f us, algbw %.3f GB/s, busbw %.3f GB/s\n", bytes, us, bytes / us / 1e3,
                  bytes / us / 1e3 * 2.0 * (n - 1) / n);
  }
  // How this rank reached each peer: the test checks that another host means the network.
  std::string how;
  for (int p = 0; p < n; ++p)
    if (p != rank && comm->connection(p, 0).connected())
      how += " " + std::to_string(p) + ":" + comm->connection(p, 0).transport->name();
  std::printf("rank %d of %d on %zu hosts: %d wrong; connections%s\n", rank, n, comm->cluster->hosts.size(), bad,
              how.c_str());
  loomCommDestroy(comm);
  return bad == 0 ? 0 : 1;
}
