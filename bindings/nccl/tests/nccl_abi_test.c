/* A program written against NCCL's nccl.h and nothing else: it knows no loom.  Built twice (CMakeLists.txt):
 * linked against libloom_nccl, and linked against the real libnccl.so.2 of the nvidia-nccl wheel and then
 * run with loom's drop-in directory first on LD_LIBRARY_PATH.  Both times it must run on loom, on host
 * memory (this machine has no GPU), with every result exact.
 *
 * usage: nccl_abi_test [NRANKS=4]
 * Forks NRANKS ranks after ncclGetUniqueId; each checks every element of every collective, groups of
 * sends and receives, PreMulSum, split, a nonblocking init, and that what loom does not have is refused
 * with a message instead of a crash.  Exit status 0 when every rank passed. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <nccl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int gRank = -1;
static int gFailures = 0;

#define CHECK(cond, ...)                                      \
  do {                                                        \
    if (!(cond)) {                                            \
      fprintf(stderr, "rank %d, line %d: ", gRank, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                           \
      fprintf(stderr, "\n");                                  \
      ++gFailures;                                            \
    }                                                         \
  } while (0)

#define OK(call)                                                                                          \
  do {                                                                                                    \
    ncclResult_t r_ = (call);                                                                             \
    CHECK(r_ == ncclSuccess, "%s = %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
  } while (0)

/* Polls a nonblocking communicator until its work has ended (bounded: 30 s). */
static ncclResult_t settle(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 30000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) {
      const struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
  }
  return state;
}

static void collectives(ncclComm_t comm, int n, int me) {
  enum { kCount = 70000 }; /* odd-sized, larger than one pipelining slot */
  float* f = malloc(sizeof(float) * kCount * n);
  float* g = malloc(sizeof(float) * kCount * n);
  int32_t* i32 = malloc(sizeof(int32_t) * kCount);
  int64_t* i64 = malloc(sizeof(int64_t) * kCount);
  size_t k;
  int p;

  for (k = 0; k < kCount; ++k) f[k] = (float)(me + 1) * (float)(k % 7);
  OK(ncclAllReduce(f, g, kCount, ncclFloat32, ncclSum, comm, NULL));
  for (k = 0; k < kCount; ++k) CHECK(g[k] == (float)(n * (n + 1) / 2) * (float)(k % 7), "allreduce sum [%zu] = %g", k, g[k]);

  for (k = 0; k < kCount; ++k) i32[k] = (int32_t)((me * 31 + (int)k) % 97);
  OK(ncclAllReduce(i32, i32, kCount, ncclInt32, ncclMax, comm, NULL)); /* in place */
  for (k = 0; k < kCount; ++k) {
    int32_t want = 0;
    for (p = 0; p < n; ++p) want = (p * 31 + (int)k) % 97 > want ? (p * 31 + (int)k) % 97 : want;
    CHECK(i32[k] == want, "allreduce max [%zu] = %d, want %d", k, i32[k], want);
  }

  for (k = 0; k < kCount; ++k) f[k] = me == 1 % n ? (float)k : -1.0f;
  OK(ncclBroadcast(f, g, kCount, ncclFloat32, 1 % n, comm, NULL));
  for (k = 0; k < kCount; ++k) CHECK(g[k] == (float)k, "broadcast [%zu] = %g", k, g[k]);
  for (k = 0; k < kCount; ++k) f[k] = me == 0 ? (float)(k * 2) : 0.0f;
  OK(ncclBcast(f, kCount, ncclFloat32, 0, comm, NULL));
  for (k = 0; k < kCount; ++k) CHECK(f[k] == (float)(k * 2), "bcast [%zu] = %g", k, f[k]);

  for (k = 0; k < kCount; ++k) i64[k] = (int64_t)me * 1000000007LL + (int64_t)k;
  OK(ncclReduce(i64, i64, kCount, ncclInt64, ncclSum, n - 1, comm, NULL));
  if (me == n - 1)
    for (k = 0; k < kCount; ++k)
      CHECK(i64[k] == (int64_t)n * (n - 1) / 2 * 1000000007LL + (int64_t)n * (int64_t)k, "reduce [%zu]", k);

  for (k = 0; k < kCount; ++k) f[k] = (float)(me * kCount + k);
  OK(ncclAllGather(f, g, kCount, ncclFloat32, comm, NULL));
  for (k = 0; k < (size_t)kCount * n; ++k) CHECK(g[k] == (float)k, "allgather [%zu] = %g", k, g[k]);

  for (k = 0; k < (size_t)kCount * n; ++k) g[k] = (float)(k % 1000) + (float)me;
  OK(ncclReduceScatter(g, f, kCount, ncclFloat32, ncclSum, comm, NULL));
  for (k = 0; k < kCount; ++k)
    CHECK(f[k] == (float)n * (float)((me * kCount + k) % 1000) + (float)(n * (n - 1) / 2), "reducescatter [%zu] = %g", k,
          f[k]);

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  for (k = 0; k < (size_t)kCount * n; ++k) f[k] = (float)(me * 1000 + k / kCount); /* block d goes to rank d */
  OK(ncclAlltoAll(f, g, kCount, ncclFloat32, comm, NULL));
  for (k = 0; k < (size_t)kCount * n; ++k)
    CHECK(g[k] == (float)((k / kCount) * 1000 + me), "alltoall [%zu] = %g", k, g[k]);
  for (k = 0; k < kCount; ++k) f[k] = (float)(me + k);
  OK(ncclGather(f, g, kCount, ncclFloat32, 0, comm, NULL));
  if (me == 0)
    for (k = 0; k < (size_t)kCount * n; ++k) CHECK(g[k] == (float)(k / kCount + k % kCount), "gather [%zu]", k);
  for (k = 0; k < (size_t)kCount * n; ++k) g[k] = me == n - 1 ? (float)(k * 3) : -1.0f;
  OK(ncclScatter(g, f, kCount, ncclFloat32, n - 1, comm, NULL));
  for (k = 0; k < kCount; ++k) CHECK(f[k] == (float)((me * kCount + k) * 3), "scatter [%zu] = %g", k, f[k]);
#endif

  /* A group of sends and receives to both neighbours. */
  {
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    float* left = g;
    float* right = g + kCount;
    for (k = 0; k < kCount; ++k) f[k] = (float)(me * 10 + (int)(k % 5));
    OK(ncclGroupStart());
    OK(ncclSend(f, kCount, ncclFloat32, next, comm, NULL));
    OK(ncclSend(f, kCount, ncclFloat32, prev, comm, NULL));
    OK(ncclRecv(left, kCount, ncclFloat32, prev, comm, NULL));
    OK(ncclRecv(right, kCount, ncclFloat32, next, comm, NULL));
    OK(ncclGroupEnd());
    for (k = 0; k < kCount; ++k) {
      CHECK(left[k] == (float)(prev * 10 + (int)(k % 5)), "recv from prev [%zu] = %g", k, left[k]);
      CHECK(right[k] == (float)(next * 10 + (int)(k % 5)), "recv from next [%zu] = %g", k, right[k]);
    }
  }

  /* PreMulSum: each rank's data times its own scalar, then summed. */
  {
    ncclRedOp_t op;
    float scalar = (float)(me + 1);
    OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
    CHECK((int)op >= (int)ncclNumOps, "a PreMulSum op is %d, below ncclNumOps", (int)op);
    for (k = 0; k < kCount; ++k) f[k] = (float)(k % 3);
    OK(ncclAllReduce(f, g, kCount, ncclFloat32, op, comm, NULL));
    for (k = 0; k < kCount; ++k)
      CHECK(g[k] == (float)(k % 3) * (float)(n * (n + 1) / 2), "premulsum [%zu] = %g", k, g[k]);
    OK(ncclRedOpDestroy(op, comm));
  }
  free(f);
  free(g);
  free(i32);
  free(i64);
}

/* What loom does not have, and bad input: refused with a message, never a crash. */
static void refusals(ncclComm_t comm) {
  void* p = NULL;
  float x = 1.0f;
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  ncclComm_t none = NULL;
  void* handle = NULL;
  ncclWindow_t win = NULL;

  CHECK(ncclMemAlloc(&p, 4096) == ncclInvalidUsage, "ncclMemAlloc was not refused");
  CHECK(strstr(ncclGetLastError(comm), "loom") != NULL, "the refusal does not come from loom: '%s'", ncclGetLastError(comm));
  CHECK(ncclCommWindowRegister(comm, &x, sizeof x, &win, 0) == ncclInvalidUsage, "a window was not refused");
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat8e4m3, ncclSum, comm, NULL) == ncclInvalidArgument, "fp8 was not refused");
  CHECK(strstr(ncclGetLastError(comm), "8-bit") != NULL, "fp8 message: '%s'", ncclGetLastError(comm));
#endif
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, NULL, NULL) == ncclInvalidArgument, "a NULL comm was accepted");
  CHECK(ncclAllReduce(&x, &x, 1, (ncclDataType_t)77, ncclSum, comm, NULL) == ncclInvalidArgument, "type 77 was accepted");
  bad.magic = 0;
  CHECK(ncclCommSplit(comm, 0, 0, &none, &bad) == ncclInvalidArgument, "a config without its magic was accepted");
  CHECK(ncclGetErrorString(ncclRemoteError) != NULL && ncclGetErrorString(ncclRemoteError)[0] != '\0', "no error string");
  OK(ncclCommRegister(comm, &x, sizeof x, &handle));
  OK(ncclCommDeregister(comm, handle));
}

static int runRank(ncclUniqueId id, int n, int me) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t comm = NULL, half = NULL;
  int count = 0, rank = -1, version = 0;
  ncclResult_t r;
  gRank = me;
  config.blocking = 0;
  config.commName = "nccl-abi";
  r = ncclCommInitRankConfig(&comm, n, id, me, &config);
  CHECK(r == ncclSuccess || r == ncclInProgress, "ncclCommInitRankConfig = %d: %s", (int)r, ncclGetLastError(NULL));
  if (comm == NULL) return 1;
  CHECK(settle(comm) == ncclSuccess, "the nonblocking init failed: %s", ncclGetLastError(comm));
  OK(ncclCommCount(comm, &count));
  OK(ncclCommUserRank(comm, &rank));
  CHECK(count == n && rank == me, "count %d rank %d", count, rank);
  OK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE, "version %d, built against %d", version, NCCL_VERSION_CODE);

  collectives(comm, n, me);
  refusals(comm);

  r = ncclCommSplit(comm, me % 2, -me, &half, NULL); /* blocking: the parent's config is not inherited */
  CHECK(r == ncclSuccess, "ncclCommSplit = %d: %s", (int)r, ncclGetLastError(comm));
  if (half != NULL) {
    int hn = 0;
    double v = (double)me;
    OK(ncclCommCount(half, &hn));
    OK(ncclAllReduce(&v, &v, 1, ncclFloat64, ncclSum, half, NULL));
    {
      double want = 0;
      int p;
      for (p = me % 2; p < n; p += 2) want += p;
      CHECK(v == want && hn == (n - me % 2 + 1) / 2, "split: sum %g (want %g) over %d ranks", v, want, hn);
    }
    OK(ncclCommDestroy(half));
  }
  r = ncclCommFinalize(comm);
  CHECK(r == ncclSuccess || r == ncclInProgress, "ncclCommFinalize = %d", (int)r);
  CHECK(settle(comm) == ncclSuccess, "the nonblocking finalize failed: %s", ncclGetLastError(comm));
  OK(ncclCommDestroy(comm));
  return gFailures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4, r, failed = 0;
  ncclUniqueId id;
  if (n < 1 || n > 64) {
    fprintf(stderr, "usage: nccl_abi_test [NRANKS in 1..64]\n");
    return 2;
  }
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  for (r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(runRank(id, n, r));
    if (pid < 0) return 1;
  }
  for (r = 0; r < n; ++r) {
    int status = 0;
    pid_t pid = wait(&status);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  printf("nccl_abi_test: %d ranks, nccl.h %d: %s\n", n, NCCL_VERSION_CODE, failed ? "FAILED" : "every check passed");
  return failed;
}
