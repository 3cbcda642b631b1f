// Alltoall: block p of every rank's sendbuff goes to rank p, into the sender's slot of recvbuff.
// Out of place, all n-1 exchanges are one set of transfers that progress together (algos/p2p.cc); the
// own block is a copy.  In place (sendbuff == recvbuff) a block may only be overwritten once it has
// left: small blocks are all copied aside first and exchanged at once; large ones go pairwise, one peer
// per step (step i pairs rank r with rank i - r mod n, a pairing every rank agrees on), copying aside
// one block at a time in a buffer that stays in cache and is reused across calls.
#include <vector>

#include "algos/algorithms.h"
#include "algos/p2p.h"
#include "kernels/reduce_kernels.h"
#include "algos/scratch.h"

namespace loom {

namespace {
// In place, blocks from this size on go pairwise: one block copied aside at a time (and sent as a
// direct post where the transport offers one) beats copying all n aside first.  Every rank must take
// the same branch, so this is the algorithm's constant, not a transport's setting.
constexpr size_t kPairwiseMinBlock = 64u << 10;
}  // namespace

loomResult_t allToAll(loomComm* comm, const CollArgs& args) {
  const int n = comm->nranks, r = comm->rank;
  const size_t block = args.count * typeSize(args.type);
  const char* in = static_cast<const char*>(args.sendbuff);
  char* out = static_cast<char*>(args.recvbuff);
  const uint64_t signature = callSignature(args);
  const CopyFn copy = reduceKernels().copy;
  const bool pairwise = in == out && n > 1 && block >= kPairwiseMinBlock;
  ScratchLease outgoing(ScratchUse::kOutgoing, in != out ? 0 : pairwise ? block : block * n);
  if (pairwise) {
    for (int step = 0; step < n; ++step) {
      const int p = (step - r + n) % n;
      if (p == r) continue;  // our own block stays where it is
      copy(outgoing.data(), out + p * block, block);
      LOOM_CHECK(runTransfers(comm,
                              {Transfer{p, true, outgoing.data(), block, signature},
                               Transfer{p, false, out + p * block, block, signature}},
                              "alltoall (in place, pairwise)"));
    }
    return loomSuccess;
  }
  if (in == out) {
    copy(outgoing.data(), in, block * n);
    in = outgoing.data();
  }
  std::vector<Transfer> transfers;
  for (int i = 1; i <= n; ++i) {  // starting after ourselves spreads the first slots over all peers
    const int p = (r + i) % n;
    transfers.push_back(Transfer{p, true, const_cast<char*>(in) + p * block, block, signature});
    transfers.push_back(Transfer{p, false, out + p * block, block, signature});
  }
  return runTransfers(comm, transfers, "alltoall");
}

}  // namespace loom
