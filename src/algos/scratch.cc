#include "algos/scratch.h"

#include <memory>

namespace loom {

namespace {

struct ThreadScratch {
  std::unique_ptr<char[]> buffer[static_cast<int>(ScratchUse::kCount)];
  size_t capacity[static_cast<int>(ScratchUse::kCount)] = {};
  bool leased[static_cast<int>(ScratchUse::kCount)] = {};
};

thread_local ThreadScratch scratch;

}  // namespace

ScratchLease::ScratchLease(ScratchUse use, size_t bytes) : use_(use) {
  const int u = static_cast<int>(use);
  if (scratch.leased[u]) {  // the same use twice on one thread at once (not done today): a private buffer
    own_.reset(new char[bytes > 0 ? bytes : 1]);
    data_ = own_.get();
    return;
  }
  scratch.leased[u] = true;
  if (scratch.capacity[u] < bytes || !scratch.buffer[u]) {
    scratch.buffer[u].reset(new char[bytes > 0 ? bytes : 1]);  // uninitialised: every user writes before it reads
    scratch.capacity[u] = bytes;
  }
  data_ = scratch.buffer[u].get();
}

ScratchLease::~ScratchLease() {
  if (own_) return;
  const int u = static_cast<int>(use_);
  scratch.leased[u] = false;
  if (scratch.capacity[u] > kScratchKeepBytes) {
    scratch.buffer[u].reset();
    scratch.capacity[u] = 0;
  }
}

}  // namespace loom
