// Ring reduce-scatter: the block of the rank at ring position b is started by position b+1, reduced on
// by every rank it passes, and completed (and divided, for avg) at position b after n-1 hops.  Position
// i sends block i-1, then for n-2 steps reduces the arriving block (i-k-1) with its own and passes it
// on, then completes block i into the output.  Blocks are walked in slot-sized slices.
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

// Elements [first, first + count) of every block, reduced around `ring` on `channel`.
class ReduceScatterShare {
 public:
  ReduceScatterShare(loomComm* comm, const CollArgs& args, std::vector<int> ring, int channel, size_t first,
                     size_t count)
      : comm_(comm), args_(args), ring_(std::move(ring)), channel_(channel), first_(first), count_(count) {
    n_ = static_cast<int>(ring_.size());
    i_ = static_cast<int>(std::find(ring_.begin(), ring_.end(), comm->rank) - ring_.begin());
  }

  loomResult_t start() {
    if (count_ == 0) return finish();
    LOOM_CHECK(comm_->connect({ring_[(i_ + n_ - 1) % n_], ring_[(i_ + 1) % n_]}, channel_));
    prims_ = std::make_unique<Primitives>(comm_, ring_[(i_ + 1) % n_], ring_[(i_ + n_ - 1) % n_], channel_, args_,
                                          "reducescatter (ring)");
    slice_ = prims_->maxElems();
    return loomSuccess;
  }

  bool done() const { return done_; }

  // Hop k of the current slice: 0 starts block i-1, 1..n-2 add to block i-k-1 and pass it on, n-1
  // completes our block.
  loomResult_t step() {
    const size_t len = std::min(slice_, count_ - off_), at = (first_ + off_) * typeSize(args_.type);
    const int k = hop_;
    if (k == 0) {
      LOOM_CHECK(prims_->send(block(i_ - 1) + at, len));
    } else if (k < n_ - 1) {
      LOOM_CHECK(prims_->recvReduceSend(block(i_ - k - 1) + at, len));
    } else {
      const int divisor = args_.op == loomAvg ? comm_->nranks : 0;
      LOOM_CHECK(prims_->recvReduceCopy(block(i_) + at, static_cast<char*>(args_.recvbuff) + at, len, divisor));
    }
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
  // The input block that belongs to the rank at ring position `position` (taken modulo n).
  const char* block(int position) const {
    const int owner = ring_[((position % n_) + n_) % n_];
    return static_cast<const char*>(args_.sendbuff) + static_cast<size_t>(owner) * args_.count * typeSize(args_.type);
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

loomResult_t ringReduceScatter(loomComm* comm, const CollArgs& args) {
  const size_t blockBytes = args.count * typeSize(args.type);
  if (comm->nranks == 1) {
    if (args.recvbuff != args.sendbuff) reduceKernels().copy(args.recvbuff, args.sendbuff, blockBytes);
    return loomSuccess;
  }
  const int channels = ringChannels(comm, blockBytes * comm->nranks, plannedStepBytes());
  std::vector<ReduceScatterShare> shares;
  shares.reserve(channels);
  for (int c = 0; c < channels; ++c) {
    size_t first, count;
    channelShare(args.count, c, channels, &first, &count);
    shares.emplace_back(comm, args, planRingOrder(comm, c), c, first, count);
  }
  return runShares(shares);
}

}  // namespace loom
