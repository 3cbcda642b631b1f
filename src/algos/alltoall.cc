// Alltoall: block p of every rank's sendbuff goes to rank p, into the sender's slot of recvbuff.  All
// n-1 exchanges are one set of transfers that progress together (algos/p2p.cc); the own block is a copy.
// In place (sendbuff == recvbuff) the input is first copied aside, since blocks arrive before others
// leave.
#include <vector>

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "algos/reduce_kernels.h"

namespace loom {

loomResult_t allToAll(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks;
  const size_t block = args.count * typeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  std::vector<char> staged;
  if (in == out) {
    staged.resize(block * n);
    reduceKernels().copy(staged.data(), in, block * n);
    in = staged.data();
  }
  const uint64_t signature = callSignature(args);
  std::vector<Transfer> transfers;
  for (int i = 1; i <= n; ++i) {  // starting after ourselves spreads the first slots over all peers
    int p = (comm->rank + i) % n;
    transfers.push_back(Transfer{p, true, const_cast<char*>(in) + p * block, block, signature});
    transfers.push_back(Transfer{p, false, out + p * block, block, signature});
  }
  return runTransfers(comm, transfers, "alltoall");
}

}  // namespace loom
