// libloom_nccl: NCCL's C API on top of loom's, so that a program written against nccl.h runs on loom by
// linking this library instead of libnccl (or by putting its libnccl.so.2 link first on the library path,
// or by LD_PRELOADing it).  It is compiled against a real nccl.h (the nvidia-nccl wheel's, else the CUDA
// toolkit's: see CMakeLists.txt), so its types, enum values and the ncclConfig_t layout are NCCL's own.
//
// Only loom.h is used: this is a binding, like bindings/torch, on the top floor.  The two APIs were made
// to line up: result codes, data types 0-9, reduction ops (PreMulSum ops included: both number them
// from NumOps up), scalar residences, the unique id's 128 bytes and the split/shrink flags have the same
// values (checked below at compile time), so most calls convert nothing.  What loom does not have
// (8-bit floats, memory windows and signals, communicator growth, the parameter API, suspend/resume)
// returns ncclInvalidUsage or ncclInvalidArgument with a message (ncclGetLastError), never a crash.
#include <nccl.h>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "loom.h"

#define LOOM_NCCL_API extern "C" __attribute__((visibility("default")))

static_assert(sizeof(ncclUniqueId) == sizeof(loomUniqueId), "unique ids differ in size");
static_assert(static_cast<int>(ncclSuccess) == loomSuccess && static_cast<int>(ncclSystemError) == loomSystemError &&
                  static_cast<int>(ncclInvalidArgument) == loomInvalidArgument &&
                  static_cast<int>(ncclInvalidUsage) == loomInvalidUsage &&
                  static_cast<int>(ncclRemoteError) == loomRemoteError &&
                  static_cast<int>(ncclInProgress) == loomInProgress,
              "result codes differ");
static_assert(static_cast<int>(ncclBfloat16) == loomBfloat16 && static_cast<int>(ncclFloat32) == loomFloat32 &&
                  static_cast<int>(ncclFloat16) == loomFloat16 && static_cast<int>(ncclUint64) == loomUint64,
              "data types differ");
static_assert(static_cast<int>(ncclNumOps) == loomNumOps && static_cast<int>(ncclAvg) == loomAvg &&
                  static_cast<int>(ncclMin) == loomMin,
              "reduction ops differ");
static_assert(static_cast<int>(ncclScalarHostImmediate) == loomScalarHostImmediate, "scalar residences differ");
static_assert(NCCL_SHRINK_ABORT == LOOM_SHRINK_ABORT && NCCL_SPLIT_NOCOLOR == LOOM_SPLIT_NOCOLOR, "flags differ");

namespace {

// This library's own last failure (a call loom does not have, an argument only NCCL knows); empty when
// the last failure was loom's, whose message loomGetLastError has.
thread_local std::string tMessage;

ncclResult_t fromLoom(loomResult_t r) {
  tMessage.clear();
  if (r == loomTimeout) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
    return ncclTimeout;
#else
    return ncclRemoteError;  // this header has no ncclTimeout: a peer that does not answer
#endif
  }
  return static_cast<ncclResult_t>(r);
}

__attribute__((format(printf, 2, 3))) ncclResult_t refuse(ncclResult_t r, const char* fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  tMessage = text;
  return r;
}

ncclResult_t notInLoom(const char* fn, const char* what) {
  return refuse(ncclInvalidUsage, "%s: loom does not have %s (libloom_nccl)", fn, what);
}

loomComm_t L(ncclComm_t comm) { return reinterpret_cast<loomComm_t>(comm); }
loomStream_t S(cudaStream_t stream) { return reinterpret_cast<loomStream_t>(stream); }
loomRedOp_t O(ncclRedOp_t op) { return static_cast<loomRedOp_t>(static_cast<int>(op)); }

// loom has the types 0-9; NCCL's 8-bit floats are refused by name (other values loom refuses itself).
bool typeOk(ncclDataType_t type, const char* fn, loomDataType_t* out, ncclResult_t* r) {
  const int t = static_cast<int>(type);
  if (t == 10 || t == 11) {
    *r = refuse(ncclInvalidArgument, "%s: 8-bit float data (ncclFloat8e4m3, ncclFloat8e5m2) is not supported by loom",
                fn);
    return false;
  }
  *out = static_cast<loomDataType_t>(t);
  return true;
}

// NCCL's config as loom's: `blocking` and `commName` carry over; the rest tunes NCCL's kernels (CTAs,
// NVLS, CollNet) and has no meaning here.  Fields past the caller's `size` (an older nccl.h) are unset.
ncclResult_t toLoomConfig(const ncclConfig_t* in, const char* fn, loomConfig_t* out) {
  *out = loomConfig_t LOOM_CONFIG_INITIALIZER;
  if (in == nullptr) return ncclSuccess;
  static const ncclConfig_t initial = NCCL_CONFIG_INITIALIZER;  // its magic, as this nccl.h makes it
  if (in->magic != initial.magic || in->size < offsetof(ncclConfig_t, blocking) + sizeof(int) || in->size > 65536)
    return refuse(ncclInvalidArgument, "%s: config was not initialised with NCCL_CONFIG_INITIALIZER", fn);
  if (in->blocking != NCCL_CONFIG_UNDEF_INT) out->blocking = in->blocking;
  if (in->size >= offsetof(ncclConfig_t, commName) + sizeof(in->commName)) out->commName = in->commName;
  return ncclSuccess;
}

loomUniqueId toLoomId(const ncclUniqueId& id) {
  loomUniqueId out;
  std::memcpy(&out, &id, sizeof out);
  return out;
}

// Gather and scatter are point-to-point transfers with the root in one group (loom copies the root's
// own block as a send to itself).
ncclResult_t rooted(bool gather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                    int root, ncclComm_t comm, cudaStream_t stream, const char* fn) {
  loomDataType_t type;
  ncclResult_t bad;
  if (!typeOk(datatype, fn, &type, &bad)) return bad;
  int n = 0, me = -1;
  if (loomCommCount(L(comm), &n) != loomSuccess || loomCommUserRank(L(comm), &me) != loomSuccess)
    return fromLoom(loomInvalidArgument);
  if (root < 0 || root >= n) return refuse(ncclInvalidArgument, "%s: root %d out of range [0, %d)", fn, root, n);
  static const size_t typeBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  if (static_cast<int>(type) < 0 || static_cast<int>(type) >= loomNumTypes)
    return refuse(ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", fn, static_cast<int>(type));
  const size_t block = count * typeBytes[type];
  loomResult_t r = loomGroupStart();
  if (r != loomSuccess) return fromLoom(r);
  if (gather) {
    r = loomSend(sendbuff, count, type, root, L(comm), S(stream));
    for (int p = 0; p < n && me == root && r == loomSuccess; ++p)
      r = loomRecv(static_cast<char*>(recvbuff) + p * block, count, type, p, L(comm), S(stream));
  } else {
    for (int p = 0; p < n && me == root && r == loomSuccess; ++p)
      r = loomSend(static_cast<const char*>(sendbuff) + p * block, count, type, p, L(comm), S(stream));
    if (r == loomSuccess) r = loomRecv(recvbuff, count, type, root, L(comm), S(stream));
  }
  const loomResult_t ended = loomGroupEnd();  // always: the group must be closed
  return fromLoom(r != loomSuccess ? r : ended);
}

}  // namespace

// ---- library ----
LOOM_NCCL_API ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return refuse(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;  // the API this library implements (the nccl.h it was built against)
  return ncclSuccess;
}

LOOM_NCCL_API const char* ncclGetErrorString(ncclResult_t result) {
  switch (static_cast<int>(result)) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with LOOM_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with LOOM_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the loom developers";
    case ncclInvalidArgument: return "invalid argument (run with LOOM_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with LOOM_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case 8: return "a wait exceeded LOOM_TIMEOUT";
    default: return "unknown result code";
  }
}

LOOM_NCCL_API const char* ncclGetLastError(ncclComm_t comm) {
  return tMessage.empty() ? loomGetLastError(L(comm)) : tMessage.c_str();
}

LOOM_NCCL_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return refuse(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  loomUniqueId id;
  const loomResult_t r = loomGetUniqueId(&id);
  if (r == loomSuccess) std::memcpy(uniqueId, &id, sizeof id);
  return fromLoom(r);
}

LOOM_NCCL_API ncclResult_t ncclMemAlloc(void**, size_t) {
  return notInLoom("ncclMemAlloc", "its own allocator (any host or cudaMalloc'd buffer works as it is)");
}
LOOM_NCCL_API ncclResult_t ncclMemFree(void*) { return notInLoom("ncclMemFree", "its own allocator"); }

// ---- communicators ----
LOOM_NCCL_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                  ncclConfig_t* config) {
  loomConfig_t c;
  const ncclResult_t bad = toLoomConfig(config, "ncclCommInitRankConfig", &c);
  if (bad != ncclSuccess) return bad;
  return fromLoom(loomCommInitRankConfig(reinterpret_cast<loomComm_t*>(comm), nranks, toLoomId(commId), rank, &c));
}

LOOM_NCCL_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return fromLoom(loomCommInitRank(reinterpret_cast<loomComm_t*>(comm), nranks, toLoomId(commId), rank));
}

// Every rank gets every id; each id's root meets a block of the ranks (loomCommInitRankScalable).
LOOM_NCCL_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                    ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr)
    return refuse(ncclInvalidArgument, "ncclCommInitRankScalable: nId %d with commIds %p", nId,
                  static_cast<void*>(commIds));
  loomConfig_t c;
  const ncclResult_t bad = toLoomConfig(config, "ncclCommInitRankScalable", &c);
  if (bad != ncclSuccess) return bad;
  std::vector<loomUniqueId> ids;
  for (int k = 0; k < nId; ++k) ids.push_back(toLoomId(commIds[k]));
  return fromLoom(
      loomCommInitRankScalable(reinterpret_cast<loomComm_t*>(newcomm), nranks, myrank, nId, ids.data(), &c));
}

LOOM_NCCL_API ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  return fromLoom(loomCommInitAll(reinterpret_cast<loomComm_t*>(comm), ndev, devlist));
}

LOOM_NCCL_API ncclResult_t ncclCommFinalize(ncclComm_t comm) { return fromLoom(loomCommFinalize(L(comm))); }
LOOM_NCCL_API ncclResult_t ncclCommDestroy(ncclComm_t comm) { return fromLoom(loomCommDestroy(L(comm))); }
LOOM_NCCL_API ncclResult_t ncclCommAbort(ncclComm_t comm) { return fromLoom(loomCommAbort(L(comm))); }

LOOM_NCCL_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                         ncclConfig_t* config) {
  loomConfig_t c;
  const ncclResult_t bad = toLoomConfig(config, "ncclCommSplit", &c);
  if (bad != ncclSuccess) return bad;
  return fromLoom(loomCommSplit(L(comm), color, key, reinterpret_cast<loomComm_t*>(newcomm), config ? &c : nullptr));
}

LOOM_NCCL_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                          ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  loomConfig_t c;
  const ncclResult_t bad = toLoomConfig(config, "ncclCommShrink", &c);
  if (bad != ncclSuccess) return bad;
  return fromLoom(loomCommShrink(L(comm), excludeRanksList, excludeRanksCount, reinterpret_cast<loomComm_t*>(newcomm),
                                 config ? &c : nullptr, shrinkFlags));
}

LOOM_NCCL_API ncclResult_t ncclCommRevoke(ncclComm_t, int) {
  return notInLoom("ncclCommRevoke", "a revoke call (a failure revokes the communicator on every survivor by "
                   "itself; ncclCommAbort stops this rank's operations)");
}

LOOM_NCCL_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == nullptr) return refuse(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  loomResult_t e = loomSuccess;
  const loomResult_t r = loomCommGetAsyncError(L(comm), &e);
  if (r == loomSuccess) {
    *asyncError = fromLoom(e);
    return ncclSuccess;
  }
  return fromLoom(r);
}

LOOM_NCCL_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return fromLoom(loomCommCount(L(comm), count));
}
LOOM_NCCL_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return fromLoom(loomCommUserRank(L(comm), rank));
}
LOOM_NCCL_API ncclResult_t ncclCommCuDevice(const ncclComm_t, int* device) {
  if (device != nullptr) *device = -1;
  return notInLoom("ncclCommCuDevice", "a communicator's CUDA device (each call works with its buffers' device; "
                   "ask cudaGetDevice on the thread that made the communicator)");
}

// Registration is a hint loom does not need: every buffer works as it is.
LOOM_NCCL_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t, void** handle) {
  int n = 0;
  const loomResult_t r = loomCommCount(L(comm), &n);  // the communicator must still be a live one
  if (r != loomSuccess) return fromLoom(r);
  if (handle == nullptr) return refuse(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  *handle = buff;
  return ncclSuccess;
}
LOOM_NCCL_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void*) {
  int n = 0;
  return fromLoom(loomCommCount(L(comm), &n));
}

LOOM_NCCL_API ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t* win, int) {
  if (win != nullptr) *win = nullptr;
  return notInLoom("ncclCommWindowRegister", "symmetric memory windows");
}
LOOM_NCCL_API ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
  return notInLoom("ncclCommWindowDeregister", "symmetric memory windows");
}

// ---- reduction ops ----
LOOM_NCCL_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                    ncclScalarResidence_t residence, ncclComm_t comm) {
  loomDataType_t type;
  ncclResult_t bad;
  if (!typeOk(datatype, "ncclRedOpCreatePreMulSum", &type, &bad)) return bad;
  loomRedOp_t made = loomSum;
  const loomResult_t r = loomRedOpCreatePreMulSum(&made, scalar, type,
                                                  static_cast<loomScalarResidence_t>(static_cast<int>(residence)), L(comm));
  if (r == loomSuccess && op != nullptr) *op = static_cast<ncclRedOp_t>(static_cast<int>(made));
  return fromLoom(r);
}
LOOM_NCCL_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return fromLoom(loomRedOpDestroy(O(op), L(comm)));
}

// ---- collectives ----
#define LOOM_NCCL_TYPE(fn)                          \
  loomDataType_t type;                              \
  ncclResult_t bad;                                 \
  if (!typeOk(datatype, fn, &type, &bad)) return bad

LOOM_NCCL_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclAllReduce");
  return fromLoom(loomAllReduce(sendbuff, recvbuff, count, type, O(op), L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclReduce");
  return fromLoom(loomReduce(sendbuff, recvbuff, count, type, O(op), root, L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         int root, ncclComm_t comm, cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclBroadcast");
  return fromLoom(loomBroadcast(sendbuff, recvbuff, count, type, root, L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclBcast");
  return fromLoom(loomBroadcast(buff, buff, count, type, root, L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclAllGather");
  return fromLoom(loomAllGather(sendbuff, recvbuff, sendcount, type, L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                             cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclReduceScatter");
  return fromLoom(loomReduceScatter(sendbuff, recvbuff, recvcount, type, O(op), L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                    ncclComm_t comm, cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclSend");
  return fromLoom(loomSend(sendbuff, count, type, peer, L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                    cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclRecv");
  return fromLoom(loomRecv(recvbuff, count, type, peer, L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclGroupStart() { return fromLoom(loomGroupStart()); }
LOOM_NCCL_API ncclResult_t ncclGroupEnd() { return fromLoom(loomGroupEnd()); }
LOOM_NCCL_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  return notInLoom("ncclGroupSimulateEnd", "a group simulation (loom-sim predicts collectives from a topology)");
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
LOOM_NCCL_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                        ncclComm_t comm, cudaStream_t stream) {
  LOOM_NCCL_TYPE("ncclAlltoAll");
  return fromLoom(loomAllToAll(sendbuff, recvbuff, count, type, L(comm), S(stream)));
}

LOOM_NCCL_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  return rooted(true, sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclGather");
}

LOOM_NCCL_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return rooted(false, sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclScatter");
}
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
// What NCCL 2.30 added that loom does not have.
LOOM_NCCL_API ncclResult_t ncclCommGetUniqueId(ncclComm_t, ncclUniqueId*) {
  return notInLoom("ncclCommGetUniqueId", "communicator growth");
}
LOOM_NCCL_API ncclResult_t ncclCommGrow(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t* newcomm,
                                        ncclConfig_t*) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return notInLoom("ncclCommGrow", "communicator growth");
}
LOOM_NCCL_API ncclResult_t ncclCommSuspend(ncclComm_t, int) { return notInLoom("ncclCommSuspend", "suspend/resume"); }
LOOM_NCCL_API ncclResult_t ncclCommResume(ncclComm_t) { return notInLoom("ncclCommResume", "suspend/resume"); }
LOOM_NCCL_API ncclResult_t ncclCommMemStats(ncclComm_t, ncclCommMemStat_t, uint64_t*) {
  return notInLoom("ncclCommMemStats", "GPU memory statistics");
}
LOOM_NCCL_API ncclResult_t ncclWinGetUserPtr(ncclComm_t, ncclWindow_t, void**) {
  return notInLoom("ncclWinGetUserPtr", "symmetric memory windows");
}
LOOM_NCCL_API ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                                         unsigned int, ncclComm_t, cudaStream_t) {
  return notInLoom("ncclPutSignal", "one-sided puts and signals");
}
LOOM_NCCL_API ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return notInLoom("ncclSignal", "one-sided puts and signals");
}
LOOM_NCCL_API ncclResult_t ncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  return notInLoom("ncclWaitSignal", "one-sided puts and signals");
}
// NCCL's parameter registry: loom's parameters are environment variables (loom-info lists them).
LOOM_NCCL_API ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char*) {
  if (out != nullptr) *out = nullptr;
  return notInLoom("ncclParamBind", "NCCL's parameter registry (loom-info lists loom's LOOM_* variables)");
}
#define LOOM_NCCL_PARAM_GET(name, type)                                                              \
  LOOM_NCCL_API ncclResult_t name(ncclParamHandle_t, type) {                                          \
    return notInLoom(#name, "NCCL's parameter registry (loom-info lists loom's LOOM_* variables)"); \
  }
LOOM_NCCL_PARAM_GET(ncclParamGetI8, int8_t*)
LOOM_NCCL_PARAM_GET(ncclParamGetI16, int16_t*)
LOOM_NCCL_PARAM_GET(ncclParamGetI32, int32_t*)
LOOM_NCCL_PARAM_GET(ncclParamGetI64, int64_t*)
LOOM_NCCL_PARAM_GET(ncclParamGetU8, uint8_t*)
LOOM_NCCL_PARAM_GET(ncclParamGetU16, uint16_t*)
LOOM_NCCL_PARAM_GET(ncclParamGetU32, uint32_t*)
LOOM_NCCL_PARAM_GET(ncclParamGetU64, uint64_t*)
LOOM_NCCL_PARAM_GET(ncclParamGetStr, const char**)
LOOM_NCCL_API ncclResult_t ncclParamGet(ncclParamHandle_t, void*, int, int*) {
  return notInLoom("ncclParamGet", "NCCL's parameter registry (loom-info lists loom's LOOM_* variables)");
}
LOOM_NCCL_API ncclResult_t ncclParamGetParameter(const char*, const char**, int*) {
  return notInLoom("ncclParamGetParameter", "NCCL's parameter registry (loom-info lists loom's LOOM_* variables)");
}
LOOM_NCCL_API ncclResult_t ncclParamGetAllParameterKeys(const char***, int*) {
  return notInLoom("ncclParamGetAllParameterKeys", "NCCL's parameter registry (loom-info lists loom's LOOM_* variables)");
}
LOOM_NCCL_API void ncclParamDumpAll(void) {}
#endif
