// The bytes of one frame moving over a connection's sockets (LOOM_NSOCKS): a gather or scatter list per
// socket, advanced without blocking as the sockets take or give bytes.  Both queues of the socket
// transport drive it from whichever thread is waiting; none of its calls ever blocks.
//
// A frame's header travels on socket 0; its payload is cut into one contiguous part per socket (all of
// it on socket 0 below kStripeMinBytes, where striping only adds system calls), so that both ends derive
// the same cut from the frame's size alone.
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <cstddef>
#include <string>
#include <vector>

namespace loom {

constexpr size_t kStripeMinBytes = 64 << 10;

class StripedIo {
 public:
  explicit StripedIo(size_t nsockets) : lists_(nsockets), next_(nsockets, 0) {}
  size_t sockets() const { return lists_.size(); }
  void clear();
  // Appends len bytes at p to socket j's list.
  void add(size_t j, void* p, size_t len);
  // Appends `bytes` bytes at p, cut over the sockets as described above.
  void addStriped(void* p, size_t bytes);
  // One pass over every socket with bytes left, each moving what it can now: false when the connection
  // failed or the peer closed it (*why says which).
  bool pass(const std::vector<int>& fds, bool sending, std::string* why);
  bool done() const;
  // Poll entries for the sockets that still have bytes to move.
  void pollSet(const std::vector<int>& fds, bool sending, std::vector<pollfd>* out) const;

 private:
  std::vector<std::vector<iovec>> lists_;
  std::vector<size_t> next_;  // per socket: the first piece of its list not yet moved in full
};

}  // namespace loom
