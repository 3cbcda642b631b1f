// A collective call as the layers below the API see it, and the entry that turns it into an algorithm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model/cost_model.h"
#include "runtime/comm.h"

namespace loom {

struct CollArgs {
  CollType coll;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  loomDataType_t type;
  loomRedOp_t op;
  int root;  // or peer, for send/recv (kAnySource: a receive from whichever rank sends first)
  // A PreMulSum op's scalar when the call runs after it was made (stream operations, group members);
  // nullptr: look the op up on the communicator when the call runs.
  const void* scalar = nullptr;
  int* source = nullptr;  // a receive from any source: where the sender's rank is written
};

constexpr int kAnySource = -1;

// A call kept to run later.  A PreMulSum op's host scalar is copied when the call is made, because the
// op may be destroyed as soon as the call returns (NCCL allows it); a device-resident scalar is read
// when the call runs.
struct DeferredCall {
  DeferredCall(const loomComm* comm, const CollArgs& args);
  CollArgs resolved() const;  // the arguments, with the scalar pointing at the copy
  loomComm* comm = nullptr;
  CollArgs args;
  std::shared_ptr<const loomComm::UserOp> op;
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

// The bytes a call reads from sendbuff and writes to recvbuff on this rank, and whether it is in place
// (NCCL's layouts: allgather is in place when sendbuff == recvbuff + rank * sendcount, reducescatter when
// recvbuff == sendbuff + rank * recvcount, the others when sendbuff == recvbuff).  A buffer the rank
// does not use (sendbuff off the broadcast root, recvbuff off the reduce root) has 0 bytes.
// count * type size must not overflow (the API checks it first).
struct CallExtents {
  size_t sendBytes = 0, recvBytes = 0;
  bool inPlace = false;
};
CallExtents callExtents(const CollArgs& args, int nranks, int rank);

// Runs the collective to completion on the calling thread.
loomResult_t runCollective(loomComm* comm, const CollArgs& args);
// One call, start to end, on this thread: the algorithm, then the flush that hands its data over; a
// failure breaks the communicator, and a communicator that failed earlier runs nothing.
loomResult_t runCall(loomComm* comm, const CollArgs& args);

}  // namespace loom
