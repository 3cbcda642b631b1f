#include "core/collective.h"

#include "algos/algorithms.h"
#include "core/log.h"

namespace loom {

loomResult_t runCollective(loomComm* comm, const CollArgs& args) {
  switch (args.coll) {
    case CollType::AllReduce:
      LOOM_TRACE(kColl, "allreduce count %zu type %d op %d", args.count, args.type, args.op);
      return ringAllReduce(comm, args);
    default:
      return setError(loomInvalidUsage, "this collective is not implemented yet");
  }
}

}  // namespace loom
