#include "transport/socket/striped_io.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace loom {

void StripedIo::clear() {
  for (auto& l : lists_) l.clear();
  std::fill(next_.begin(), next_.end(), 0);
}

void StripedIo::add(size_t j, void* p, size_t len) {
  if (len > 0) lists_[j].push_back(iovec{p, len});
}

void StripedIo::addStriped(void* p, size_t bytes) {
  const size_t n = lists_.size();
  char* at = static_cast<char*>(p);
  if (bytes < kStripeMinBytes || n == 1) return add(0, at, bytes);
  const size_t per = ((bytes / n) + 4095) & ~size_t{4095};
  for (size_t j = 0, off = 0; j < n && off < bytes; ++j) {
    const size_t len = std::min(per, bytes - off);
    add(j, at + off, len);
    off += len;
  }
}

bool StripedIo::done() const {
  for (size_t j = 0; j < lists_.size(); ++j)
    if (next_[j] < lists_[j].size()) return false;
  return true;
}

bool StripedIo::pass(const std::vector<int>& fds, bool sending, std::string* why) {
  for (size_t j = 0; j < lists_.size(); ++j) {
    auto& l = lists_[j];
    while (next_[j] < l.size()) {
      msghdr msg{};
      msg.msg_iov = &l[next_[j]];
      msg.msg_iovlen = std::min<size_t>(l.size() - next_[j], 1024);
      size_t asked = 0;
      for (size_t k = 0; k < msg.msg_iovlen; ++k) asked += msg.msg_iov[k].iov_len;
      const ssize_t got = sending ? ::sendmsg(fds[j], &msg, MSG_NOSIGNAL | MSG_DONTWAIT)
                                  : ::recvmsg(fds[j], &msg, MSG_DONTWAIT);
      if (got == 0 && !sending) return *why = "the peer closed the connection", false;
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return *why = strerror(errno), false;
      }
      // Skip what moved: whole pieces, then part of the next.
      size_t moved = static_cast<size_t>(got);
      while (next_[j] < l.size() && moved >= l[next_[j]].iov_len) moved -= l[next_[j]++].iov_len;
      if (next_[j] < l.size()) {
        l[next_[j]].iov_base = static_cast<char*>(l[next_[j]].iov_base) + moved;
        l[next_[j]].iov_len -= moved;
      }
      // A short transfer means the socket has no more room (or data) right now: asking again would
      // only cost a system call that fails.
      if (static_cast<size_t>(got) < asked) break;
    }
  }
  return true;
}

void StripedIo::pollSet(const std::vector<int>& fds, bool sending, std::vector<pollfd>* out) const {
  for (size_t j = 0; j < lists_.size(); ++j)
    if (next_[j] < lists_[j].size())
      out->push_back(pollfd{fds[j], static_cast<short>(sending ? POLLOUT : POLLIN), 0});
}

}  // namespace loom
