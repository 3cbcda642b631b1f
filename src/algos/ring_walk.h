// The walk that ring allgather and ring reducescatter share: one channel's share of every block's
// elements, carried around a ring in slot-sized slices, each slice n hops deep.  A collective derives
// a Share from RingWalk that says what hop h of the current slice does (start() joins the ring, step()
// does one hop and advances), and runs one per channel with runRingWalks below.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "algos/channels.h"
#include "algos/primitives.h"

namespace loom {

class RingWalk {
 public:
  // Elements [first, first + count) of every block, around `ring` (this rank on it) on `channel`.
  RingWalk(loomComm* comm, const CollArgs& args, std::vector<int> ring, int channel, size_t first, size_t count)
      : comm_(comm), args_(args), ring_(std::move(ring)), channel_(channel), first_(first), count_(count),
        esize_(typeSize(args.type)) {
    n_ = static_cast<int>(ring_.size());
    i_ = static_cast<int>(std::find(ring_.begin(), ring_.end(), comm->rank) - ring_.begin());
  }
  bool done() const { return done_; }

 protected:
  // Connects to both neighbours; a share with no elements, or a ring of one, is done at once.
  loomResult_t join(const char* what) {
    if (n_ == 1 || count_ == 0) {
      done_ = true;
      return loomSuccess;
    }
    const int next = ring_[(i_ + 1) % n_], prev = ring_[(i_ + n_ - 1) % n_];
    LOOM_CHECK(comm_->connect({prev, next}, channel_));
    prims_ = std::make_unique<Primitives>(comm_, next, prev, channel_, args_, what);
    slice_ = prims_->maxElems();
    return loomSuccess;
  }

  // Elements in the current slice, and its offset in bytes within a block.
  size_t sliceElems() const { return std::min(slice_, count_ - off_); }
  size_t sliceAt() const { return (first_ + off_) * esize_; }
  // Offset in bytes of the block owned by the rank at ring position `position` (taken modulo n).
  size_t blockAt(int position) const {
    return static_cast<size_t>(ring_[((position % n_) + n_) % n_]) * args_.count * esize_;
  }
  // After hop `hop_` of the slice: the next hop, or the next slice, or done.
  void advance() {
    if (++hop_ < n_) return;
    hop_ = 0;
    off_ += sliceElems();
    done_ = off_ >= count_;
  }

  loomComm* comm_;
  const CollArgs& args_;
  std::vector<int> ring_;
  int channel_;
  size_t first_, count_, esize_;
  int n_ = 0, i_ = 0;  // ring size, our position
  std::unique_ptr<Primitives> prims_;
  int hop_ = 0;

 private:
  size_t slice_ = 1, off_ = 0;
  bool done_ = false;
};

// Runs a ring collective as Share walks (RingWalk's derived classes), one per channel: each over its
// channel's planned ring, with its even share of every block's elements.
template <typename Share>
loomResult_t runRingWalks(loomComm* comm, const CollArgs& args) {
  const size_t bytes = args.count * typeSize(args.type) * static_cast<size_t>(comm->nranks);
  return runChannelShares<Share>(comm, args.count, bytes, [&](int c, std::vector<int> ring, size_t first, size_t count) {
    return Share(comm, args, std::move(ring), c, first, count);
  });
}

}  // namespace loom
