// The GPU check, for a machine with a GPU (tests/gpu/run.sh runs it; nothing here runs without one).
// No test framework, so it builds wherever CUDA and loom build.  Each phase runs in forked processes
// that start CUDA only after the fork (CUDA does not survive fork):
//   kernels      every type x op of the reduction kernel on the device, against the CPU reference
//   copy         device-to-device bandwidth of cudaMemcpy and of loom's copy kernel (the limit)
//   dma-buf      the export GPUDirect RDMA registers with the NIC (no NIC needed): a buffer inside an
//                allocation comes back as the whole allocation's dma-buf, with a distinct id per allocation;
//                a driver without dma-buf support is reported (GPUDirect then needs nvidia-peermem)
//   collectives  N ranks on one GPU (1, 2, 4): every collective on device buffers on a CUDA stream,
//                checked; allreduce busbw by size
// Prints a report and writes it to the file named by the first argument; exits non-zero on any failure.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/datatypes.h"
#include "kernels/device_kernels.h"
#include "device_runtime/device_api.h"
#include "loom.h"
#include "tests/common/reference.h"

namespace {

FILE* gReport = nullptr;

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  va_list a;
  va_start(a, fmt);
  char line[1024];
  std::vsnprintf(line, sizeof line, fmt, a);
  va_end(a);
  std::fputs(line, stdout);
  std::fflush(stdout);
  if (gReport != nullptr) {
    std::fputs(line, gReport);
    std::fflush(gReport);
  }
}

#define CUDA_OK(call)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      say("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));      \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

// Runs fn(i) in n forked processes; true when all exit 0.
template <typename F>
bool forked(int n, F fn) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t p = fork();
    if (p == 0) _exit(fn(i));
    pids.push_back(p);
  }
  bool ok = true;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

int checkKernels() {
  const size_t count = (1 << 20) + 3;
  int failures = 0;
  for (int t = 0; t < loomNumTypes; ++t) {
    for (int o = 0; o < loomNumOps; ++o) {
      auto type = static_cast<loomDataType_t>(t);
      auto op = static_cast<loomRedOp_t>(o);
      const size_t bytes = count * loom::typeSize(type);
      std::vector<char> a(bytes), b(bytes), out(bytes);
      loom::testing::fillInput(type, op, 0, count, a.data());
      loom::testing::fillInput(type, op, 1, count, b.data());
      void *da = nullptr, *db = nullptr;
      CUDA_OK(cudaMalloc(&da, bytes));
      CUDA_OK(cudaMalloc(&db, bytes));
      CUDA_OK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
      CUDA_OK(static_cast<cudaError_t>(loom::launchReduceKernel(da, da, db, count, type, op, 2, nullptr)));
      CUDA_OK(cudaMemcpy(out.data(), da, bytes, cudaMemcpyDeviceToHost));
      std::string why;
      size_t wrong = loom::testing::countWrong(type, op, 2, count, out.data(), &why);
      if (wrong != 0) {
        say("FAIL kernel %s %s: %zu wrong: %s\n", loom::typeName(type), loom::opName(op), wrong, why.c_str());
        ++failures;
      }
      cudaFree(da);
      cudaFree(db);
    }
  }
  say("kernels: %d types x %d ops, %d failing\n", static_cast<int>(loomNumTypes), static_cast<int>(loomNumOps), failures);
  return failures == 0 ? 0 : 1;
}

int measureCopy() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  for (int kernel = 0; kernel < 2; ++kernel) {
    const int reps = 10;
    for (int warm = 0; warm < 2; ++warm) {
      if (kernel) CUDA_OK(static_cast<cudaError_t>(loom::launchCopyKernel(b, a, bytes, nullptr)));
      else CUDA_OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr));
    }
    CUDA_OK(cudaEventRecord(t0, nullptr));
    for (int i = 0; i < reps; ++i) {
      if (kernel) CUDA_OK(static_cast<cudaError_t>(loom::launchCopyKernel(b, a, bytes, nullptr)));
      else CUDA_OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr));
    }
    CUDA_OK(cudaEventRecord(t1, nullptr));
    CUDA_OK(cudaEventSynchronize(t1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
    const double gbs = static_cast<double>(bytes) * reps / (ms / 1e3) / 1e9;
    say("copy: device-to-device %s: %.0f GB/s copied (%.0f GB/s read + written), 1 GiB x %d\n",
        kernel ? "loom copy kernel" : "cudaMemcpy", gbs, 2 * gbs, reps);
  }
  return 0;
}

int checkDmabuf() {
  std::string why;
  loom::DeviceApi* api = loom::cudaDeviceApi(&why);
  if (api == nullptr) return say("FAIL dma-buf: no CUDA runtime: %s\n", why.c_str()), 1;
  const size_t bytes = size_t{64} << 20;
  char *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&a), bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&b), bytes));
  loom::DeviceApi::Allocation aa, ab;
  if (api->allocationOf(a + 12345, &aa) != loomSuccess || api->allocationOf(b, &ab) != loomSuccess)
    return say("FAIL dma-buf: allocation lookup: %s\n", api->lastErrorText().c_str()), 1;
  // The receiving I/O thread looks allocations up too, without having made any CUDA call before.
  loom::DeviceApi::Allocation fromThread{};
  loomResult_t threadResult = loomInternalError;
  std::thread([&] { threadResult = api->allocationOf(a + 12345, &fromThread); }).join();
  if (threadResult != loomSuccess || fromThread.base != aa.base || fromThread.id != aa.id)
    return say("FAIL dma-buf: allocation lookup from a fresh thread: %s\n", api->lastErrorText().c_str()), 1;
  // A freed allocation is no longer found (its registration is dropped: transport/ib/device_mr.cc).
  char* c = nullptr;
  loom::DeviceApi::Allocation freed{};
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&c), 4096));
  CUDA_OK(cudaFree(c));
  if (api->allocationOf(c, &freed) == loomSuccess && freed.base == reinterpret_cast<uint64_t>(c))
    return say("FAIL dma-buf: a freed allocation is still found\n"), 1;
  const bool found = aa.base == reinterpret_cast<uint64_t>(a) && aa.length >= bytes &&
                     ab.base == reinterpret_cast<uint64_t>(b) && aa.id != ab.id;
  int fd = -1;
  uint64_t offset = 0;
  if (api->dmabufOf(aa, &fd, &offset) != loomSuccess) {
    say("dma-buf: allocations %s; not exported (%s): GPUDirect RDMA needs nvidia-peermem on this driver\n",
        found ? "found" : "FAIL wrong", api->lastErrorText().c_str());
    return found ? 0 : 1;
  }
  say("dma-buf: allocations %s (base %#llx, %zu bytes, buffer ids %llu / %llu); exported (fd %d, offset %llu)\n",
      found ? "found" : "FAIL wrong", static_cast<unsigned long long>(aa.base), aa.length,
      static_cast<unsigned long long>(aa.id), static_cast<unsigned long long>(ab.id), fd,
      static_cast<unsigned long long>(offset));
  close(fd);
  return found ? 0 : 1;
}

// One rank of `n` on GPU 0: every collective checked once, then allreduce timed by size.
int collectiveRank(int n, int rank, const loomUniqueId& id) {
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  loomComm_t comm = nullptr;
  if (loomCommInitRank(&comm, n, id, rank) != loomSuccess) {
    say("FAIL rank %d: loomCommInitRank: %s\n", rank, loomGetLastError(nullptr));
    return 1;
  }
  const loomDataType_t type = loomFloat32;
  const size_t count = (1 << 20) + 7, bytes = count * sizeof(float);
  void *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, bytes * n));
  CUDA_OK(cudaMalloc(&recv, bytes * n));
  std::vector<char> host(bytes * n), out(bytes * n);
  int failures = 0;
  auto finish = [&](const char* what) {
    cudaError_t e = cudaStreamSynchronize(s);
    loomResult_t async = loomSuccess;
    loomCommGetAsyncError(comm, &async);
    if (e != cudaSuccess || async != loomSuccess) {
      say("FAIL rank %d %s: %s / %s\n", rank, what, cudaGetErrorString(e), loomGetLastError(comm));
      ++failures;
      return false;
    }
    return true;
  };
  auto check = [&](const char* what, size_t wrong, const std::string& why) {
    if (wrong != 0) {
      say("FAIL rank %d %s: %zu wrong: %s\n", rank, what, wrong, why.c_str());
      ++failures;
    }
  };
  std::string why;
  // allreduce
  loom::testing::fillInput(type, loomSum, rank, count, host.data());
  CUDA_OK(cudaMemcpy(send, host.data(), bytes, cudaMemcpyHostToDevice));
  loomAllReduce(send, recv, count, type, loomSum, comm, s);
  if (finish("allreduce")) {
    CUDA_OK(cudaMemcpy(out.data(), recv, bytes, cudaMemcpyDeviceToHost));
    check("allreduce", loom::testing::countWrong(type, loomSum, n, count, out.data(), &why), why);
  }
  // allgather
  loomAllGather(send, recv, count, type, comm, s);
  if (finish("allgather")) {
    CUDA_OK(cudaMemcpy(out.data(), recv, bytes * n, cudaMemcpyDeviceToHost));
    for (int r = 0; r < n; ++r)
      check("allgather", loom::testing::countWrongCopied(type, loomSum, r, 0, count, out.data() + r * bytes, &why), why);
  }
  // broadcast from the last rank, in place
  CUDA_OK(cudaMemcpy(recv, host.data(), bytes, cudaMemcpyHostToDevice));
  loomBroadcast(recv, recv, count, type, n - 1, comm, s);
  if (finish("broadcast")) {
    CUDA_OK(cudaMemcpy(out.data(), recv, bytes, cudaMemcpyDeviceToHost));
    check("broadcast", loom::testing::countWrongCopied(type, loomSum, n - 1, 0, count, out.data(), &why), why);
  }
  // reducescatter
  loom::testing::fillInput(type, loomSum, rank, count * n, host.data());
  CUDA_OK(cudaMemcpy(send, host.data(), bytes * n, cudaMemcpyHostToDevice));
  loomReduceScatter(send, recv, count, type, loomSum, comm, s);
  if (finish("reducescatter")) {
    CUDA_OK(cudaMemcpy(out.data(), recv, bytes, cudaMemcpyDeviceToHost));
    check("reducescatter", loom::testing::countWrongReduced(type, loomSum, n, rank * count, count, out.data(), &why), why);
  }
  cudaFree(send);
  cudaFree(recv);

  // allreduce busbw by size, the nccl-tests way: the mean time of 20 calls after 5 warm-ups.
  for (size_t size = size_t{1} << 20; size <= size_t{256} << 20; size *= 4) {
    void* buf = nullptr;
    CUDA_OK(cudaMalloc(&buf, size));
    const size_t c = size / sizeof(float);
    for (int i = 0; i < 5; ++i) loomAllReduce(buf, buf, c, type, loomSum, comm, s);
    if (!finish("allreduce warm-up")) break;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) loomAllReduce(buf, buf, c, type, loomSum, comm, s);
    if (!finish("allreduce timed")) break;
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 20;
    const double algbw = static_cast<double>(size) / us / 1e3;
    if (rank == 0)
      say("allreduce ranks %d size %10zu time %10.1f us algbw %7.2f GB/s busbw %7.2f GB/s\n", n, size, us, algbw,
          algbw * 2.0 * (n - 1) / n);
    cudaFree(buf);
  }
  loomCommDestroy(comm);
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (gReport = std::fopen(argv[1], "w")) == nullptr) {
    std::perror(argv[1]);
    return 2;
  }
  bool ok = true;
  ok = forked(1, [](int) { return checkKernels(); }) && ok;
  ok = forked(1, [](int) { return measureCopy(); }) && ok;
  ok = forked(1, [](int) { return checkDmabuf(); }) && ok;
  for (int n : {1, 2, 4}) {
    loomUniqueId id;
    if (loomGetUniqueId(&id) != loomSuccess) {
      say("FAIL loomGetUniqueId: %s\n", loomGetLastError(nullptr));
      return 1;
    }
    const bool passed = forked(n, [&](int rank) { return collectiveRank(n, rank, id); });
    say("collectives ranks %d: %s\n", n, passed ? "passed" : "FAILED");
    ok = passed && ok;
  }
  say("gpu_check: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
