// Bootstrap: how ranks find each other before any data transport exists.
//
//   1. Every rank opens a listener and sends (rank, nranks, listener address) to the root, whose address
//      is in the unique id; the root answers each rank with the table of all listeners.
//   2. Each rank connects to the next rank's listener: a ring used for allGather/barrier.
//   3. send/recv(peer, tag) carry small point-to-point messages (transport connection setup), each over
//      a short-lived connection; messages that arrive before they are asked for are kept.
// Every frame carries the communicator secret and a bounded length; anything else is dropped and logged.
// Every wait is bounded by the deadline the communicator gives (LOOM_TIMEOUT) and by its abort flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/unique_id.h"

namespace loom {

enum class FrameType : uint16_t { Hello = 1, Table = 2, Ring = 3, P2p = 4, RingData = 5 };

struct FrameHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t reserved;
  uint8_t secret[kSecretBytes];
  int32_t from;
  int32_t tag;
  uint64_t length;
};

constexpr uint64_t kMaxFrameBytes = 64ull << 20;

// Checks a received header (magic, secret, type, sender range, length bound).  Pure: used by the
// bootstrap, its tests and the fuzzer.  Returns false with a reason.
bool validateFrameHeader(const FrameHeader& h, const uint8_t secret[kSecretBytes], int nranks, std::string* why);

// Runs the root side of step 1 on an open listener; returns when every rank got its table, or on failure
// or deadline.  Called on a detached thread by loomGetUniqueId (or by rank 0 in LOOM_COMM_ID mode).
void runBootstrapRoot(int listenFd, UniqueIdData id, double timeoutSec);

class Bootstrap {
 public:
  static loomResult_t create(const UniqueIdData& id, int rank, int nranks, double timeoutSec,
                             const std::atomic<bool>* abort, std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // data holds nranks slots of bytesPerRank; this rank's slot is filled in, the others get filled.
  loomResult_t allGather(void* data, size_t bytesPerRank);
  loomResult_t barrier();
  loomResult_t send(int peer, int tag, const void* data, size_t len);
  // Receives exactly `len` bytes from peer with tag; a different length is loomInvalidUsage.
  loomResult_t recv(int peer, int tag, void* data, size_t len);

  // The host:port a peer's bootstrap listens on (names peers in error messages).
  std::string peerAddress(int peer) const;

 private:
  struct Message {
    FrameType type;
    int from;
    int tag;
    std::vector<char> payload;
    int fd;  // for Ring frames: the connection itself
  };

  Bootstrap() = default;
  Deadline deadline() const { return Deadline::afterSeconds(timeoutSec_); }
  // Accepts one connection and reads one frame from it into the unexpected queue.
  loomResult_t acceptOne(const Deadline& deadline);
  loomResult_t writeFrame(int fd, FrameType type, int tag, const void* data, size_t len, const Deadline& d,
                          const char* what);
  loomResult_t readHeader(int fd, const Deadline& d, const char* what, FrameHeader* h);

  int rank_ = 0, nranks_ = 0;
  UniqueIdData id_{};
  double timeoutSec_ = 0;
  const std::atomic<bool>* abort_ = nullptr;
  int listenFd_ = -1, ringSendFd_ = -1, ringRecvFd_ = -1;
  std::vector<PackedAddress> peers_;
  std::deque<Message> unexpected_;
  uint32_t ringSeq_ = 0;
};

}  // namespace loom
