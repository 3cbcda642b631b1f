// all_reduce_perf: nccl-tests' all_reduce_perf for loom (and, with --backend mpi, for MPI_Allreduce).
#include "perf/perf_harness.h"
#include "tests/common/reference.h"

using namespace loom::perf;

namespace {

const PerfTest kAllReduce = {
    "AllReduce",
    /*usesOp=*/true,
    /*usesRoot=*/false,
    [](int n) { return 2.0 * (n - 1) / n; },
    [](size_t bytes, size_t es, int, size_t* s, size_t* r, size_t* c) { *s = *r = *c = bytes / es; },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, loomComm_t comm, loomStream_t stream) {
      return loomAllReduce(b.send, b.recv, b.count, t, op, comm, stream);
    },
    [](const Buffers& b, bool inPlace, MPI_Datatype t, MPI_Op op, int, MPI_Comm comm) {
      return MPI_Allreduce(inPlace ? MPI_IN_PLACE : b.send, b.recv, static_cast<int>(b.count), t, op, comm);
    },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int rank, int) {
      loom::testing::fillInput(t, op, rank, b.count, b.send);
    },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int, int n) {
      return loom::testing::countWrong(t, op, n, b.count, b.recv, nullptr);
    },
};

}  // namespace

int main(int argc, char** argv) { return perfMain(argc, argv, kAllReduce); }
