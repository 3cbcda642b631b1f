// A collective call as the layers below the API see it, and the entry that turns it into an algorithm.
#pragma once

#include <cstddef>

#include "core/comm.h"

namespace loom {

enum class CollType { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Send, Recv };

struct CollArgs {
  CollType coll;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  loomDataType_t type;
  loomRedOp_t op;
  int root;  // or peer, for send/recv
};

const char* collName(CollType c);

// Runs the collective to completion on the calling thread.
loomResult_t runCollective(loomComm* comm, const CollArgs& args);

}  // namespace loom
