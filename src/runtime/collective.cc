#include "runtime/collective.h"

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "kernels/reduce_kernels.h"
#include "algos/selector.h"
#include "base/log.h"
#include "base/params.h"

#include <vector>

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

uint64_t callSignature(const CollArgs& a) {
  uint64_t coll = static_cast<uint64_t>(a.coll == CollType::Recv ? CollType::Send : a.coll);
  uint64_t root = collHasRoot(a.coll) ? static_cast<uint64_t>(a.root + 1) : 0;
  uint64_t op = !collReduces(a.coll) ? 0 : a.op < loomNumOps ? static_cast<uint64_t>(a.op) : 0xff;  // 0xff: a PreMulSum op
  return coll << 60 | (static_cast<uint64_t>(a.type) & 0xf) << 56 | op << 48 | (root & 0xfff) << 36 |
         (static_cast<uint64_t>(a.count) & ((uint64_t{1} << 36) - 1));
}

std::string describeCall(uint64_t sig) {
  auto coll = static_cast<CollType>(sig >> 60);
  auto type = static_cast<loomDataType_t>((sig >> 56) & 0xf);
  int op = static_cast<int>((sig >> 48) & 0xff), root = static_cast<int>((sig >> 36) & 0xfff) - 1;
  std::string s = std::string(coll == CollType::Send ? "send/recv" : collName(coll)) + "(count " +
                  std::to_string(sig & ((uint64_t{1} << 36) - 1)) + ", " + typeName(type);
  if (collReduces(coll)) s += std::string(", ") + (op < loomNumOps ? opName(static_cast<loomRedOp_t>(op)) : "premulsum");
  if (root >= 0) s += ", root " + std::to_string(root);
  return s + ")";
}

CallExtents callExtents(const CollArgs& args, int n, int rank) {
  const size_t bytes = args.count * typeSize(args.type);
  const char* s = static_cast<const char*>(args.sendbuff);
  const char* r = static_cast<const char*>(args.recvbuff);
  CallExtents e;
  e.sendBytes = e.recvBytes = bytes;
  e.inPlace = s == r;
  switch (args.coll) {
    case CollType::Broadcast: if (rank != args.root) e.sendBytes = 0; break;
    case CollType::Reduce: if (rank != args.root) e.recvBytes = 0; break;
    case CollType::AllGather: e.recvBytes = bytes * n; e.inPlace = r != nullptr && s == r + rank * bytes; break;
    case CollType::ReduceScatter: e.sendBytes = bytes * n; e.inPlace = s != nullptr && r == s + rank * bytes; break;
    case CollType::AllToAll: e.sendBytes = e.recvBytes = bytes * n; break;
    case CollType::Send: e.recvBytes = 0; break;
    case CollType::Recv: e.sendBytes = 0; break;
    default: break;
  }
  return e;
}

namespace {

loomResult_t runAlgorithm(loomComm* comm, const CollArgs& args) {
  LOOM_TRACE(kColl, "%s count %zu type %s op %s root %d", collName(args.coll), args.count, typeName(args.type),
             opName(args.op), args.root);
  const size_t bytes = args.count * typeSize(args.type);
  switch (args.coll) {
    case CollType::Send: return runTransfers(comm, {transferOf(args)}, collName(args.coll));
    case CollType::Recv:
      if (args.root == kAnySource) return receiveFromAny(comm, transferOf(args), args.source);
      return runTransfers(comm, {transferOf(args)}, collName(args.coll));
    default: break;
  }
  // Loops repeat the same call: the last choice is kept (the model depends only on these and the comm).
  const uint64_t choiceKey = static_cast<uint64_t>(args.coll) << 56 ^ bytes;
  if (comm->lastChoiceKey == choiceKey && comm->lastChoice != nullptr) return comm->lastChoice(comm, args);
  std::vector<Candidate> candidates = rankCandidates(comm, args);
  if (candidates.empty()) return setError(loomInternalError, "no algorithm for %s", collName(args.coll));
  comm->lastChoiceKey = choiceKey;
  comm->lastChoice = candidates[0].run;
  // Logged once per change of (collective, size) on this communicator, so a benchmark loop logs once.
  if (logEnabled(LogLevel::Info, kAlgo)) {
    std::string all;
    for (const Candidate& c : candidates) {
      char b[64];
      snprintf(b, sizeof b, "%s%s %.1f us", all.empty() ? "" : ", ", algoName(c.algo), c.predictedUs);
      all += b;
    }
    LOOM_INFO(kAlgo, "%s %zu bytes on %d ranks: %s (predicted: %s)", collName(args.coll), bytes, comm->nranks,
              algoName(candidates[0].algo), all.c_str());
  }
  return candidates[0].run(comm, args);
}

}  // namespace

loomResult_t runCollective(loomComm* comm, const CollArgs& args) {
  if (args.op < loomNumOps || args.sendbuff == nullptr) return runAlgorithm(comm, args);
  // PreMulSum: scale this rank's input by its scalar into scratch, then reduce it as a sum (the op id
  // stays, so that the call's signature still says premulsum).
  const void* scalar = args.scalar != nullptr ? args.scalar : comm->preMulScalar(args.op, args.type);
  if (scalar == nullptr)
    return setError(loomInvalidArgument, "op %d is not a live PreMulSum op of %s on this communicator",
                    static_cast<int>(args.op), typeName(args.type));
  size_t elements = args.coll == CollType::ReduceScatter ? args.count * comm->nranks : args.count;
  std::vector<char> scaled(elements * typeSize(args.type));
  reduceKernels().scale[args.type](scaled.data(), args.sendbuff, elements, scalar);
  CollArgs onScaled = args;
  onScaled.sendbuff = scaled.data();
  return runAlgorithm(comm, onScaled);
}

loomResult_t runCall(loomComm* comm, const CollArgs& args) {
  if (comm->error != loomSuccess)  // failed while this call waited on a stream
    return setError(comm->error, "%s: the communicator failed earlier: %s", collName(args.coll),
                    comm->errorMessage.c_str());
  LOOM_CHECK(comm->fail(runCollective(comm, args)));
  return comm->fail(comm->flushSends());
}

DeferredCall::DeferredCall(const loomComm* c, const CollArgs& a) : comm(const_cast<loomComm*>(c)), args(a) {
  if (const loomComm::UserOp* u = c->userOp(a.op, a.type)) op = std::make_shared<const loomComm::UserOp>(*u);
}

CollArgs DeferredCall::resolved() const {
  CollArgs a = args;
  if (op != nullptr) a.scalar = op->scalarAt != nullptr ? op->scalarAt : op->scalar;
  return a;
}

}  // namespace loom
