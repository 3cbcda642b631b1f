// all_gather_perf: nccl-tests' all_gather_perf for loom (and MPI_Allgather with --backend mpi).
#include "perf/collectives_perf.h"

using namespace loom::perf;

namespace {
const PerfTest kTest = {
    "AllGather", /*usesOp=*/false, /*usesRoot=*/false, factorAllToAll,
    // size is the gathered total; each rank contributes size / nranks
    [](size_t bytes, size_t es, int n, size_t* s, size_t* r, size_t* c) { *c = *s = bytes / es / n, *r = *s * n; },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t, int, loomComm_t comm, loomStream_t stream) {
      return loomAllGather(b.send, b.recv, b.count, t, comm, stream);
    },
    [](const Buffers& b, bool inPlace, MPI_Datatype t, MPI_Op, int, MPI_Comm comm) {
      int c = static_cast<int>(b.count);
      return MPI_Allgather(inPlace ? MPI_IN_PLACE : b.send, c, t, b.recv, c, t, comm);
    },
    fillOwnInput,
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int, int n) {
      size_t wrong = 0;
      for (int r = 0; r < n; ++r)
        wrong += loom::testing::countWrongCopied(t, op, r, 0, b.count,
                                                 static_cast<char*>(b.recv) + r * b.count * loom::typeSize(t), nullptr);
      return wrong;
    },
};
}  // namespace

int main(int argc, char** argv) { return perfMain(argc, argv, kTest); }
