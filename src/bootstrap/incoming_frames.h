// Connections accepted on a bootstrap listener whose first frame is still arriving.  They are read all
// at once (one poll over the listener and every pending connection), each with its own deadline, so
// that a slow or silent client (slowloris) delays nobody: it is dropped when its time is up while the
// others are read as their bytes come.  Used by the bootstrap root (hellos) and by every rank's
// listener (ring, point-to-point and failure frames).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "base/error.h"

namespace loom {

class IncomingFrames {
 public:
  struct Frame {
    int fd = -1;  // the connection: the caller keeps it or closes it
    BootstrapHeader header{};
    std::vector<char> payload;
  };
  // After a header arrived: how many payload bytes to read before the frame is complete, or -1 to
  // drop the connection (with *why).
  using PayloadSize = std::function<long long(const BootstrapHeader& h, std::string* why)>;

  // `who` prefixes the warnings ("bootstrap root", "rank 3"); at most `maxPending` connections wait.
  IncomingFrames(std::string who, PayloadSize payloadSize, size_t maxPending = 256)
      : who_(std::move(who)), payloadSize_(std::move(payloadSize)), maxPending_(maxPending) {}
  ~IncomingFrames();  // closes what is still pending
  IncomingFrames(const IncomingFrames&) = delete;
  IncomingFrames& operator=(const IncomingFrames&) = delete;

  // Accepts on `listenFd` and reads until one frame is complete (*out, loomSuccess) or `until` passes
  // (loomTimeout, no message set) or `abort` is raised (loomRemoteError).  Bad and slow connections are
  // dropped and logged at WARN, never an error of the caller's.
  loomResult_t next(int listenFd, const Deadline& until, const std::atomic<bool>* abort, Frame* out);
  size_t pendingCount() const { return pending_.size(); }

 private:
  struct Pending {
    int fd = -1;
    Deadline dropAt;
    size_t have = 0;  // bytes of header + payload read so far
    long long payloadBytes = -1;  // known once the header is in
    BootstrapHeader header{};
    std::vector<char> payload;
  };
  void drop(size_t i, const std::string& why);
  // Reads what is there; true when the frame is complete.  *dropReason is set (non-empty) when the
  // connection must be dropped: closed early, or a header refused by payloadSize_.
  bool readSome(Pending& c, std::string* dropReason);

  std::string who_;
  PayloadSize payloadSize_;
  size_t maxPending_;
  std::vector<Pending> pending_;
};

}  // namespace loom
