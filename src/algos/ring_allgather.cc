// Ring allgather: each rank's block travels n-1 hops around the ring.  The rank at position i of the
// ring sends its own block to position i+1, then for n-2 steps stores the block arriving from i-1 and
// passes it on, and finally stores the last block.  Blocks are walked in slot-sized slices so
// consecutive hops overlap.
//
// The ring is the topology's planned ring of each channel (algos/channels.h); a large call is split
// over channels, each channel carrying its share of every block's elements on its own connections.
#include <algorithm>
#include <memory>

#include "algos/algorithms.h"
#include "algos/channels.h"
#include "algos/primitives.h"

namespace loom {

namespace {

// Elements [first, first + count) of every block, gathered around `ring` on `channel`.
class AllGatherShare {
 public:
  AllGatherShare(loomComm* comm, const CollArgs& args, std::vector<int> ring, int channel, size_t first, size_t count)
      : comm_(comm), args_(args), ring_(std::move(ring)), channel_(channel), first_(first), count_(count) {
    n_ = static_cast<int>(ring_.size());
    i_ = static_cast<int>(std::find(ring_.begin(), ring_.end(), comm->rank) - ring_.begin());
  }

  loomResult_t start() {
    if (n_ == 1 || count_ == 0) return finish();
    LOOM_CHECK(comm_->connect({ring_[(i_ + n_ - 1) % n_], ring_[(i_ + 1) % n_]}, channel_));
    prims_ = std::make_unique<Primitives>(comm_, ring_[(i_ + 1) % n_], ring_[(i_ + n_ - 1) % n_], channel_, args_,
                                          "allgather (ring)");
    slice_ = prims_->maxElems();
    return loomSuccess;
  }

  bool done() const { return done_; }

  // Hop j of the current slice: 0 sends our block, 1..n-2 store and pass on, n-1 stores the last.
  loomResult_t step() {
    const size_t len = std::min(slice_, count_ - off_);
    const int j = hop_;
    char* piece = block(i_ - j) + (first_ + off_) * typeSize(args_.type);
    if (j == 0) LOOM_CHECK(prims_->send(piece, len));
    else if (j < n_ - 1) LOOM_CHECK(prims_->recvCopySend(piece, len));
    else LOOM_CHECK(prims_->recv(piece, len));
    if (++hop_ == n_) {
      hop_ = 0;
      off_ += len;
      if (off_ >= count_) return finish();
    }
    return loomSuccess;
  }

 private:
  loomResult_t finish() {
    done_ = true;
    return loomSuccess;
  }
  // The output block of the rank at ring position `position` (any integer, taken modulo n).
  char* block(int position) const {
    const int owner = ring_[((position % n_) + n_) % n_];
    return static_cast<char*>(args_.recvbuff) + static_cast<size_t>(owner) * args_.count * typeSize(args_.type);
  }

  loomComm* comm_;
  const CollArgs& args_;
  std::vector<int> ring_;
  int channel_;
  size_t first_, count_;
  int n_ = 0, i_ = 0;
  std::unique_ptr<Primitives> prims_;
  size_t slice_ = 1, off_ = 0;
  int hop_ = 0;
  bool done_ = false;
};

}  // namespace

loomResult_t ringAllGather(loomComm* comm, const CollArgs& args) {
  const size_t esize = typeSize(args.type), blockBytes = args.count * esize;
  char* mine = static_cast<char*>(args.recvbuff) + static_cast<size_t>(comm->rank) * blockBytes;
  if (args.sendbuff != mine) reduceKernels().copy(mine, args.sendbuff, blockBytes);  // in place: already there
  const int channels = ringChannels(comm, blockBytes * comm->nranks, plannedStepBytes());
  std::vector<AllGatherShare> shares;
  shares.reserve(channels);
  for (int c = 0; c < channels; ++c) {
    size_t first, count;
    channelShare(args.count, c, channels, &first, &count);
    shares.emplace_back(comm, args, planRingOrder(comm, c), c, first, count);
  }
  return runShares(shares);
}

}  // namespace loom
