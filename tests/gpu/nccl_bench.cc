// One benchmark, two libraries: written against nccl.h only and linked against libnccl.so.2 without a run
// path, so the loader picks the implementation: NCCL's own library, or loom's drop-in directory
// (build/bindings/nccl/dropin, whose libnccl.so.2 is libloom_nccl) first on LD_LIBRARY_PATH.  tests/gpu/run.sh
// runs it both ways on the same GPUs.
//
// usage: nccl_bench NRANKS [--memory device|host] [--gpus G] [-b 1M] [-e 256M] [-f 4] [-n 10] [-w 2]
// Forks NRANKS ranks before any CUDA call; rank r uses GPU r % G (G: every visible GPU unless --gpus).
// NCCL refuses two ranks on one GPU, loom runs them.  Each size: allreduce (sum), allgather and
// reducescatter (sum) of float32 on a CUDA stream, the first call of each checked element by element,
// then the mean time of n calls after w warm-ups.  Prints one line per collective and size (time, algbw,
// busbw in GB/s as nccl-tests computes them) and the library that ran (ncclGetVersion, and whether
// ncclGetLastError after a call loom refuses names loom).  --memory host runs on host buffers with a NULL
// stream (loom only: this is how CI runs it on a machine without a GPU).
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/size_arg.h"

namespace {

struct Options {
  int nranks = 1, gpus = 0, iters = 10, warmup = 2;
  bool device = true;
  size_t minBytes = 1 << 20, maxBytes = 256u << 20, factor = 4;
};

bool parse(int argc, char** argv, Options* o) {
  if (argc < 2) return false;
  o->nranks = std::atoi(argv[1]);
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--memory") o->device = std::strcmp(v, "host") != 0;
    else if (k == "--gpus") o->gpus = std::atoi(v);
    else if (k == "-b") { if (!loom::perf::parseSize(v, &o->minBytes)) return false; }
    else if (k == "-e") { if (!loom::perf::parseSize(v, &o->maxBytes)) return false; }
    else if (k == "-f") { if (!loom::perf::parseSize(v, &o->factor)) return false; }
    else if (k == "-n") o->iters = std::atoi(v);
    else if (k == "-w") o->warmup = std::atoi(v);
    else return false;
  }
  return o->nranks >= 1 && o->nranks <= 64 && o->factor >= 2 && o->iters >= 1 && o->minBytes >= 4 &&
         o->minBytes <= o->maxBytes;
}

#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_));             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
#define NCCL_OK(call)                                                                                     \
  do {                                                                                                    \
    ncclResult_t r_ = (call);                                                                             \
    if (r_ != ncclSuccess) {                                                                              \
      std::fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, #call, ncclGetErrorString(r_), ncclGetLastError(nullptr)); \
      return 1;                                                                                           \
    }                                                                                                     \
  } while (0)

enum class Coll { AllReduce, AllGather, ReduceScatter };
const char* name(Coll c) { return c == Coll::AllReduce ? "allreduce" : c == Coll::AllGather ? "allgather" : "reducescatter"; }

// Buffers: `in` holds the rank's contribution, `out` the result; sizes in floats per rank as nccl-tests counts.
struct Buffers {
  float* in = nullptr;
  float* out = nullptr;
};

int runRank(const Options& o, int rank, ncclUniqueId id) {
  const int n = o.nranks;
  cudaStream_t stream = nullptr;
  if (o.device) {
    int visible = 0;
    CUDA_OK(cudaGetDeviceCount(&visible));
    const int gpus = o.gpus > 0 ? o.gpus : visible;
    CUDA_OK(cudaSetDevice(rank % (gpus > 0 ? gpus : 1)));
    CUDA_OK(cudaFree(nullptr));  // the context, before the communicator (as NCCL programs do)
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
  const size_t maxFloats = o.maxBytes / sizeof(float);
  Buffers b;
  if (o.device) {
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&b.in), maxFloats * sizeof(float)));
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&b.out), maxFloats * sizeof(float)));
  } else {
    b.in = static_cast<float*>(std::malloc(maxFloats * sizeof(float)));
    b.out = static_cast<float*>(std::malloc(maxFloats * sizeof(float)));
  }
  std::vector<float> host(maxFloats);
  auto copy = [&](void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (o.device) return cudaMemcpy(dst, src, bytes, kind);
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
  };
  auto sync = [&] { return o.device ? cudaStreamSynchronize(stream) : cudaSuccess; };
  if (rank == 0) {
    int version = 0;
    ncclGetVersion(&version);
    void* p = nullptr;
    const bool isLoom = ncclMemAlloc(&p, 4096) != ncclSuccess && std::strstr(ncclGetLastError(comm), "loom") != nullptr;
    if (p != nullptr) ncclMemFree(p);
    std::printf("# library: %s (ncclGetVersion %d), %d rank(s), %s memory\n", isLoom ? "loom" : "nccl", version, n,
                o.device ? "device" : "host");
    std::printf("# %-13s %12s %10s %9s %9s %s\n", "collective", "bytes", "time_us", "algbw", "busbw", "check");
  }
  int failed = 0;
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter}) {
    for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= o.factor) {
      // bytes: the whole result (nccl-tests' size column); per-rank pieces for allgather and reducescatter.
      const size_t total = bytes / sizeof(float) / n * n, piece = total / n;
      if (piece == 0) continue;
      auto call = [&]() {
        switch (c) {
          case Coll::AllReduce: return ncclAllReduce(b.in, b.out, total, ncclFloat32, ncclSum, comm, stream);
          case Coll::AllGather: return ncclAllGather(b.in, b.out, piece, ncclFloat32, comm, stream);
          default: return ncclReduceScatter(b.in, b.out, piece, ncclFloat32, ncclSum, comm, stream);
        }
      };
      const size_t inFloats = c == Coll::AllGather ? piece : total, outFloats = c == Coll::ReduceScatter ? piece : total;
      for (size_t k = 0; k < inFloats; ++k) host[k] = static_cast<float>(rank + 1) + static_cast<float>(k % 13);
      CUDA_OK(copy(b.in, host.data(), inFloats * sizeof(float), cudaMemcpyHostToDevice));
      NCCL_OK(call());
      CUDA_OK(sync());
      CUDA_OK(copy(host.data(), b.out, outFloats * sizeof(float), cudaMemcpyDeviceToHost));
      size_t wrong = 0;
      for (size_t k = 0; k < outFloats; ++k) {
        float want;
        if (c == Coll::AllGather) want = static_cast<float>(k / piece + 1) + static_cast<float>(k % piece % 13);
        else {
          const size_t at = c == Coll::ReduceScatter ? rank * piece + k : k;
          want = static_cast<float>(n * (n + 1) / 2) + static_cast<float>(n) * static_cast<float>(at % 13);
        }
        wrong += host[k] != want;
      }
      failed += wrong != 0;
      for (int i = 0; i < o.warmup; ++i) NCCL_OK(call());
      CUDA_OK(sync());
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) NCCL_OK(call());
      CUDA_OK(sync());
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      const double algbw = static_cast<double>(total * sizeof(float)) / us / 1e3;
      const double factor = c == Coll::AllReduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
      if (rank == 0)
        std::printf("  %-13s %12zu %10.1f %9.2f %9.2f %s\n", name(c), total * sizeof(float), us, algbw, algbw * factor,
                    wrong == 0 ? "ok" : "WRONG");
      std::fflush(stdout);
    }
  }
  NCCL_OK(ncclCommDestroy(comm));
  if (o.device) {
    cudaFree(b.in);
    cudaFree(b.out);
    cudaStreamDestroy(stream);
  } else {
    std::free(b.in);
    std::free(b.out);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: nccl_bench NRANKS [--memory device|host] [--gpus G] [-b 1M] [-e 256M] [-f 4] "
                         "[-n 10] [-w 2]\n");
    return 2;
  }
  // Rank 0 makes the id once forked (no CUDA call in this process), and hands it to the others on pipes.
  std::vector<int> pipes(2 * o.nranks, -1);
  for (int r = 1; r < o.nranks; ++r)
    if (pipe(&pipes[2 * r]) != 0) return 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < o.nranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid > 0) {
      pids.push_back(pid);
      continue;
    }
    ncclUniqueId id;
    if (r == 0) {
      const int rank = 0;
      NCCL_OK(ncclGetUniqueId(&id));
      for (int p = 1; p < o.nranks; ++p)
        if (write(pipes[2 * p + 1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(1);
    } else if (read(pipes[2 * r], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
      _exit(1);
    }
    _exit(runRank(o, r, id));
  }
  int status = 0, failed = 0;
  for (pid_t pid : pids) {
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  std::printf("# nccl_bench: %s\n", failed ? "FAILED" : "every result checked and right");
  return failed;
}
