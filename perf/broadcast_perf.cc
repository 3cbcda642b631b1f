// broadcast_perf: nccl-tests' broadcast_perf for loom (MPI_Bcast with --backend mpi).
#include "perf/collectives_perf.h"

using namespace loom::perf;

namespace {
const PerfTest kTest = {
    "Broadcast", /*usesOp=*/false, /*usesRoot=*/true, factorOne,
    [](size_t bytes, size_t es, int, size_t* s, size_t* r, size_t* c) { *s = *r = *c = bytes / es; },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t, int root, loomComm_t comm, loomStream_t stream) {
      return loomBroadcast(b.send, b.recv, b.count, t, root, comm, stream);
    },
    [](const Buffers& b, bool inPlace, MPI_Datatype t, MPI_Op, int root, MPI_Comm comm) {
      int rank = 0;
      MPI_Comm_rank(comm, &rank);
      // MPI_Bcast works in place; out of place the root copies first, as loom does.
      if (!inPlace && rank == root) std::memcpy(b.recv, b.send, b.count * static_cast<size_t>([&] {
        int sz = 0;
        MPI_Type_size(t, &sz);
        return sz;
      }()));
      return MPI_Bcast(b.recv, static_cast<int>(b.count), t, root, comm);
    },
    fillOwnInput,
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int root, int, int) {
      return loom::testing::countWrongCopied(t, op, root, 0, b.count, b.recv, nullptr);
    },
};
}  // namespace

int main(int argc, char** argv) { return perfMain(argc, argv, kTest); }
