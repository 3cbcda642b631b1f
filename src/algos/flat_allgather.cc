// Flat allgather: every rank sends its block straight to every other rank, and all 2(n-1) transfers
// progress together (algos/p2p.cc).  On one host the transfers are single-copy reads from the owner's
// buffer, so each block is copied once per reader instead of once per ring hop into and out of a FIFO.
// Across hosts it is the allgather of GPU buffers over GPUDirect RDMA (device/gdr_path.h): transfers
// only, the own block included, so the CPU never touches the buffers.
#include <vector>

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "base/datatypes.h"

namespace loom {

loomResult_t flatAllGather(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const size_t block = args.count * typeSize(args.type);
  char* in = const_cast<char*>(static_cast<const char*>(args.sendbuff));
  char* out = static_cast<char*>(args.recvbuff);
  const uint64_t signature = callSignature(args);
  std::vector<Transfer> transfers;
  if (in != out + r * block) {  // else in place: our block is there already
    transfers.push_back(Transfer{r, true, in, block, signature});
    transfers.push_back(Transfer{r, false, out + r * block, block, signature});
  }
  for (int i = 1; i < n; ++i) {  // starting after ourselves spreads the first reads over all ranks
    const int to = (r + i) % n, from = (r - i + n) % n;
    transfers.push_back(Transfer{to, true, in, block, signature});
    transfers.push_back(Transfer{from, false, out + from * block, block, signature});
  }
  return runTransfers(comm, transfers, "allgather (flat)");
}

}  // namespace loom
