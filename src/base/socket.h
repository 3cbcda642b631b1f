// TCP helpers for the bootstrap: interface choice, listen/connect/accept and whole-buffer I/O, each
// bounded by a Deadline and an abort flag (waits poll in slices of at most 100 ms).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <string>

#include "base/error.h"

namespace loom {

struct SocketAddress {
  sockaddr_storage storage;  // AF_INET or AF_INET6
  socklen_t length;
  std::string toString() const;  // "1.2.3.4:5678" or "[::1]:5678"
  int port() const;
};

// Picks the address bootstrap sockets use, following LOOM_SOCKET_IFNAME / LOOM_SOCKET_FAMILY;
// ifaceName receives the interface's name (for logs).
loomResult_t findInterfaceAddress(SocketAddress* out, std::string* ifaceName);
// True when `name` is selected by an LOOM_SOCKET_IFNAME-style spec ("eth,ib", "^docker", "=eth0").
bool interfaceMatches(const std::string& spec, const std::string& name);
// Resolves "host:port" or "[v6addr]:port".
loomResult_t parseHostPort(const std::string& text, SocketAddress* out);

// A listening socket bound to `addr` (port 0 picks one; addr is updated with the real port).
loomResult_t listenSocket(SocketAddress* addr, int* fd);
// Connects, retrying failed attempts until the deadline (the listener may not be up yet).  With
// retryRefused false, a refused connection (nobody listens: the peer is gone) ends it at once with
// loomRemoteError; other failures (unreachable network) are still retried.
loomResult_t connectSocket(const SocketAddress& addr, const Deadline& deadline, const std::atomic<bool>* abort,
                           int* fd, bool retryRefused = true);
// Waits for one incoming connection; *fd = -1 when the deadline passed.
loomResult_t acceptSocket(int listenFd, const Deadline& deadline, const std::atomic<bool>* abort, int* fd);

// Moves exactly `len` bytes; a peer closing early is loomRemoteError, the deadline loomTimeout.
// `what` names the operation in error messages.
loomResult_t sendAll(int fd, const void* buf, size_t len, const Deadline& deadline, const std::atomic<bool>* abort,
                     const char* what);
loomResult_t recvAll(int fd, void* buf, size_t len, const Deadline& deadline, const std::atomic<bool>* abort,
                     const char* what);

void closeSocket(int* fd);

}  // namespace loom
