// reduce_scatter_perf: nccl-tests' reduce_scatter_perf for loom (MPI_Reduce_scatter_block with -B mpi).
#include "perf/collectives_perf.h"

using namespace loom::perf;

namespace {
const PerfTest kTest = {
    "ReduceScatter", /*usesOp=*/true, /*usesRoot=*/false, factorAllToAll,
    // size is the total reduced; each rank keeps size / nranks
    [](size_t bytes, size_t es, int n, size_t* s, size_t* r, size_t* c) { *c = *r = bytes / es / n, *s = *r * n; },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, loomComm_t comm, loomStream_t stream) {
      return loomReduceScatter(b.send, b.recv, b.count, t, op, comm, stream);
    },
    [](const Buffers& b, bool inPlace, MPI_Datatype t, MPI_Op op, int, MPI_Comm comm) {
      if (!inPlace) return MPI_Reduce_scatter_block(b.send, b.recv, static_cast<int>(b.count), t, op, comm);
      // MPI's in-place result lands at the start of the buffer, NCCL's (and loom's) at the rank's slot:
      // move it there (a copy of 1/n of the data, which this backend's in-place time includes).
      int rc = MPI_Reduce_scatter_block(MPI_IN_PLACE, b.send, static_cast<int>(b.count), t, op, comm);
      int sz = 0;
      MPI_Type_size(t, &sz);
      if (b.recv != b.send) std::memmove(b.recv, b.send, b.count * static_cast<size_t>(sz));
      return rc;
    },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int rank, int n) {
      loom::testing::fillInput(t, op, rank, b.count * n, b.send);
    },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int rank, int n) {
      return loom::testing::countWrongReduced(t, op, n, rank * b.count, b.count, b.recv, nullptr);
    },
};
}  // namespace

int main(int argc, char** argv) { return perfMain(argc, argv, kTest); }
