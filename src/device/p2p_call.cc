#include "device/p2p_call.h"

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

}  // namespace

bool p2pCandidate(const loomComm* comm, const CollArgs& args) {
  return params().DEVICE_P2P != 0 && comm->localRanks == comm->nranks && args.coll != CollType::Send &&
         args.coll != CollType::Recv && args.op < loomNumOps && args.scalar == nullptr;
}

loomResult_t runP2p(loomComm* comm, DeviceApi* api, const CollArgs& args, bool* staged) {
  *staged = false;
  const int n = comm->nranks, me = comm->rank;
  const CallExtents e = callExtents(args, n, me);
  const size_t es = typeSize(args.type), count = args.count;

  // The protocol's own host collectives name the user's call when they fail.
  auto step = [&](loomResult_t r, const char* what) {
    if (r == loomSuccess) return r;
    const std::string inner = lastError();
    return setError(r, "%s on device buffers (p2p path, %s): %s", collName(args.coll), what, inner.c_str());
  };

  // (1) Tell every rank where this rank's buffers are.
  std::vector<P2pBuffers> infos(n);
  const P2pBuffers mine =
      P2pTransport::describe(api, comm->peers[me], args.sendbuff, e.sendBytes, args.recvbuff, e.recvBytes);
  const void* local = e.recvBytes > 0 ? args.recvbuff : args.sendbuff;  // a buffer on this rank's GPU
  LOOM_CHECK(step(hostCall(comm, CollArgs{CollType::AllGather, &mine, infos.data(), sizeof(P2pBuffers), loomUint8,
                                          loomSum, -1}),
                  "exchanging buffer handles"));

  // (2) Map the peers' buffers, where this rank's GPU reaches theirs.
  std::vector<const char*> send(n, nullptr);
  std::vector<char*> recv(n, nullptr);
  int32_t ok = mine.ok;
  if (!comm->p2pMappings) comm->p2pMappings = std::make_unique<P2pMappings>(api);
  const TopoSystem* sys = comm->cluster ? &comm->cluster->sys(me) : nullptr;
  for (int r = 0; r < n && ok; ++r) {
    const P2pBuffers& p = infos[r];
    if (r != me && (!p.ok || !P2pTransport::gpusReach(api, sys, comm->topoPolicy, mine.busId, p.busId))) ok = 0;
    if (ok && P2pTransport::open(comm->p2pMappings.get(), mine, p, local, &send[r], &recv[r]) != loomSuccess) ok = 0;
  }
  if (!ok) LOOM_INFO(kColl, "device call: the p2p path is not possible here (%s)", api->lastErrorText().c_str());

  // (3) All or none.
  LOOM_CHECK(step(allAgree(comm, &ok), "agreeing on the path"));
  if (!ok) {
    *staged = true;
    return loomSuccess;
  }
  LOOM_TRACE(kColl, "device call: %s of %zu bytes on the p2p path", collName(args.coll), count * es);

  // (4) This rank's share, straight from the peers' buffers.
  auto fail = [&](const char* what) {
    return setError(loomUnhandledCudaError, "device call (p2p): %s failed (%s): %s", what, api->name(),
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
  const char* what = "device call (p2p)";
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
      return setError(loomInternalError, "device call (p2p): %s has no p2p path", collName(args.coll));
  }
  if (!started) return fail("starting a copy or reduction");
  LOOM_CHECK(waitDeviceWork(comm, api, what));
  // (5) No rank returns while another may still read its buffers.
  int32_t done = 1;
  return step(allAgree(comm, &done), "waiting for every rank to finish reading");
}

}  // namespace loom
