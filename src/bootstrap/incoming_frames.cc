#include "bootstrap/incoming_frames.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace loom {

namespace {
// A connection that has not delivered its whole first frame within this long is dropped.
constexpr double kFrameSeconds = 5.0;
}  // namespace

IncomingFrames::~IncomingFrames() {
  for (const Pending& c : pending_) close(c.fd);
}

void IncomingFrames::drop(size_t i, const std::string& why) {
  LOOM_WARN(kBootstrap, "%s: dropped an incoming bootstrap connection: %s", who_.c_str(), why.c_str());
  close(pending_[i].fd);
  pending_.erase(pending_.begin() + static_cast<long>(i));
}

bool IncomingFrames::readSome(Pending& c, std::string* dropReason) {
  dropReason->clear();
  for (;;) {
    char* into;
    size_t want;
    if (c.have < sizeof(BootstrapHeader)) {
      into = reinterpret_cast<char*>(&c.header) + c.have;
      want = sizeof(BootstrapHeader) - c.have;
    } else {
      const size_t got = c.have - sizeof(BootstrapHeader);
      if (got == static_cast<size_t>(c.payloadBytes)) return true;
      into = c.payload.data() + got;
      want = static_cast<size_t>(c.payloadBytes) - got;
    }
    const ssize_t n = ::recv(c.fd, into, want, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      *dropReason = c.have < sizeof(BootstrapHeader) ? "closed before a whole header" : "closed mid-frame";
      return false;
    }
    if (n < 0) return false;  // nothing more for now
    c.have += static_cast<size_t>(n);
    if (c.have == sizeof(BootstrapHeader)) {  // the header alone says whether, and how much, to read on
      c.payloadBytes = payloadSize_(c.header, dropReason);
      if (c.payloadBytes < 0) {
        if (dropReason->empty()) *dropReason = "refused header";
        return false;
      }
      c.payload.resize(static_cast<size_t>(c.payloadBytes));
    }
  }
}

loomResult_t IncomingFrames::next(int listenFd, const Deadline& until, const std::atomic<bool>* abort, Frame* out) {
  for (;;) {
    if (abort != nullptr && abort->load()) return setError(loomRemoteError, "bootstrap: communicator aborted");
    // The earliest of: the caller's deadline, a pending connection's drop time, 100 ms (the abort flag).
    int waitMs = until.remainingMs(100);
    for (const Pending& c : pending_) waitMs = std::min(waitMs, c.dropAt.remainingMs(100));
    std::vector<pollfd> p{{listenFd, POLLIN, 0}};
    for (const Pending& c : pending_) p.push_back({c.fd, POLLIN, 0});
    if (::poll(p.data(), p.size(), waitMs) < 0 && errno != EINTR)
      return setError(loomSystemError, "bootstrap: poll: %s", strerror(errno));
    bool accepted = false;
    // Newest last: walk backwards so that dropping one leaves the indices of the rest valid.
    for (size_t i = pending_.size(); i-- > 0;) {
      Pending& c = pending_[i];
      if (p[i + 1].revents != 0) {
        std::string dropReason;
        if (readSome(c, &dropReason)) {
          out->fd = c.fd;
          out->header = c.header;
          out->payload = std::move(c.payload);
          pending_.erase(pending_.begin() + static_cast<long>(i));
          return loomSuccess;
        }
        if (!dropReason.empty()) {
          drop(i, dropReason);
          continue;
        }
      }
      if (c.dropAt.expired()) drop(i, "too slow (no whole frame within 5 s)");
    }
    if (p[0].revents != 0) {
      int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0 && pending_.size() >= maxPending_) {
        LOOM_WARN(kBootstrap, "%s: %zu connections already pending; refused one more", who_.c_str(), pending_.size());
        close(fd);
      } else if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        Pending c;
        c.fd = fd;
        c.dropAt = Deadline::afterSeconds(kFrameSeconds);
        pending_.push_back(std::move(c));
        accepted = true;
      }
    }
    // A frame usually arrives with its connection: read it now, not a poll later (a caller that only
    // looks, with an expired deadline, would otherwise see a failure announcement one slice late).
    if (until.expired() && !accepted) return loomTimeout;
  }
}

}  // namespace loom
