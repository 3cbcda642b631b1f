// alltoall_perf: nccl-tests' alltoall_perf for loom (MPI_Alltoall with --backend mpi).
#include "perf/collectives_perf.h"

using namespace loom::perf;

namespace {
const PerfTest kTest = {
    "AllToAll", /*usesOp=*/false, /*usesRoot=*/false, factorAllToAll,
    // size is what each rank sends in total, size / nranks to every rank
    [](size_t bytes, size_t es, int n, size_t* s, size_t* r, size_t* c) { *c = bytes / es / n, *s = *r = *c * n; },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t, int, loomComm_t comm, loomStream_t stream) {
      return loomAllToAll(b.send, b.recv, b.count, t, comm, stream);
    },
    [](const Buffers& b, bool inPlace, MPI_Datatype t, MPI_Op, int, MPI_Comm comm) {
      int c = static_cast<int>(b.count);
      return MPI_Alltoall(inPlace ? MPI_IN_PLACE : b.send, c, t, b.recv, c, t, comm);
    },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int rank, int n) {
      loom::testing::fillInput(t, op, rank, b.count * n, b.send);
    },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int rank, int n) {
      size_t wrong = 0;
      for (int p = 0; p < n; ++p)
        wrong += loom::testing::countWrongCopied(t, op, p, rank * b.count, b.count,
                                                 static_cast<char*>(b.recv) + p * b.count * loom::typeSize(t), nullptr);
      return wrong;
    },
};
}  // namespace

int main(int argc, char** argv) { return perfMain(argc, argv, kTest); }
