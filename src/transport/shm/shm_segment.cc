#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace loom {

ShmSegment::~ShmSegment() {
  unlinkName();
  if (data_ != nullptr) munmap(data_, size_);
}

void ShmSegment::unlinkName() {
  if (named_) shm_unlink(name_.c_str());
  named_ = false;
}

loomResult_t ShmSegment::mapAndClose(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) return setError(loomSystemError, "mmap(%s): %s", name_.c_str(), strerror(err));
  data_ = p;
  size_ = bytes;
  return loomSuccess;
}

loomResult_t ShmSegment::create(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return setError(loomSystemError, "shm_open(%s): %s", name.c_str(), strerror(errno));
  name_ = name;
  named_ = true;
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    close(fd);
    return setError(loomSystemError, "cannot reserve %zu bytes of shared memory for %s: %s (is /dev/shm full or "
                    "too small? docker: --shm-size)", bytes, name.c_str(), strerror(rc));
  }
  return mapAndClose(fd, bytes);
}

loomResult_t ShmSegment::open(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return setError(loomSystemError, "shm_open(%s) of a peer's segment: %s (does the peer see the same /dev/shm?)",
                    name.c_str(), strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    close(fd);
    return setError(loomSystemError, "shm segment %s is smaller than announced", name.c_str());
  }
  name_ = name;
  named_ = true;
  return mapAndClose(fd, bytes);
}

}  // namespace loom
