// Ring allreduce.
//
// The buffer is cut into n segments, one per rank (sizes differ by at most one element).  Around the
// ring, in 2(n-1) steps, each rank:
//   reduce-scatter  step k = 0 .. n-1: receives segment (r-k) from its predecessor, adds its own data,
//                   passes it on; at k = n-1 segment r+1 is complete (and divided, for avg) and stored.
//   allgather       step j = 1 .. n-1: receives a complete segment, stores it, passes it on (but the last).
// Every segment is walked in slices of one transport slot, slice column by slice column, so the ring is
// a pipeline: a slice is being reduced on one link while the next slice is already in flight on another.
//
// A large call is split over channels (algos/channels.h): each channel's share of the elements runs
// this ring over the planned ring of its channel, on its own connections.  A RingShare is one share as
// a sequence of steps; the call advances every share by one step in turn until all are done.
#include <algorithm>
#include <cstring>
#include <memory>

#include "algos/algorithms.h"
#include "algos/channels.h"
#include "algos/primitives.h"

namespace loom {

namespace {

// Elements [first, first + count) of the call, reduced around `group` on `channel`.
class RingShare {
 public:
  RingShare(loomComm* comm, const CollArgs& args, std::vector<int> group, int channel, const void* input,
            void* output, size_t first, size_t count, int divisor)
      : comm_(comm),
        args_(args),
        group_(std::move(group)),
        channel_(channel),
        esize_(typeSize(args.type)),
        in_(static_cast<const char*>(input) + first * esize_),
        out_(static_cast<char*>(output) + first * esize_),
        count_(count),
        divisor_(divisor) {
    n_ = static_cast<int>(group_.size());
    r_ = static_cast<int>(std::find(group_.begin(), group_.end(), comm->rank) - group_.begin());
  }

  // Connects to the neighbours; a rank outside the group, or alone in it, has nothing more to do.
  loomResult_t start() {
    if (r_ == n_) return finish();
    if (n_ == 1) {
      if (in_ != out_) std::memmove(out_, in_, count_ * esize_);
      return finish();  // callers divide by more than one rank only on larger groups
    }
    const int next = group_[(r_ + 1) % n_], prev = group_[(r_ + n_ - 1) % n_];
    LOOM_CHECK(comm_->connect({prev, next}, channel_));
    prims_ = std::make_unique<Primitives>(comm_, next, prev, channel_, args_, "allreduce (ring)");
    base_ = count_ / n_;
    extra_ = count_ % n_;
    longest_ = base_ + (extra_ ? 1 : 0);
    slice_ = prims_->maxElems();
    if (longest_ == 0) return finish();
    return loomSuccess;
  }

  bool done() const { return done_; }

  // The next step of the current slice column: op 0 sends our segment, ops 1..n-2 reduce and pass on,
  // op n-1 completes segment r+1, ops n..2n-3 pass complete segments on, op 2n-2 stores the last one.
  loomResult_t step() {
    const int n = n_, r = r_, op = op_;
    size_t off, len;
    if (op == 0) {
      part(r, &off, &len);
      // Sent from where it lies even in place: this slice of our input is overwritten only by its result,
      // which reaches us after the next rank has received (and passed on) what we send now.
      LOOM_CHECK(prims_->sendFinal(in_ + off, len, Landing::kSlot));
    } else if (op < n - 1) {
      part(r - op, &off, &len);
      LOOM_CHECK(prims_->recvReduceSend(in_ + off, len));
    } else if (op == n - 1) {
      part(r + 1, &off, &len);
      LOOM_CHECK(prims_->recvReduceCopySend(in_ + off, out_ + off, len, divisor_));
    } else if (op < 2 * n - 2) {
      part(r + 1 - (op - (n - 1)), &off, &len);
      LOOM_CHECK(prims_->recvCopySend(out_ + off, len));
    } else {
      part(r + 2, &off, &len);
      LOOM_CHECK(prims_->recv(out_ + off, len));
    }
    if (++op_ == 2 * n - 1) {
      op_ = 0;
      if (++col_ * slice_ >= longest_) return finish();
    }
    return loomSuccess;
  }

 private:
  loomResult_t finish() {
    done_ = true;
    return loomSuccess;
  }
  // Offset (bytes) and length (elements) of the current column's slice of segment s (possibly empty:
  // counts smaller than n).  Segment s covers elements [segStart(s), segStart(s+1)).
  void part(int s, size_t* off, size_t* len) const {
    s = ((s % n_) + n_) % n_;
    auto segStart = [&](int i) { return i * base_ + std::min<size_t>(i, extra_); };
    const size_t begin = segStart(s), end = segStart(s + 1);
    const size_t lo = std::min(begin + col_ * slice_, end);
    *off = lo * esize_;
    *len = std::min(lo + slice_, end) - lo;
  }

  loomComm* comm_;
  const CollArgs& args_;
  std::vector<int> group_;
  int channel_;
  size_t esize_;
  const char* in_;
  char* out_;
  size_t count_;
  int divisor_;
  int n_ = 0, r_ = 0;
  std::unique_ptr<Primitives> prims_;
  size_t base_ = 0, extra_ = 0, longest_ = 0, slice_ = 1;
  size_t col_ = 0;
  int op_ = 0;
  bool done_ = false;
};

}  // namespace

loomResult_t ringAllReduceGroup(loomComm* comm, const CollArgs& args, const std::vector<int>& group, int channel,
                                const void* input, void* output, int divisor) {
  std::vector<RingShare> shares;
  shares.emplace_back(comm, args, group, channel, input, output, 0, args.count, divisor);
  return runShares(shares);
}

loomResult_t ringAllReduce(loomComm* comm, const CollArgs& args) {
  const int divisor = args.op == loomAvg ? comm->nranks : 0;
  return runChannelShares<RingShare>(comm, args.count, args.count * typeSize(args.type),
                                     [&](int c, std::vector<int> ring, size_t first, size_t count) {
                                       return RingShare(comm, args, std::move(ring), c, args.sendbuff, args.recvbuff,
                                                        first, count, divisor);
                                     });
}

}  // namespace loom
