// reduce_perf: nccl-tests' reduce_perf for loom (MPI_Reduce with --backend mpi).
#include "perf/collectives_perf.h"

using namespace loom::perf;

namespace {
const PerfTest kTest = {
    "Reduce", /*usesOp=*/true, /*usesRoot=*/true, factorOne,
    [](size_t bytes, size_t es, int, size_t* s, size_t* r, size_t* c) { *s = *r = *c = bytes / es; },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int root, loomComm_t comm, loomStream_t stream) {
      return loomReduce(b.send, b.recv, b.count, t, op, root, comm, stream);
    },
    [](const Buffers& b, bool inPlace, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm) {
      int rank = 0;
      MPI_Comm_rank(comm, &rank);
      const void* send = inPlace && rank == root ? MPI_IN_PLACE : b.send;
      return MPI_Reduce(send, b.recv, static_cast<int>(b.count), t, op, root, comm);
    },
    fillOwnInput,
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int root, int rank, int n) {
      return rank == root ? loom::testing::countWrongReduced(t, op, n, 0, b.count, b.recv, nullptr) : size_t{0};
    },
};
}  // namespace

int main(int argc, char** argv) { return perfMain(argc, argv, kTest); }
