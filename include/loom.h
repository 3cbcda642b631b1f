/*
 * loom — collective communication over host (and, in CUDA builds, GPU) memory.
 *
 * The API follows NCCL's names and argument order so that code written for NCCL ports by renaming
 * the `nccl` prefix to `loom`.  Every function returns a loomResult_t; on failure a one-line
 * human-readable reason is available from loomGetLastError().
 *
 * Thread-safety:
 *   - loomGetUniqueId, loomGetVersion, loomGetErrorString, loomStreamCreate and the init functions may be
 *     called from any thread.
 *   - One communicator must not be used by two threads at the same time, except loomCommAbort, which may be
 *     called from any thread while another thread is blocked inside a call on that communicator, and
 *     loomCommGetAsyncError, which may be called from any thread at any time.
 *   - One stream must not be used by two threads at the same time (issue, synchronize, query, destroy).
 *   - Different communicators are independent and may be driven concurrently from different threads
 *     (loomCommInitAll gives one communicator per rank, meant to be driven by one thread each).
 *
 * Streams: every collective takes a loomStream_t.
 *   - NULL: the call runs on the caller's thread and is complete when it returns; it starts after every
 *     operation issued before it on this communicator's streams has finished.
 *   - A stream from loomStreamCreate: the call is checked, queued and returns at once; the communicator's
 *     progress thread (one per communicator, started at its first stream call, asleep when idle) runs its
 *     operations one at a time in the order they were issued, whatever their streams, and each operation
 *     also starts only after the previous operation of its stream (which may be on another communicator)
 *     has finished.  Buffers must stay valid and unchanged (send) or untouched (receive) until
 *     loomStreamSynchronize returns or loomStreamQuery says loomSuccess.  Errors of a stream's operations
 *     are reported by loomStreamSynchronize / loomStreamQuery (the message by loomGetLastError on that
 *     thread) and, since a failed operation breaks its communicator, by loomCommGetAsyncError.
 *   - Communicators progress independently: each has its own progress thread.
 *   - loomCommDestroy waits for the communicator's queued operations; loomCommAbort ends them
 *     (loomInvalidUsage for those that had not started).
 *   - A cudaStream_t (CUDA builds, when the process sees a GPU; LOOM_CUDA=0 turns this off): the call is
 *     checked, queued and returns at once, without waiting for the GPU.  It runs on the communicator's
 *     progress thread once the stream has finished the work issued on it before the call, and the
 *     stream's later work waits until it has ended, as with NCCL.  A failure (or LOOM_TIMEOUT) releases
 *     the stream and is reported by loomCommGetAsyncError.  Any other pointer is loomInvalidArgument.
 *
 * Device buffers (CUDA builds): any buffer may be device memory, on any stream.  When every rank of the
 * communicator is on one host and each rank's GPU reaches the others' (the same GPU, or peer-to-peer
 * over NVLink or PCIe), a collective reads its peers' buffers directly (CUDA IPC; LOOM_DEVICE_P2P=0
 * turns this off); otherwise, and for send/recv, groups and PreMulSum ops, device data is staged
 * through page-locked host memory and moved by the host algorithms and transports, so it works across
 * hosts, MIG instances and any transport alike.  As with NCCL, the ranks of one call pass device
 * buffers alike (all device or all host memory); mixing them fails the call with loomInvalidUsage unless
 * LOOM_DEVICE_P2P=0.
 */
#ifndef LOOM_H_
#define LOOM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MAJOR 0
#define LOOM_MINOR 1
#define LOOM_PATCH 0
/* Same encoding as NCCL 2.9+: major*10000 + minor*100 + patch. */
#define LOOM_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define LOOM_VERSION_CODE LOOM_VERSION(LOOM_MAJOR, LOOM_MINOR, LOOM_PATCH)

/* Result codes.  Values 0..7 match NCCL's so tools that print numeric codes read the same. */
typedef enum {
  loomSuccess = 0,
  loomUnhandledCudaError = 1,
  loomSystemError = 2,     /* a system call or the OS failed (out of memory, shm, sockets) */
  loomInternalError = 3,   /* a bug in loom */
  loomInvalidArgument = 4, /* a bad value was passed (NULL pointer, bad type, rank out of range, ...) */
  loomInvalidUsage = 5,    /* a valid call at the wrong time (mismatched collectives, not implemented yet, ...) */
  loomRemoteError = 6,     /* a peer failed, died or disconnected; the message names it */
  loomInProgress = 7,      /* a non-blocking operation has not finished yet */
  loomTimeout = 8,         /* a wait exceeded LOOM_TIMEOUT; the message names the operation and peer */
  loomNumResults = 9,
  /* Not values: they give the enum the range of int, so that a bad value passed in can be refused with
   * an error (in C++ a value outside an enum's range is undefined behaviour). */
  loomResultRangeMin_ = -0x7fffffff - 1,
  loomResultRangeMax_ = 0x7fffffff
} loomResult_t;

typedef enum {
  loomInt8 = 0, loomChar = 0,
  loomUint8 = 1,
  loomInt32 = 2, loomInt = 2,
  loomUint32 = 3,
  loomInt64 = 4,
  loomUint64 = 5,
  loomFloat16 = 6, loomHalf = 6,
  loomFloat32 = 7, loomFloat = 7,
  loomFloat64 = 8, loomDouble = 8,
  loomBfloat16 = 9,
  loomNumTypes = 10,
  /* Not values: they give the enum the range of int, so that a bad value passed in can be refused with
   * an error (in C++ a value outside an enum's range is undefined behaviour). */
  loomDataTypeRangeMin_ = -0x7fffffff - 1,
  loomDataTypeRangeMax_ = 0x7fffffff
} loomDataType_t;

typedef enum {
  loomSum = 0,
  loomProd = 1,
  loomMax = 2,
  loomMin = 3,
  loomAvg = 4, /* sum divided by the number of ranks (integer division for integer types) */
  loomNumOps = 5,
  loomMaxRedOp = 0x7fffffff, /* keeps the enum 32-bit wide for user-created ops */
  loomRedOpRangeMin_ = -0x7fffffff - 1 /* not an op: negative values are refused, not undefined */
} loomRedOp_t;

/* Where the scalar of a PreMulSum op lives: read at each call through the pointer (loomScalarDevice; host
 * memory in host builds), or copied once when the op is created (loomScalarHostImmediate). */
typedef enum {
  loomScalarDevice = 0,
  loomScalarHostImmediate = 1,
  loomScalarResidenceRangeMin_ = -0x7fffffff - 1, /* not values: bad values are refused, not undefined */
  loomScalarResidenceRangeMax_ = 0x7fffffff
} loomScalarResidence_t;

#define LOOM_UNIQUE_ID_BYTES 128
/* Opaque rendezvous token: the root's address and a random 128-bit secret.  Make it on one rank with
 * loomGetUniqueId and hand it to every rank (MPI_Bcast, a file, a key-value store). */
typedef struct {
  char internal[LOOM_UNIQUE_ID_BYTES];
} loomUniqueId;

typedef struct loomComm* loomComm_t;
/* NULL, a stream from loomStreamCreate, or (CUDA builds) a cudaStream_t.  See "Streams" above. */
typedef void* loomStream_t;

#define LOOM_SPLIT_NOCOLOR (-1)
#define LOOM_CONFIG_UNDEF_INT INT32_MIN
#define LOOM_CONFIG_MAGIC 0x6d6f6f6cu /* "loom" */

/* Per-communicator settings.  Always start from LOOM_CONFIG_INITIALIZER: `size`, `magic` and `version`
 * let the library accept configs from older headers as the struct grows. */
typedef struct loomConfig_v1 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;          /* 1 (default): init, split, shrink and finalize return when done.  0: they return
                          * loomInProgress with the communicator set, and finish on a thread of their own;
                          * poll loomCommGetAsyncError until it says something else (see "Nonblocking"). */
  int timeoutSec;        /* overrides LOOM_TIMEOUT for this communicator; LOOM_CONFIG_UNDEF_INT keeps it */
  const char* commName;  /* shown in log lines; may be NULL */
} loomConfig_t;

#define LOOM_CONFIG_INITIALIZER \
  { sizeof(loomConfig_t), LOOM_CONFIG_MAGIC, LOOM_VERSION_CODE, LOOM_CONFIG_UNDEF_INT, LOOM_CONFIG_UNDEF_INT, NULL }

/* ---- library ---- */
loomResult_t loomGetVersion(int* version);
const char* loomGetErrorString(loomResult_t result);
/* The message of the last failure on this thread (comm may be NULL), or "" when there was none. */
const char* loomGetLastError(loomComm_t comm);

/* ---- communicators ---- */
loomResult_t loomGetUniqueId(loomUniqueId* uniqueId);
loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId, int rank);
loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId, int rank,
                                    loomConfig_t* config);
/* As loomCommInitRankConfig, with the rendezvous shared by nId roots: commIds holds nId ids, each from
 * loomGetUniqueId (typically called on nId different ranks, whose processes then run a root each; not
 * under LOOM_COMM_ID), the same array on every rank.  Root k meets the k-th of nId equal blocks of ranks,
 * and the first rank of each block fetches the other blocks' tables from their roots, so that no root
 * meets more than its block and nId - 1 other ranks (NCCL's ncclCommInitRankScalable).  1 <= nId <= nranks. */
loomResult_t loomCommInitRankScalable(loomComm_t* comm, int nranks, int rank, int nId, loomUniqueId* commIds,
                                      loomConfig_t* config);
/* Creates `ndev` ranks inside this process, one communicator each.  devlist may be NULL (host ranks).
 * Drive each returned communicator from its own thread. */
loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist);
/* Collective over `comm`: ranks with the same color form a new communicator, ordered by (key, old rank).
 * color LOOM_SPLIT_NOCOLOR yields *newcomm == NULL. */
loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm, loomConfig_t* config);
/* Flags of loomCommShrink. */
#define LOOM_SHRINK_DEFAULT 0x00
#define LOOM_SHRINK_ABORT 0x01 /* first end what is still in flight on comm (stream operations) */
/* The ranks of comm that are not listed in excludeRanks (typically: the ranks that died) make a new
 * communicator among themselves, ranks renumbered in their old order, through comm's bootstrap: no new
 * unique id is handed around.  Works on a failed communicator: that is its point.  Every surviving
 * rank calls it with the same list; excluded ranks do not call it (loomInvalidUsage if they do).  The
 * old communicator stays failed (or as it was): free it with loomCommAbort (loomCommDestroy where no
 * rank died).  Bounded by the timeout; a listed-as-alive rank that is gone fails it with
 * loomRemoteError naming that rank.  config as for loomCommInitRankConfig (NULL: comm's timeout). */
loomResult_t loomCommShrink(loomComm_t comm, const int* excludeRanks, int nExclude, loomComm_t* newcomm,
                            loomConfig_t* config, int flags);
/* Completes every operation issued on comm (streams included) and, where it uses a network transport
 * and its ranks live in different processes, meets the other ranks, so that a loomCommDestroy after it
 * only frees.  Call it on every rank.  Returns the error of an operation that failed, or of a rank that
 * did not come within the timeout; loomCommAbort from another thread ends it.  Afterwards only
 * loomCommDestroy (or loomCommAbort) may be called on comm. */
loomResult_t loomCommFinalize(loomComm_t comm);
/* Frees the communicator.  Unless loomCommFinalize was called, it first does what that does (a rank that
 * does not come is logged, not returned): call it on every rank, in the same order for several comms. */
loomResult_t loomCommDestroy(loomComm_t comm);
/* Stops every operation on comm (from any thread), releases its resources; peers see loomRemoteError. */
loomResult_t loomCommAbort(loomComm_t comm);
loomResult_t loomCommCount(const loomComm_t comm, int* count);
loomResult_t loomCommUserRank(const loomComm_t comm, int* rank);
/* loomSuccess, or the error that put the communicator in a failed state (every later call returns it;
 * the message is then this thread's loomGetLastError), or loomInProgress while a nonblocking init,
 * split, shrink or finalize of comm is still running.
 * Nonblocking (config.blocking = 0): while that work runs, every call on comm but this one,
 * loomCommCount, loomCommUserRank, loomCommDestroy (which waits for it) and loomCommAbort (which ends it)
 * returns loomInProgress.  The work is bounded by the timeout like any wait.  A split or shrink
 * exchanges what it needs over the parent before it returns; the new communicator's own setup is what
 * runs on.  Collectives behave as on any communicator (on a loom or device stream they are queued). */
loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError);
/* The rank a failed communicator blames: the one that died or failed first, as the survivors announce it
 * to each other (the rank loomCommShrink would leave out); -1 while it has not lost a rank. */
loomResult_t loomCommGetFailedRank(loomComm_t comm, int* rank);

/* ---- collectives (count is in elements of datatype) ---- */
loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                           loomRedOp_t op, loomComm_t comm, loomStream_t stream);
loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, int root,
                           loomComm_t comm, loomStream_t stream);
loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                        loomRedOp_t op, int root, loomComm_t comm, loomStream_t stream);
loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, loomDataType_t datatype,
                           loomComm_t comm, loomStream_t stream);
loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, loomDataType_t datatype,
                               loomRedOp_t op, loomComm_t comm, loomStream_t stream);
loomResult_t loomAllToAll(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                          loomComm_t comm, loomStream_t stream);
loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream);
loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream);
/* A receive from whichever rank sends first a message of this count and datatype (MPI_ANY_SOURCE): its rank
 * is written to *source when the receive completes (on a stream: before the stream passes it).  Host
 * buffers only, not inside a group (loomInvalidUsage), count > 0.  Messages from one rank still arrive in
 * the order it sent them; a message of another count or type is left for the receive it belongs to. */
loomResult_t loomRecvAnySource(void* recvbuff, size_t count, loomDataType_t datatype, int* source, loomComm_t comm,
                               loomStream_t stream);
/* Calls between GroupStart and GroupEnd are checked at once and run at the outermost GroupEnd: each
 * communicator's collectives in call order, then all its sends and receives together, in any order without
 * deadlock.  Several communicators in one group progress at once.  All calls of a group name the same
 * stream (else GroupEnd returns loomInvalidUsage and runs nothing); on a stream, GroupEnd returns at once. */
loomResult_t loomGroupStart(void);
loomResult_t loomGroupEnd(void);

/* ---- host streams (see "Streams" at the top) ---- */
loomResult_t loomStreamCreate(loomStream_t* stream);
/* Waits until every operation issued on the stream has finished (each is bounded by its communicator's
 * timeout).  Returns the first failure among them since the last synchronize, else loomSuccess. */
loomResult_t loomStreamSynchronize(loomStream_t stream);
/* loomInProgress while an operation of the stream has not finished; else what loomStreamSynchronize
 * would return (without forgetting a failure).  Never blocks. */
loomResult_t loomStreamQuery(loomStream_t stream);
/* Waits for the stream's operations (as loomStreamSynchronize), then frees it. */
loomResult_t loomStreamDestroy(loomStream_t stream);

/* A reduction op of `comm` that sums scalar * input over the ranks (each rank its own scalar).
 * Use it with datatype only; release it with loomRedOpDestroy. */
loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t* op, void* scalar, loomDataType_t datatype,
                                      loomScalarResidence_t residence, loomComm_t comm);
loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_H_ */
