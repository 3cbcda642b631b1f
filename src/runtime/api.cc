// The public C API: argument checks, then the communicator and collective layers.  Every entry point
// returns an error code with a message (loomGetLastError) for bad input; none of them trusts a handle
// that is not a live communicator.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/reduce_kernels.h"
#include "runtime/collective.h"
#include "runtime/comm.h"
#include "runtime/group.h"
#include "base/log.h"
#include "base/params.h"
#include "runtime/stream.h"
#include "device_runtime/device_api.h"
#include "device/device_call.h"

using namespace loom;

namespace {

#define LOOM_API_CHECK_COMM(comm, fn)                                                                      \
  CommCall call_(comm);                                                                                    \
  if (!call_.ok())                                                                                         \
    return setError(loomInvalidArgument, "%s: comm %p is not a live communicator (NULL, destroyed or not " \
                    "from loomCommInitRank)", fn, static_cast<const void*>(comm));                         \
  LOOM_CHECK(checkNotInProgress(comm, fn));                                                                \
  if (comm->error != loomSuccess) return setError(comm->error, "%s: the communicator failed earlier: %s", fn, \
                                                  comm->errorMessage.c_str());                            \
  if (comm->finalized) return setError(loomInvalidUsage, "%s: the communicator was finalized (loomCommFinalize): " \
                                       "only loomCommDestroy may follow", fn)

}  // namespace

loomResult_t loom::checkInitArgs(loomComm_t* comm, int nranks, int rank, const loomConfig_t* config, const char* fn) {
  LOOM_CHECK(paramsCheck());
  if (comm == nullptr) return setError(loomInvalidArgument, "%s: comm (the output pointer) is NULL", fn);
  *comm = nullptr;
  if (nranks < 1) return setError(loomInvalidArgument, "%s: nranks %d must be >= 1", fn, nranks);
  if (rank < 0 || rank >= nranks)
    return setError(loomInvalidArgument, "%s: rank %d out of range [0, %d)", fn, rank, nranks);
  if (config != nullptr) {
    if (config->magic != LOOM_CONFIG_MAGIC || config->size < offsetof(loomConfig_t, commName) + sizeof(char*) ||
        config->size > 4096)
      return setError(loomInvalidArgument, "%s: config was not initialised with LOOM_CONFIG_INITIALIZER", fn);
    if (config->blocking != LOOM_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1)
      return setError(loomInvalidArgument, "%s: config.blocking = %d must be 0 or 1", fn, config->blocking);
  }
  return loomSuccess;
}

namespace {

loomResult_t checkTypeOp(loomDataType_t type, loomRedOp_t op, bool needsOp, const char* fn) {
  if (static_cast<int>(type) < 0 || type >= loomNumTypes)
    return setError(loomInvalidArgument, "%s: datatype %d is not a loomDataType_t", fn, static_cast<int>(type));
  if (needsOp && (static_cast<int>(op) < 0 || op >= loomNumOps))
    return setError(loomInvalidArgument, "%s: op %d is not a loomRedOp_t", fn, static_cast<int>(op));
  return loomSuccess;
}

loomResult_t checkCount(size_t count, loomDataType_t type, size_t multiplier, const char* fn, size_t* bytes) {
  size_t es = typeSize(type);
  if (count > SIZE_MAX / es / (multiplier ? multiplier : 1) || count * es > (size_t{1} << 62))
    return setError(loomInvalidArgument, "%s: count %zu of %s overflows the address space (negative count cast to "
                    "size_t?)", fn, count, typeName(type));
  *bytes = count * es;
  return loomSuccess;
}

// NULL (run now), a live stream from loomStreamCreate, or (CUDA builds with a GPU) a device stream.
loomResult_t checkStream(loomStream_t stream, const char* fn, Stream** out, void** deviceStream) {
  *out = nullptr;
  *deviceStream = nullptr;
  if (stream == nullptr) return loomSuccess;
  *out = findStream(stream);
  if (*out != nullptr) return loomSuccess;
  DeviceApi* dev = deviceApi();
  if (dev != nullptr && dev->isStream(stream)) {
    *deviceStream = stream;
    return loomSuccess;
  }
  return setError(loomInvalidArgument, "%s: stream %p is not a live stream from loomStreamCreate, nor a stream of the %s",
                  fn, stream, dev != nullptr ? dev->name() : "CUDA runtime (this process has none or sees no GPU)");
}

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

// The checks every collective shares, then the call itself.  Buffer sizes and the in-place layouts
// follow NCCL (callExtents); a buffer a rank does not use may be NULL.
loomResult_t collective(const char* fn, loomComm_t comm, loomStream_t stream, const CollArgs& args) {
  LOOM_API_CHECK_COMM(comm, fn);
  Stream* onStream = nullptr;
  void* deviceStream = nullptr;
  LOOM_CHECK(checkStream(stream, fn, &onStream, &deviceStream));
  bool reduces = collReduces(args.coll);
  bool preMul = reduces && args.op >= loomNumOps && comm->preMulScalar(args.op, args.type) != nullptr;
  LOOM_CHECK(checkTypeOp(args.type, args.op, reduces && !preMul, fn));
  bool p2p = args.coll == CollType::Send || args.coll == CollType::Recv;
  const bool anySource = args.coll == CollType::Recv && args.root == kAnySource && args.source != nullptr;
  if ((collHasRoot(args.coll) || p2p) && !anySource && (args.root < 0 || args.root >= comm->nranks))
    return setError(loomInvalidArgument, "%s: %s %d out of range [0, %d)", fn, p2p ? "peer" : "root", args.root,
                    comm->nranks);
  size_t bytes = 0;
  bool spread = args.coll == CollType::AllGather || args.coll == CollType::ReduceScatter ||
                args.coll == CollType::AllToAll;
  LOOM_CHECK(checkCount(args.count, args.type, spread ? comm->nranks : 1, fn, &bytes));
  const CallExtents e = callExtents(args, comm->nranks, comm->rank);
  if (e.sendBytes > 0 && args.sendbuff == nullptr) return setError(loomInvalidArgument, "%s: sendbuff is NULL", fn);
  if (e.recvBytes > 0 && args.recvbuff == nullptr) return setError(loomInvalidArgument, "%s: recvbuff is NULL", fn);
  if (!e.inPlace && overlaps(args.sendbuff, e.sendBytes, args.recvbuff, e.recvBytes))
    return setError(loomInvalidArgument, "%s: sendbuff and recvbuff overlap without being the in-place layout", fn);
  if (args.count == 0) return loomSuccess;
  if (groupActive()) return groupEnqueue(DeferredCall(comm, args), onStream, deviceStream);
  DeviceApi* dev = deviceApi();
  const bool device = deviceStream != nullptr ||
                      (dev != nullptr && touchesDevice(dev, DeferredCall(comm, args).resolved(), comm->nranks, comm->rank));
  if (!device && onStream == nullptr) {
    comm->engine->drain();  // what this thread issued on streams before runs first
    return runCall(comm, args);
  }
  DeferredCall later(comm, args);
  std::function<loomResult_t()> run = [later] { return runCall(later.comm, later.resolved()); };
  if (device) run = [later, dev] { return runDeviceCall(later.comm, dev, later.resolved()); };
  if (deviceStream != nullptr) return enqueueOnDeviceStream(dev, deviceStream, {{comm, std::move(run)}});
  if (onStream != nullptr) {
    auto op = std::make_shared<AsyncOp>(std::move(run), onStream->tail());
    onStream->append({op});
    comm->engine->enqueue(op);
    return loomSuccess;
  }
  comm->engine->drain();
  return run();
}

}  // namespace

extern "C" {

loomResult_t loomGetVersion(int* version) {
  if (version == nullptr) return setError(loomInvalidArgument, "loomGetVersion: version is NULL");
  *version = LOOM_VERSION_CODE;
  return loomSuccess;
}

const char* loomGetLastError(loomComm_t) { return lastError(); }

loomResult_t loomGetUniqueId(loomUniqueId* uniqueId) {
  LOOM_CHECK(paramsCheck());
  if (uniqueId == nullptr) return setError(loomInvalidArgument, "loomGetUniqueId: uniqueId is NULL");
  UniqueIdData id{};
  int fd = -1;
  LOOM_CHECK(makeUniqueId(&id, &fd));
  if (fd >= 0) LOOM_CHECK(startRoot(id, fd, static_cast<double>(params().TIMEOUT)));
  encodeUniqueId(id, uniqueId);
  return loomSuccess;
}

loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId, int rank,
                                    loomConfig_t* config) {
  LOOM_CHECK(checkInitArgs(comm, nranks, rank, config, "loomCommInitRank"));
  UniqueIdData id{};
  LOOM_CHECK(decodeUniqueId(commId, &id));
  return commCreate(comm, nranks, id, rank, config);
}

loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId, int rank) {
  return loomCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

loomResult_t loomCommInitRankScalable(loomComm_t* comm, int nranks, int rank, int nId, loomUniqueId* commIds,
                                      loomConfig_t* config) {
  LOOM_CHECK(checkInitArgs(comm, nranks, rank, config, "loomCommInitRankScalable"));
  if (commIds == nullptr) return setError(loomInvalidArgument, "loomCommInitRankScalable: commIds is NULL");
  if (nId < 1 || nId > nranks)
    return setError(loomInvalidArgument, "loomCommInitRankScalable: nId %d must lie in 1..nranks (%d)", nId, nranks);
  std::vector<UniqueIdData> ids(static_cast<size_t>(nId));
  for (int k = 0; k < nId; ++k) {
    LOOM_CHECK(decodeUniqueId(commIds[k], &ids[static_cast<size_t>(k)]));
    // A LOOM_COMM_ID id names rank 0 as its root: only one such root exists.
    if (nId > 1 && ids[static_cast<size_t>(k)].rootInRank0)
      return setError(loomInvalidArgument, "loomCommInitRankScalable: id %d was made under LOOM_COMM_ID, whose one "
                      "root is rank 0; make each id with loomGetUniqueId without LOOM_COMM_ID", k);
  }
  if (nId == 1) return commCreate(comm, nranks, ids[0], rank, config);
  return commCreate(comm, nranks, combineIds(ids), rank, config, nullptr, ids);
}

loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* /*devlist: host ranks ignore it*/) {
  LOOM_CHECK(paramsCheck());
  if (comms == nullptr) return setError(loomInvalidArgument, "loomCommInitAll: comms is NULL");
  if (ndev < 1) return setError(loomInvalidArgument, "loomCommInitAll: ndev %d must be >= 1", ndev);
  loomUniqueId uid;
  LOOM_CHECK(loomGetUniqueId(&uid));
  UniqueIdData id{};
  LOOM_CHECK(decodeUniqueId(uid, &id));
  std::vector<loomResult_t> results(ndev, loomSuccess);
  std::vector<std::string> messages(ndev);
  std::vector<std::thread> threads;
  for (int r = 0; r < ndev; ++r) {
    comms[r] = nullptr;
    threads.emplace_back([&, r] {
      results[r] = commCreate(&comms[r], ndev, id, r, nullptr);
      messages[r] = lastError();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ndev; ++r) {
    if (results[r] == loomSuccess) continue;
    for (int k = 0; k < ndev; ++k)
      if (comms[k] != nullptr) commFree(comms[k], true), comms[k] = nullptr;
    return setError(results[r], "loomCommInitAll: rank %d: %s", r, messages[r].c_str());
  }
  return loomSuccess;
}

loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm, loomConfig_t* config) {
  if (newcomm == nullptr) return setError(loomInvalidArgument, "loomCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != LOOM_SPLIT_NOCOLOR)
    return setError(loomInvalidArgument, "loomCommSplit: color %d must be >= 0 or LOOM_SPLIT_NOCOLOR", color);
  LOOM_API_CHECK_COMM(comm, "loomCommSplit");
  if (config != nullptr) LOOM_CHECK(checkInitArgs(newcomm, 1, 0, config, "loomCommSplit"));
  comm->engine->drain();  // the split's exchanges come after the calls issued before it

  // Everyone learns everyone's (color, key); the first member of each color makes the new unique id.
  struct Entry {
    int32_t color, key;
    UniqueIdData id;
  };
  std::vector<Entry> all(comm->nranks);
  all[comm->rank].color = color;
  all[comm->rank].key = key;
  LOOM_CHECK(comm->fail(comm->bootstrap->allGather(all.data(), sizeof(Entry))));
  std::vector<int> members;
  for (int r = 0; r < comm->nranks; ++r)
    if (color != LOOM_SPLIT_NOCOLOR && all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  bool leader = !members.empty() && members[0] == comm->rank;
  loomResult_t made = loomSuccess;
  if (leader) {
    int fd = -1;
    made = makeUniqueId(&all[comm->rank].id, &fd, /*jobId=*/false);
    if (made == loomSuccess && fd >= 0) made = startRoot(all[comm->rank].id, fd, comm->timeoutSec);
  }
  // Exchange the ids even if making ours failed, so no peer waits for us; then report.
  LOOM_CHECK(comm->fail(comm->bootstrap->allGather(all.data(), sizeof(Entry))));
  LOOM_CHECK(made);
  if (color == LOOM_SPLIT_NOCOLOR) return loomSuccess;
  int newRank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  cfg.timeoutSec = static_cast<int>(comm->timeoutSec);
  const CommParent parent = CommParent::of(*comm, members);
  return commCreate(newcomm, static_cast<int>(members.size()), all[members[0]].id, newRank,
                    config != nullptr ? config : &cfg, &parent);
}

namespace {

// What loomCommFinalize does and loomCommDestroy does first where it was not called: operations issued on
// streams finish (or fail, bounded by the timeout), then, over a network transport, every rank is met
// before the receiving ends close (the last data a peer sent may still be on its way, or its transport may
// still wait for our acknowledgement).  Only while healthy, since a failed peer would not come, and not
// when ranks share this process (loomCommInitAll: one thread may end them one after another); bounded by
// the timeout, and by loomCommAbort from another thread.
loomResult_t finalizeComm(loomComm* comm) {
  if (comm->error != loomSuccess) return comm->error;  // a nonblocking init that failed has no engine
  comm->engine->drain();
  if (comm->error != loomSuccess) return comm->error;
  const bool ranksShareProcess = std::any_of(comm->peers.begin(), comm->peers.end(), [&](const PeerInfo& p) {
    return p.rank != comm->rank && p.pid == comm->peers[comm->rank].pid &&
           p.hostHash == comm->peers[comm->rank].hostHash && p.pidNamespace == comm->peers[comm->rank].pidNamespace;
  });
  if (!comm->threadedSends || ranksShareProcess) return loomSuccess;
  return comm->bootstrap->barrier();
}

}  // namespace

namespace {

loomResult_t finalizeAndReport(loomComm* comm) {
  const loomResult_t r = finalizeComm(comm);
  comm->finalized = true;
  if (r == loomSuccess) return loomSuccess;
  if (comm->error != loomSuccess)
    return setError(comm->error, "loomCommFinalize: an operation failed: %s", comm->errorMessage.c_str());
  return comm->fail(r);  // not every rank came (the barrier's message)
}

}  // namespace

loomResult_t loomCommFinalize(loomComm_t comm) {
  LOOM_API_CHECK_COMM(comm, "loomCommFinalize");
  if (!comm->blocking) return runInBackground(comm, finalizeAndReport);
  return finalizeAndReport(comm);
}

loomResult_t loomCommDestroy(loomComm_t comm) {
  {
    CommCall call(comm);
    if (!call.ok()) return setError(loomInvalidArgument, "loomCommDestroy: comm %p is not a live communicator",
                                    static_cast<void*>(comm));
    joinBackground(comm);  // a nonblocking init or finalize still running: it is bounded by the timeout
    if (!comm->finalized && finalizeComm(comm) != loomSuccess && comm->error == loomSuccess)
      LOOM_WARN(kInit, "loomCommDestroy: not every rank reached destroy (%s); closing anyway", loomGetLastError(nullptr));
  }
  commFree(comm, comm->error != loomSuccess);
  return loomSuccess;
}

loomResult_t loomCommAbort(loomComm_t comm) {
  {
    CommCall call(comm);
    if (!call.ok()) return setError(loomInvalidArgument, "loomCommAbort: comm %p is not a live communicator",
                                    static_cast<void*>(comm));
    comm->abortFlag.store(true);
  }
  commFree(comm, true);
  return loomSuccess;
}

loomResult_t loomCommCount(const loomComm_t comm, int* count) {
  if (count == nullptr) return setError(loomInvalidArgument, "loomCommCount: count is NULL");
  CommCall call(comm);
  if (!call.ok()) return setError(loomInvalidArgument, "loomCommCount: comm is not a live communicator");
  *count = comm->nranks;
  return loomSuccess;
}

loomResult_t loomCommUserRank(const loomComm_t comm, int* rank) {
  if (rank == nullptr) return setError(loomInvalidArgument, "loomCommUserRank: rank is NULL");
  CommCall call(comm);
  if (!call.ok()) return setError(loomInvalidArgument, "loomCommUserRank: comm is not a live communicator");
  *rank = comm->rank;
  return loomSuccess;
}

loomResult_t loomCommGetFailedRank(loomComm_t comm, int* rank) {
  if (rank == nullptr) return setError(loomInvalidArgument, "loomCommGetFailedRank: rank is NULL");
  CommCall call(comm);
  if (!call.ok()) return setError(loomInvalidArgument, "loomCommGetFailedRank: comm is not a live communicator");
  *rank = comm->failedRank.load();
  return loomSuccess;
}

loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError) {
  if (asyncError == nullptr) return setError(loomInvalidArgument, "loomCommGetAsyncError: asyncError is NULL");
  CommCall call(comm);
  if (!call.ok()) return setError(loomInvalidArgument, "loomCommGetAsyncError: comm is not a live communicator");
  if (comm->inProgress.load(std::memory_order_acquire)) {
    *asyncError = loomInProgress;
    return loomSuccess;
  }
  *asyncError = comm->error;
  // Where the failure happened on another thread (a nonblocking init), its message is this thread's too.
  if (*asyncError != loomSuccess) restoreLastError(comm->errorMessage);
  return loomSuccess;
}

loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                           loomRedOp_t op, loomComm_t comm, loomStream_t stream) {
  return collective("loomAllReduce", comm, stream,
                    CollArgs{CollType::AllReduce, sendbuff, recvbuff, count, datatype, op, -1});
}

loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, int root,
                           loomComm_t comm, loomStream_t stream) {
  return collective("loomBroadcast", comm, stream,
                    CollArgs{CollType::Broadcast, sendbuff, recvbuff, count, datatype, loomSum, root});
}

loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, loomRedOp_t op,
                        int root, loomComm_t comm, loomStream_t stream) {
  return collective("loomReduce", comm, stream, CollArgs{CollType::Reduce, sendbuff, recvbuff, count, datatype, op, root});
}

loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, loomDataType_t datatype,
                           loomComm_t comm, loomStream_t stream) {
  return collective("loomAllGather", comm, stream,
                    CollArgs{CollType::AllGather, sendbuff, recvbuff, sendcount, datatype, loomSum, -1});
}

loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, loomDataType_t datatype,
                               loomRedOp_t op, loomComm_t comm, loomStream_t stream) {
  return collective("loomReduceScatter", comm, stream,
                    CollArgs{CollType::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, -1});
}

loomResult_t loomAllToAll(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                          loomComm_t comm, loomStream_t stream) {
  return collective("loomAllToAll", comm, stream,
                    CollArgs{CollType::AllToAll, sendbuff, recvbuff, count, datatype, loomSum, -1});
}

loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream) {
  return collective("loomSend", comm, stream, CollArgs{CollType::Send, sendbuff, nullptr, count, datatype, loomSum, peer});
}

loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream) {
  return collective("loomRecv", comm, stream, CollArgs{CollType::Recv, nullptr, recvbuff, count, datatype, loomSum, peer});
}

loomResult_t loomRecvAnySource(void* recvbuff, size_t count, loomDataType_t datatype, int* source, loomComm_t comm,
                               loomStream_t stream) {
  const char* fn = "loomRecvAnySource";
  if (source == nullptr) return setError(loomInvalidArgument, "%s: source is NULL", fn);
  if (count == 0) return setError(loomInvalidArgument, "%s: count is 0 (an empty message comes from no one)", fn);
  if (groupActive())
    return setError(loomInvalidUsage, "%s: not inside a group (its partner is known only once a message arrives)", fn);
  LOOM_API_CHECK_COMM(comm, fn);
  Stream* onStream = nullptr;
  void* deviceStream = nullptr;
  LOOM_CHECK(checkStream(stream, fn, &onStream, &deviceStream));
  DeviceApi* dev = deviceApi();
  if (deviceStream != nullptr || (dev != nullptr && dev->isDeviceMemory(recvbuff)))
    return setError(loomInvalidArgument, "%s: host buffers and loom streams only", fn);
  CollArgs args{CollType::Recv, nullptr, recvbuff, count, datatype, loomSum, kAnySource};
  args.source = source;
  return collective(fn, comm, stream, args);
}

loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t* op, void* scalar, loomDataType_t datatype,
                                      loomScalarResidence_t residence, loomComm_t comm) {
  const char* fn = "loomRedOpCreatePreMulSum";
  if (op == nullptr || scalar == nullptr) return setError(loomInvalidArgument, "%s: op or scalar is NULL", fn);
  LOOM_API_CHECK_COMM(comm, fn);
  LOOM_CHECK(checkTypeOp(datatype, loomSum, false, fn));
  if (residence != loomScalarDevice && residence != loomScalarHostImmediate)
    return setError(loomInvalidArgument, "%s: residence %d is not a loomScalarResidence_t", fn, residence);
  size_t slot = 0;
  while (slot < comm->userOps.size() && comm->userOps[slot].live) ++slot;
  if (slot == comm->userOps.size()) {
    if (slot >= 200) return setError(loomInvalidUsage, "%s: 200 ops are live on this communicator already", fn);
    comm->userOps.emplace_back();
  }
  loomComm::UserOp& u = comm->userOps[slot];
  u = loomComm::UserOp();
  u.live = true;
  u.type = datatype;
  if (residence == loomScalarDevice) u.scalarAt = scalar;
  else std::memcpy(u.scalar, scalar, typeSize(datatype));
  *op = static_cast<loomRedOp_t>(loomNumOps + static_cast<int>(slot));
  return loomSuccess;
}

loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm) {
  LOOM_API_CHECK_COMM(comm, "loomRedOpDestroy");
  long i = static_cast<long>(op) - loomNumOps;
  if (i < 0 || i >= static_cast<long>(comm->userOps.size()) || !comm->userOps[i].live)
    return setError(loomInvalidArgument, "loomRedOpDestroy: op %d is not a live PreMulSum op of this communicator",
                    static_cast<int>(op));
  comm->userOps[i].live = false;
  return loomSuccess;
}

loomResult_t loomGroupStart(void) { return groupStart(); }
loomResult_t loomGroupEnd(void) { return groupEnd(); }

loomResult_t loomStreamCreate(loomStream_t* stream) {
  if (stream == nullptr) return setError(loomInvalidArgument, "loomStreamCreate: stream is NULL");
  *stream = streamCreate();
  return loomSuccess;
}

loomResult_t loomStreamSynchronize(loomStream_t stream) {
  Stream* s = findStream(stream);
  if (s == nullptr)
    return setError(loomInvalidArgument, "loomStreamSynchronize: %p is not a live stream from loomStreamCreate", stream);
  return s->synchronize();
}

loomResult_t loomStreamQuery(loomStream_t stream) {
  Stream* s = findStream(stream);
  if (s == nullptr)
    return setError(loomInvalidArgument, "loomStreamQuery: %p is not a live stream from loomStreamCreate", stream);
  return s->query();
}

loomResult_t loomStreamDestroy(loomStream_t stream) {
  if (!streamDestroy(stream))
    return setError(loomInvalidArgument, "loomStreamDestroy: %p is not a live stream from loomStreamCreate", stream);
  return loomSuccess;
}

}  // extern "C"
