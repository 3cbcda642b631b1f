// A named POSIX shared-memory mapping.  The creator reserves the memory up front (posix_fallocate) so a
// full /dev/shm is a clean error at connect time, never a SIGBUS in the middle of a collective.  Names are
// unlinked as soon as both sides have the mapping, so nothing is left behind when a process dies.
#pragma once

#include <cstddef>
#include <string>

#include "loom.h"

namespace loom {

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  loomResult_t create(const std::string& name, size_t bytes);
  loomResult_t open(const std::string& name, size_t bytes);
  // Removes the name (the mapping stays valid); harmless when it is already gone.
  void unlinkName();

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  loomResult_t mapAndClose(int fd, size_t bytes);

  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool named_ = false;
};

}  // namespace loom
