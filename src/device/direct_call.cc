#include "device/direct_call.h"

#include <unistd.h>

#include <cstring>
#include <vector>

#include "runtime/comm.h"
#include "base/datatypes.h"
#include "base/log.h"
#include "base/params.h"
#include "topo/cluster.h"
#include "device/device_call.h"

namespace loom {

namespace {

// What each rank tells the others about its buffers for one call (fixed layout: it travels as bytes).
struct DirectInfo {
  int32_t ok;  // its buffers are device memory it could export
  int32_t pid;
  uint64_t hostHash, pidNamespace;  // with pid: the same process?
  uint64_t sendAddr, recvAddr;  // for ranks of the same process, which cannot open each other's handles
  char busId[32];
  DeviceApi::IpcHandle send, recv;
  int32_t hasSend, hasRecv;
};

// The protocol's host collectives, on the communicator's own connections.  Unlike runCall they leave
// recording a failure to the caller, whose message names the user's call rather than this step.
loomResult_t hostCall(loomComm* comm, const CollArgs& a) {
  LOOM_CHECK(runCollective(comm, a));
  return comm->flushSends();
}
// The minimum of every rank's flag.
loomResult_t allAgree(loomComm* comm, int32_t* flag) {
  return hostCall(comm, CollArgs{CollType::AllReduce, flag, flag, 1, loomInt32, loomMin, -1});
}

// LOOM_P2P_LEVEL: the two GPUs (by bus id) are at most that far apart in this host's model.  GPUs the
// model does not know are left to the runtime's own answer.
bool topologyAllows(const loomComm* comm, const std::string& a, const std::string& b) {
  if (a == b || !comm->cluster) return true;
  const TopoSystem& sys = comm->cluster->sys(comm->rank);
  const int x = sys.findBusId(a), y = sys.findBusId(b);
  if (x < 0 || y < 0) return true;
  const PathType path = sys.path(x, y).type;
  if (p2pAllowed(path, comm->topoPolicy)) return true;
  LOOM_INFO(kColl, "device call: GPUs %s and %s are %s apart, beyond LOOM_P2P_LEVEL=%s: staged", a.c_str(), b.c_str(),
            pathTypeName(path), pathTypeName(comm->topoPolicy.p2pLevel));
  return false;
}

}  // namespace

DevicePeers::~DevicePeers() {
  for (auto& [key, base] : opened_) api_->ipcClose(base);
}

loomResult_t DevicePeers::map(const DeviceApi::IpcHandle& handle, const void* near, void** ptr) {
  const std::string key(reinterpret_cast<const char*>(handle.bytes), sizeof handle.bytes);
  auto it = opened_.find(key);
  if (it == opened_.end()) {
    void* base = nullptr;
    if (api_->ipcOpen(handle, near, &base) != loomSuccess) return loomUnhandledCudaError;
    it = opened_.emplace(key, base).first;
  }
  *ptr = static_cast<char*>(it->second) + handle.offset;
  return loomSuccess;
}

bool directCandidate(const loomComm* comm, const CollArgs& args) {
  return params().DEVICE_DIRECT != 0 && comm->localRanks == comm->nranks && args.coll != CollType::Send &&
         args.coll != CollType::Recv && args.op < loomNumOps && args.scalar == nullptr;
}

loomResult_t runDirect(loomComm* comm, DeviceApi* api, const CollArgs& args, bool* staged) {
  *staged = false;
  const int n = comm->nranks, me = comm->rank;
  const CallExtents e = callExtents(args, n, me);
  const size_t es = typeSize(args.type), count = args.count;

  // The protocol's own host collectives name the user's call when they fail.
  auto step = [&](loomResult_t r, const char* what) {
    if (r == loomSuccess) return r;
    const std::string inner = lastError();
    return setError(r, "%s on device buffers (direct path, %s): %s", collName(args.coll), what, inner.c_str());
  };

  // (1) Tell every rank where this rank's buffers are.
  std::vector<DirectInfo> infos(n);
  DirectInfo& mine = infos[me];
  mine.ok = 1;
  mine.pid = comm->peers[me].pid;
  mine.hostHash = comm->peers[me].hostHash;
  mine.pidNamespace = comm->peers[me].pidNamespace;
  mine.sendAddr = reinterpret_cast<uintptr_t>(args.sendbuff);
  mine.recvAddr = reinterpret_cast<uintptr_t>(args.recvbuff);
  const void* local = e.recvBytes > 0 ? args.recvbuff : args.sendbuff;  // a buffer on this rank's GPU
  auto exportOne = [&](const void* p, size_t bytes, DeviceApi::IpcHandle* h, int32_t* has) {
    if (bytes == 0) return true;
    *has = 1;
    return api->isDeviceMemory(p) && api->ipcExport(p, h) == loomSuccess;
  };
  mine.ok = exportOne(args.sendbuff, e.sendBytes, &mine.send, &mine.hasSend) &&
            exportOne(args.recvbuff, e.recvBytes, &mine.recv, &mine.hasRecv);
  std::snprintf(mine.busId, sizeof mine.busId, "%s", api->busIdOf(local).c_str());
  DirectInfo copy = mine;
  LOOM_CHECK(step(hostCall(comm, CollArgs{CollType::AllGather, &copy, infos.data(), sizeof(DirectInfo), loomUint8,
                                          loomSum, -1}),
                  "exchanging buffer handles"));

  // (2) Map the peers' buffers, where this rank's GPU reaches theirs.
  std::vector<const char*> send(n, nullptr);
  std::vector<char*> recv(n, nullptr);
  int32_t ok = mine.ok;
  if (!comm->devicePeers) comm->devicePeers = std::make_unique<DevicePeers>(api);
  for (int r = 0; r < n && ok; ++r) {
    const DirectInfo& p = infos[r];
    if (r != me && (!p.ok || !api->reaches(mine.busId, p.busId) || !topologyAllows(comm, mine.busId, p.busId))) {
      ok = 0;
      break;
    }
    if (r == me || (p.pid == mine.pid && p.hostHash == mine.hostHash && p.pidNamespace == mine.pidNamespace)) {
      send[r] = reinterpret_cast<const char*>(p.sendAddr);  // this process: plain addresses
      recv[r] = reinterpret_cast<char*>(p.recvAddr);
      continue;
    }
    void* at = nullptr;
    if (p.hasSend && comm->devicePeers->map(p.send, local, &at) != loomSuccess) ok = 0;
    send[r] = static_cast<const char*>(at);
    at = nullptr;
    if (ok && p.hasRecv && comm->devicePeers->map(p.recv, local, &at) != loomSuccess) ok = 0;
    recv[r] = static_cast<char*>(at);
  }
  if (!ok) LOOM_INFO(kColl, "device call: the direct path is not possible here (%s)", api->lastErrorText().c_str());

  // (3) All or none.
  LOOM_CHECK(step(allAgree(comm, &ok), "agreeing on the path"));
  if (!ok) {
    *staged = true;
    return loomSuccess;
  }
  LOOM_TRACE(kColl, "device call: %s of %zu bytes on the direct path", collName(args.coll), count * es);

  // (4) This rank's share, straight from the peers' buffers.
  auto fail = [&](const char* what) {
    return setError(loomUnhandledCudaError, "device call (direct): %s failed (%s): %s", what, api->name(),
                    api->lastErrorText().c_str());
  };
  auto copyStart = [&](char* dst, const char* src, size_t bytes) {
    return dst == src || bytes == 0 || api->copyStart(dst, src, bytes) == loomSuccess;
  };
  // out <- op over srcs (this rank's own input first, so that an output over it is read before written).
  auto reduceAll = [&](char* out, const std::vector<const char*>& srcs, size_t elems) {
    if (srcs.size() == 1) return copyStart(out, srcs[0], elems * es);
    for (size_t k = 1; k < srcs.size(); ++k) {
      const bool last = k + 1 == srcs.size();
      const loomRedOp_t op = args.op == loomAvg && !last ? loomSum : args.op;
      if (api->reduceStart(out, k == 1 ? srcs[0] : out, srcs[k], elems, args.type, op, n) != loomSuccess) return false;
    }
    return true;
  };
  auto inputsAt = [&](size_t offsetBytes) {  // every rank's input at an offset, this rank's first
    std::vector<const char*> srcs{send[me] + offsetBytes};
    for (int r = 0; r < n; ++r)
      if (r != me) srcs.push_back(send[r] + offsetBytes);
    return srcs;
  };
  auto block = [&](int r) { return count * static_cast<size_t>(r) / static_cast<size_t>(n); };
  const char* what = "device call (direct)";
  bool started = true;
  switch (args.coll) {
    case CollType::AllReduce:
      started = reduceAll(recv[me] + block(me) * es, inputsAt(block(me) * es), block(me + 1) - block(me));
      if (!started) return fail("reducing this rank's block");
      LOOM_CHECK(waitDeviceWork(comm, api, what));
      {
        int32_t done = 1;
        LOOM_CHECK(step(allAgree(comm, &done), "waiting for every rank's block"));
      }
      for (int r = 0; r < n && started; ++r)
        if (r != me) started = copyStart(recv[me] + block(r) * es, recv[r] + block(r) * es, (block(r + 1) - block(r)) * es);
      break;
    case CollType::Reduce:
      if (me == args.root) started = reduceAll(recv[me], inputsAt(0), count);
      break;
    case CollType::ReduceScatter:
      started = reduceAll(recv[me], inputsAt(me * count * es), count);
      break;
    case CollType::Broadcast:
      started = copyStart(recv[me], send[args.root], count * es);
      break;
    case CollType::AllGather:
      for (int r = 0; r < n && started; ++r) started = copyStart(recv[me] + r * count * es, send[r], count * es);
      break;
    case CollType::AllToAll:
      for (int r = 0; r < n && started; ++r)
        started = copyStart(recv[me] + r * count * es, send[r] + me * count * es, count * es);
      break;
    default:
      return setError(loomInternalError, "device call (direct): %s has no direct path", collName(args.coll));
  }
  if (!started) return fail("starting a copy or reduction");
  LOOM_CHECK(waitDeviceWork(comm, api, what));
  // (5) No rank returns while another may still read its buffers.
  int32_t done = 1;
  return step(allAgree(comm, &done), "waiting for every rank to finish reading");
}

}  // namespace loom
