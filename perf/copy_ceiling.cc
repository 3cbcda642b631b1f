// copy_ceiling: how fast any single-copy alltoall or allgather can be on this host, measured.
//
// Out of place, an alltoall or allgather on one host must write every byte of each rank's receive
// buffer at least once: the fastest design copies each byte once (loom and OpenMPI's vader both do,
// reading peers' memory with process_vm_readv).  This tool runs that copy alone, with no protocol:
// n processes (forked, started together by a sleeping process-shared barrier) each fill their own S-byte
// receive buffer, either
//   memcpy  from their own S-byte buffer with glibc's memcpy,
//   stream  the same with non-temporal stores (no read of the destination first: the faster of these two
//           is the ceiling of any single-copy design; loom streams large outputs too), or
//   cma     block i from process i's buffer with process_vm_readv, their own block with memcpy (exactly
//           the bytes a single-copy alltoall moves, without any of its synchronisation).
// Each iteration's time is from the first process's start to the last one's end; the median over
// iterations is reported, with the busbw it implies for alltoall / allgather ((n-1)/n x S / time), the
// figure to hold a library's busbw against: a library at the ceiling cannot be beaten by 1.5x by
// copying smarter, only by moving fewer bytes.
#include <emmintrin.h>
#include <getopt.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "perf/size_arg.h"

namespace {

constexpr int kMaxRanks = 64;
constexpr int kMaxIters = 1000;

struct Shared {
  pthread_barrier_t barrier;
  pid_t pid[kMaxRanks];
  const char* src[kMaxRanks];             // each process's source buffer, in its own address space
  double start[kMaxIters][kMaxRanks];     // seconds, CLOCK_MONOTONIC (one clock for every process)
  double end[kMaxIters][kMaxRanks];
  int failed;
};

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

size_t parseSize(const char* s) {
  size_t v = 0;
  if (!loom::perf::parseSize(s, &v)) {
    fprintf(stderr, "copy_ceiling: bad size '%s' (a number with an optional K, M or G)\n", s);
    exit(2);
  }
  if (v < 1) { fprintf(stderr, "copy_ceiling: size '%s' must be at least 1 byte\n", s); exit(2); }
  return v;
}

// Copies with non-temporal 16-byte stores (SSE2, every x86-64): the destination's lines are not read
// into the cache before being overwritten, which saves a third of the memory traffic of a large copy.
void streamCopy(char* dst, const char* src, size_t bytes) {
  size_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
  if (head > bytes) head = bytes;
  memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  _mm_sfence();
  memcpy(dst + i, src + i, bytes - i);
}

enum class Pattern { kMemcpy, kStream, kCma };

bool readPeer(pid_t pid, const char* from, char* to, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{to + done, bytes - done};
    iovec remote{const_cast<char*>(from) + done, bytes - done};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      fprintf(stderr, "copy_ceiling: process_vm_readv from %d: %s\n", static_cast<int>(pid),
              got < 0 ? strerror(errno) : "no progress");
      return false;
    }
    done += static_cast<size_t>(got);
  }
  return true;
}

// One process: its buffers for the largest size, then every size, `iters` timed rounds each.
void runRank(Shared* sh, int rank, int n, Pattern pattern, const std::vector<size_t>& sizes, int warmup, int iters) {
  const size_t most = sizes.back();
  std::vector<char> src(most, static_cast<char>(rank + 1)), dst(most, 0);
  sh->src[rank] = src.data();
  sh->pid[rank] = getpid();
  pthread_barrier_wait(&sh->barrier);  // every address published
  for (size_t bytes : sizes) {
    const size_t block = bytes / static_cast<size_t>(n);
    for (int it = -warmup; it < iters; ++it) {
      pthread_barrier_wait(&sh->barrier);
      const double t0 = now();
      bool ok = true;
      if (pattern == Pattern::kMemcpy) {
        memcpy(dst.data(), src.data(), bytes);
      } else if (pattern == Pattern::kStream) {
        streamCopy(dst.data(), src.data(), bytes);
      } else {
        for (int i = 1; i <= n && ok; ++i) {  // starting after ourselves, as loom's alltoall does
          const int p = (rank + i) % n;
          char* to = dst.data() + static_cast<size_t>(p) * block;
          const char* from = sh->src[p] + static_cast<size_t>(rank) * block;
          if (p == rank) memcpy(to, from, block);
          else ok = readPeer(sh->pid[p], from, to, block);
        }
      }
      const double t1 = now();
      if (!ok) __atomic_store_n(&sh->failed, 1, __ATOMIC_RELAXED);
      if (it >= 0) { sh->start[it][rank] = t0; sh->end[it][rank] = t1; }
    }
    // The bytes arrived where they belong (block p came from process p), or the timing means nothing.
    for (int p = 0; p < n; ++p) {
      const char want = static_cast<char>((pattern == Pattern::kCma ? p : rank) + 1);
      const char* got = dst.data() + static_cast<size_t>(p) * block;
      if (got[0] != want || got[block - 1] != want) __atomic_store_n(&sh->failed, 1, __ATOMIC_RELAXED);
    }
    pthread_barrier_wait(&sh->barrier);  // the parent reads this size's times
    pthread_barrier_wait(&sh->barrier);  // ... and is done with them
  }
}

void usage(FILE* f) {
  fprintf(f,
          "usage: copy_ceiling [-n ranks] [-b min] [-e max] [-f factor] [-i iters] [-w warmup] [-p memcpy|stream|cma]\n"
          "  Times n processes each filling its own receive buffer of S bytes at once, the floor of any\n"
          "  single-copy alltoall / allgather on this host (see the top of perf/copy_ceiling.cc).\n"
          "  -n  processes (default 2, at most %d)       -b/-e  sizes S, e.g. 1M, 32M (default 1M..32M)\n"
          "  -f  size factor (default 32)                -i/-w  timed / untimed rounds (default 20 / 3)\n"
          "  -p  memcpy: from the process's own buffer; stream: the same with non-temporal stores;\n"
          "      cma: the alltoall pattern with process_vm_readv\n",
          kMaxRanks);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2, iters = 20, warmup = 3;
  size_t lo = 1 << 20, hi = 32 << 20, factor = 32;
  Pattern pattern = Pattern::kMemcpy;
  const char* patternName = "memcpy";
  static option longOpts[] = {{"help", no_argument, nullptr, 'h'}, {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "n:b:e:f:i:w:p:h", longOpts, nullptr)) != -1;) {
    switch (c) {
      case 'n': n = atoi(optarg); break;
      case 'b': lo = parseSize(optarg); break;
      case 'e': hi = parseSize(optarg); break;
      case 'f': factor = static_cast<size_t>(atol(optarg)); break;
      case 'i': iters = atoi(optarg); break;
      case 'w': warmup = atoi(optarg); break;
      case 'p':
        patternName = optarg;
        if (strcmp(optarg, "cma") == 0) pattern = Pattern::kCma;
        else if (strcmp(optarg, "stream") == 0) pattern = Pattern::kStream;
        else if (strcmp(optarg, "memcpy") != 0) { fprintf(stderr, "copy_ceiling: -p takes memcpy, stream or cma\n"); return 2; }
        break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (n < 1 || n > kMaxRanks || iters < 1 || iters > kMaxIters || warmup < 0 || factor < 2 || lo > hi) {
    fprintf(stderr, "copy_ceiling: need 1 <= -n <= %d, 1 <= -i <= %d, -w >= 0, -f >= 2, -b <= -e\n", kMaxRanks,
            kMaxIters);
    return 2;
  }
  std::vector<size_t> sizes;
  for (size_t s = lo; s <= hi; s *= factor) sizes.push_back(s / static_cast<size_t>(n) * static_cast<size_t>(n));

  auto* sh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) { perror("copy_ceiling: mmap"); return 1; }
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->barrier, &attr, static_cast<unsigned>(n + 1));  // the parent takes part too

  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid < 0) { perror("copy_ceiling: fork"); return 1; }
    if (pid == 0) {
      runRank(sh, r, n, pattern, sizes, warmup, iters);
      _exit(0);
    }
    children.push_back(pid);
  }
  pthread_barrier_wait(&sh->barrier);
  printf("# copy_ceiling: %d processes, pattern %s, %d rounds per size (median)\n", n, patternName, iters);
  printf("# %12s %12s %14s %14s\n", "size", "time(us)", "copy(GB/s)", "busbw(GB/s)");
  for (size_t bytes : sizes) {
    for (int it = -warmup; it < iters; ++it) pthread_barrier_wait(&sh->barrier);
    pthread_barrier_wait(&sh->barrier);
    std::vector<double> times;
    for (int it = 0; it < iters; ++it) {
      double first = sh->start[it][0], last = sh->end[it][0];
      for (int r = 1; r < n; ++r) first = std::min(first, sh->start[it][r]), last = std::max(last, sh->end[it][r]);
      times.push_back(last - first);
    }
    pthread_barrier_wait(&sh->barrier);
    std::nth_element(times.begin(), times.begin() + iters / 2, times.end());
    const double t = times[static_cast<size_t>(iters / 2)];
    const double copyRate = static_cast<double>(bytes) * n / t / 1e9;  // every process's bytes
    const double busbw = static_cast<double>(bytes) / t / 1e9 * (n - 1) / n;
    printf("  %12zu %12.1f %14.3f %14.3f\n", bytes, t * 1e6, copyRate, busbw);
  }
  int status = 0, bad = 0;
  for (pid_t pid : children) {
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) bad = 1;
  }
  if (bad || sh->failed) {
    fprintf(stderr, "copy_ceiling: a process failed or copied the wrong bytes\n");
    return 1;
  }
  return 0;
}
