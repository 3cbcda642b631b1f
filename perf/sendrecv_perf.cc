// sendrecv_perf: nccl-tests' sendrecv_perf for loom: every rank sends to rank+1 and receives from
// rank-1 at once (one group); MPI_Sendrecv with --backend mpi.  There is no in-place form.
#include "perf/collectives_perf.h"

using namespace loom::perf;

namespace {
int rankOf(MPI_Comm comm, int* n) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  MPI_Comm_size(comm, n);
  return r;
}

const PerfTest kTest = {
    "SendRecv", /*usesOp=*/false, /*usesRoot=*/false, factorOne,
    [](size_t bytes, size_t es, int, size_t* s, size_t* r, size_t* c) { *s = *r = *c = bytes / es; },
    [](const Buffers& b, loomDataType_t t, loomRedOp_t, int, loomComm_t comm, loomStream_t stream) {
      int rank = 0, n = 1;
      loomCommUserRank(comm, &rank);
      loomCommCount(comm, &n);
      loomGroupStart();
      loomSend(b.send, b.count, t, (rank + 1) % n, comm, stream);
      loomRecv(b.recv, b.count, t, (rank + n - 1) % n, comm, stream);
      return loomGroupEnd();
    },
    [](const Buffers& b, bool, MPI_Datatype t, MPI_Op, int, MPI_Comm comm) {
      int n = 1, rank = rankOf(comm, &n), c = static_cast<int>(b.count);
      return MPI_Sendrecv(b.send, c, t, (rank + 1) % n, 0, b.recv, c, t, (rank + n - 1) % n, 0, comm,
                          MPI_STATUS_IGNORE);
    },
    fillOwnInput,
    [](const Buffers& b, loomDataType_t t, loomRedOp_t op, int, int rank, int n) {
      return loom::testing::countWrongCopied(t, op, (rank + n - 1) % n, 0, b.count, b.recv, nullptr);
    },
    /*hasInPlace=*/false,
};
}  // namespace

int main(int argc, char** argv) { return perfMain(argc, argv, kTest); }
