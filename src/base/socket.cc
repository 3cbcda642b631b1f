#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "base/params.h"

namespace loom {

namespace {

constexpr int kPollSliceMs = 100;

loomResult_t checkAbort(const std::atomic<bool>* abort, const char* what) {
  if (abort != nullptr && abort->load(std::memory_order_relaxed))
    return setError(loomRemoteError, "%s: communicator aborted", what);
  return loomSuccess;
}

// Waits until fd is ready for `events`; *ready=false when the deadline passed.
loomResult_t waitFd(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abort,
                    const char* what, bool* ready) {
  for (;;) {
    LOOM_CHECK(checkAbort(abort, what));
    int ms = deadline.remainingMs(kPollSliceMs);
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, ms);
    if (r > 0) {
      *ready = true;
      return loomSuccess;
    }
    if (r < 0 && errno != EINTR) return setError(loomSystemError, "%s: poll: %s", what, strerror(errno));
    if (r == 0 && deadline.expired()) {
      *ready = false;
      return loomSuccess;
    }
  }
}

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (storage.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "<no address>";
}

int SocketAddress::port() const {
  if (storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

bool interfaceMatches(const std::string& specIn, const std::string& name) {
  if (specIn.empty()) return true;
  std::string spec = specIn;
  bool exclude = spec[0] == '^';
  if (exclude) spec.erase(0, 1);
  bool exact = !spec.empty() && spec[0] == '=';
  if (exact) spec.erase(0, 1);
  bool hit = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string tok = spec.substr(pos, comma - pos);
    if (!tok.empty() && (exact ? name == tok : name.compare(0, tok.size(), tok) == 0)) hit = true;
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

loomResult_t findInterfaceAddress(SocketAddress* out, std::string* ifaceName) {
  const Params& p = params();
  int family = AF_UNSPEC;
  if (p.SOCKET_FAMILY == "AF_INET") family = AF_INET;
  else if (p.SOCKET_FAMILY == "AF_INET6") family = AF_INET6;
  else if (!p.SOCKET_FAMILY.empty())
    return setError(loomInvalidArgument, "LOOM_SOCKET_FAMILY=%s: use AF_INET or AF_INET6", p.SOCKET_FAMILY.c_str());

  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return setError(loomSystemError, "getifaddrs: %s", strerror(errno));
  // Two passes: with an explicit LOOM_SOCKET_IFNAME take the first match in any class; by default prefer
  // a non-loopback interface and fall back to loopback.
  const ifaddrs* chosen = nullptr;
  for (int pass = 0; pass < 2 && chosen == nullptr; ++pass) {
    for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
      int fam = it->ifa_addr->sa_family;
      if (fam != AF_INET && fam != AF_INET6) continue;
      if (family != AF_UNSPEC && fam != family) continue;
      if (fam == AF_INET6) {  // link-local v6 needs scope ids everywhere; skip it
        auto* a6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
        if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;
      }
      bool loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
      if (!p.SOCKET_IFNAME.empty()) {
        if (pass == 1 || !interfaceMatches(p.SOCKET_IFNAME, it->ifa_name)) continue;
      } else if (loopback != (pass == 1)) {
        continue;
      }
      // Prefer IPv4 when both families exist on the chosen interface (it is listed first on Linux).
      chosen = it;
      break;
    }
  }
  if (chosen == nullptr) {
    freeifaddrs(list);
    return setError(loomSystemError, "no usable network interface%s%s", p.SOCKET_IFNAME.empty() ? "" : " matches LOOM_SOCKET_IFNAME=",
                    p.SOCKET_IFNAME.c_str());
  }
  std::memset(out, 0, sizeof(*out));
  out->length = chosen->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  std::memcpy(&out->storage, chosen->ifa_addr, out->length);
  if (ifaceName) *ifaceName = chosen->ifa_name;
  freeifaddrs(list);
  return loomSuccess;
}

loomResult_t parseHostPort(const std::string& text, SocketAddress* out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return setError(loomInvalidArgument, "address \"%s\": expected [v6addr]:port", text.c_str());
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return setError(loomInvalidArgument, "address \"%s\": expected host:port", text.c_str());
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long pn = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || pn <= 0 || pn > 65535)
    return setError(loomInvalidArgument, "address \"%s\": bad port", text.c_str());
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return setError(loomInvalidArgument, "address \"%s\": %s", text.c_str(), gai_strerror(rc));
  std::memset(out, 0, sizeof(*out));
  out->length = res->ai_addrlen;
  std::memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return loomSuccess;
}

loomResult_t listenSocket(SocketAddress* addr, int* fd) {
  int s = socket(addr->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return setError(loomSystemError, "socket: %s", strerror(errno));
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s, reinterpret_cast<sockaddr*>(&addr->storage), addr->length) != 0) {
    int e = errno;
    close(s);
    return setError(loomSystemError, "bind %s: %s", addr->toString().c_str(), strerror(e));
  }
  if (listen(s, 1024) != 0) {
    int e = errno;
    close(s);
    return setError(loomSystemError, "listen: %s", strerror(e));
  }
  socklen_t len = sizeof(addr->storage);
  getsockname(s, reinterpret_cast<sockaddr*>(&addr->storage), &len);
  addr->length = len;
  setNonBlocking(s);
  *fd = s;
  return loomSuccess;
}

loomResult_t connectSocket(const SocketAddress& addr, const Deadline& deadline, const std::atomic<bool>* abort,
                           int* fd, bool retryRefused) {
  int delayMs = 1;
  for (;;) {
    LOOM_CHECK(checkAbort(abort, "connect"));
    int s = socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return setError(loomSystemError, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int rc = connect(s, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      bool ready = false;
      loomResult_t r = waitFd(s, POLLOUT, deadline, abort, "connect", &ready);
      if (r != loomSuccess) {
        close(s);
        return r;
      }
      socklen_t l = sizeof(err);
      err = ready ? (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l), err) : ETIMEDOUT;
    }
    if (err == 0) {
      *fd = s;
      return loomSuccess;
    }
    close(s);
    bool retriable = err == ECONNREFUSED || err == ECONNRESET || err == EAGAIN || err == ENETUNREACH ||
                     err == EHOSTUNREACH || err == ETIMEDOUT;
    if (!retriable) return setError(loomSystemError, "connect to %s: %s", addr.toString().c_str(), strerror(err));
    if (err == ECONNREFUSED && !retryRefused)
      return setError(loomRemoteError, "connect to %s: %s", addr.toString().c_str(), strerror(err));
    if (deadline.expired())
      return setError(loomTimeout, "connect to %s: still failing (%s) after LOOM_TIMEOUT", addr.toString().c_str(),
                      strerror(err));
    usleep(static_cast<useconds_t>(deadline.remainingMs(delayMs)) * 1000);
    if (delayMs < 100) delayMs *= 2;
  }
}

loomResult_t acceptSocket(int listenFd, const Deadline& deadline, const std::atomic<bool>* abort, int* fd) {
  *fd = -1;
  for (;;) {
    bool ready = false;
    LOOM_CHECK(waitFd(listenFd, POLLIN, deadline, abort, "accept", &ready));
    if (!ready) return loomSuccess;
    int s = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (s >= 0) {
      int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *fd = s;
      return loomSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return setError(loomSystemError, "accept: %s", strerror(errno));
  }
}

loomResult_t sendAll(int fd, const void* buf, size_t len, const Deadline& deadline, const std::atomic<bool>* abort,
                     const char* what) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return setError(loomRemoteError, "%s: send: %s", what, strerror(errno));
    bool ready = false;
    LOOM_CHECK(waitFd(fd, POLLOUT, deadline, abort, what, &ready));
    if (!ready) return setError(loomTimeout, "%s: send did not complete within LOOM_TIMEOUT", what);
  }
  return loomSuccess;
}

loomResult_t recvAll(int fd, void* buf, size_t len, const Deadline& deadline, const std::atomic<bool>* abort,
                     const char* what) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return setError(loomRemoteError, "%s: peer closed the connection", what);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return setError(loomRemoteError, "%s: recv: %s", what, strerror(errno));
    bool ready = false;
    LOOM_CHECK(waitFd(fd, POLLIN, deadline, abort, what, &ready));
    if (!ready) return setError(loomTimeout, "%s: no data within LOOM_TIMEOUT", what);
  }
  return loomSuccess;
}

void closeSocket(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace loom
