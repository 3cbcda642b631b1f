// Per-thread scratch memory for the algorithms that need room beside the user's buffers: one-shot's
// gathered inputs, recursive halving/doubling's received halves, alltoall's in-place outgoing copies.
//
// Why not a vector per call: at large sizes the allocation cost more than the collective.  A fresh
// vector is a fresh mmap, zero-filled and faulted in page by page at every call (a 16 MB one-shot
// allreduce at 2 ranks took 55 ms, the ring 4 ms).  A lease reuses its thread's buffer of that use,
// uninitialised, and grows it when a call needs more.  Buffers larger than kScratchKeepBytes
// (model/cost_model.h: the model prices what it costs) are freed when their lease ends, so one huge call
// does not pin its memory for the life of the thread.
#pragma once

#include <cstddef>
#include <memory>

#include "model/cost_model.h"

namespace loom {

enum class ScratchUse { kGathered, kReceived, kOutgoing, kOwnInput, kCount };

class ScratchLease {
 public:
  ScratchLease(ScratchUse use, size_t bytes);
  ~ScratchLease();
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;

  char* data() const { return data_; }

 private:
  ScratchUse use_;
  char* data_;
  std::unique_ptr<char[]> own_;  // only when the thread's buffer of this use is already leased
};

}  // namespace loom
