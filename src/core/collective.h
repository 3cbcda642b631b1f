// A collective call as the layers below the API see it, and the entry that turns it into an algorithm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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
inline bool collReduces(CollType c) {
  return c == CollType::AllReduce || c == CollType::Reduce || c == CollType::ReduceScatter;
}
inline bool collHasRoot(CollType c) { return c == CollType::Broadcast || c == CollType::Reduce; }

// A 64-bit description of a call that travels with every slot of its data, so that a rank receiving
// data of another call can say which two calls met: collective (4 bits), type (4), op (8), root + 1
// (12; 0 for none), count (36, modulo 2^36).  A send and its matching receive describe themselves as
// the same Send call.
uint64_t callSignature(const CollArgs& args);
std::string describeCall(uint64_t signature);  // "allreduce(count 100, float, sum)"

// Runs the collective to completion on the calling thread.
loomResult_t runCollective(loomComm* comm, const CollArgs& args);

}  // namespace loom
