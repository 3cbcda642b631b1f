#include "core/collective.h"

#include "algos/algorithms.h"
#include "algos/reduce_kernels.h"
#include "core/log.h"

namespace loom {

const char* collName(CollType c) {
  switch (c) {
    case CollType::AllReduce: return "allreduce";
    case CollType::Broadcast: return "broadcast";
    case CollType::Reduce: return "reduce";
    case CollType::AllGather: return "allgather";
    case CollType::ReduceScatter: return "reducescatter";
    case CollType::AllToAll: return "alltoall";
    case CollType::Send: return "send";
    case CollType::Recv: return "recv";
  }
  return "?";
}

loomResult_t runCollective(loomComm* comm, const CollArgs& args) {
  LOOM_TRACE(kColl, "%s count %zu type %s op %s root %d", collName(args.coll), args.count, typeName(args.type),
             opName(args.op), args.root);
  switch (args.coll) {
    case CollType::AllReduce: return ringAllReduce(comm, args);
    case CollType::AllGather: return ringAllGather(comm, args);
    case CollType::ReduceScatter: return ringReduceScatter(comm, args);
    case CollType::Broadcast: return chainBroadcast(comm, args);
    case CollType::Reduce: return chainReduce(comm, args);
    default:
      return setError(loomInvalidUsage, "this collective is not implemented yet");
  }
}

}  // namespace loom
