// Bootstrap: how ranks find each other before any data transport exists.
//
//   1. Every rank opens a listener and sends (rank, nranks, listener address) to the root, whose address
//      is in the unique id; the root answers each rank with the table of all listeners.
//   2. send/recv(peer, tag) carry small point-to-point messages (transport connection setup), each over
//      a short-lived connection; messages that arrive before they are asked for are kept.
//   3. allGather/barrier exchange in ceil(log2 n) rounds of such messages (Bruck's algorithm).  A rank
//      that finds a peer gone tells every rank which rank failed before it gives up (each survivor then
//      names the rank that died, not a rank that gave up after it).
// Every frame carries the communicator secret and a bounded length; anything else is dropped and logged.
// Every wait is bounded by the deadline the communicator gives (LOOM_TIMEOUT) and by its abort flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "bootstrap/unique_id.h"

namespace loom {
class IncomingFrames;

// Failure: "I am giving up because rank X failed", sent by a rank that lost a peer, so that a failure
// that spreads from rank to rank is reported as X's.  Gather: one round of allGather.
// Ping: a liveness check (peerAlive), dropped on arrival.  TableRequest: another root's rank asks a root
// for its block's table (several roots).  (3 was a ring connection's hello.)
enum class FrameType : uint16_t { Hello = 1, Table = 2, P2p = 4, Gather = 5, Failure = 6, Ping = 7, TableRequest = 8 };

struct BootstrapHeader {
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
bool validateBootstrapHeader(const BootstrapHeader& h, const uint8_t secret[kSecretBytes], int nranks,
                             std::string* why);

// Runs the root side of step 1 on an open listener; returns when every rank got its table, or on failure
// or deadline.  Called on a detached thread by loomGetUniqueId (or by rank 0 in LOOM_COMM_ID mode).
void runBootstrapRoot(int listenFd, UniqueIdData id, double timeoutSec);

class Bootstrap {
 public:
  // `id` authenticates the ranks' frames; its root is met unless `roots` holds two or more ids
  // (loomCommInitRankScalable), whose roots each meet a block of the ranks (id's secret then combines
  // theirs: combineIds).
  static loomResult_t create(const UniqueIdData& id, const std::vector<UniqueIdData>& roots, int rank, int nranks,
                             double timeoutSec, const std::atomic<bool>* abort, std::unique_ptr<Bootstrap>* out);
  static loomResult_t create(const UniqueIdData& id, int rank, int nranks, double timeoutSec,
                             const std::atomic<bool>* abort, std::unique_ptr<Bootstrap>* out) {
    return create(id, {}, rank, nranks, timeoutSec, abort, out);
  }
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // data holds nranks slots of bytesPerRank; this rank's slot is filled in, the others get filled.
  loomResult_t allGather(void* data, size_t bytesPerRank);
  // Each rank contributes `mine`, of any length (none too); *all gets every rank's, in rank order.  A
  // round carries only what its ranks contributed (allGather pads every slot to one size).
  loomResult_t allGatherV(const std::string& mine, std::vector<std::string>* all);
  loomResult_t barrier();
  loomResult_t send(int peer, int tag, const void* data, size_t len);
  // Receives exactly `len` bytes from peer with tag; a different length is loomInvalidUsage.  A failure
  // notice from any rank ends the wait (loomRemoteError), unless `despiteFailures` (the survivors of a
  // failure talking among themselves: loomCommShrink), where only this peer's absence does.
  loomResult_t recv(int peer, int tag, void* data, size_t len, bool despiteFailures = false);
  // The abort flag the waits watch (the communicator's; null: none).  A shrink stops watching its
  // aborted communicator's flag while the survivors talk through this bootstrap.
  void watchAbort(const std::atomic<bool>* abort) { abort_ = abort; }

  // Failure notices (FrameType::Failure), so that a failure spreading from rank to rank is reported as
  // the first one.  blame(lost): the rank that `lost` announced as failed before it let go of its
  // connections, else `lost` itself.  announceFailure(culprit): tells its two neighbours in rank order,
  // or every rank, that `culprit` failed; best effort, a second at most.
  int blame(int lost);
  // Whether some rank announced a failure (looks at the listener without waiting): *culprit is the rank
  // it named, *from the announcer.
  bool failureAnnounced(int* culprit, int* from);
  // Whether `peer` still listens (its process and communicator exist); false only on a refused connection.
  bool peerAlive(int peer);
  void announceFailure(int culprit, bool everyone);

  // The host:port a peer's bootstrap listens on (names peers in error messages).
  std::string peerAddress(int peer) const;

 private:
  struct Message {
    FrameType type;
    int from;
    int tag;
    std::vector<char> payload;
  };

  Bootstrap() = default;
  Deadline deadline() const { return Deadline::afterSeconds(timeoutSec_); }
  // The rank a Failure notice names, or -1 when `m` is not a valid notice.
  int announcedCulprit(const Message& m) const;
  // An allgather's rounds over slots it knows how to pack: pack(first, count) puts the slots of ranks
  // first .. first+count-1 (mod n) in a message, unpack(message, first, count) takes them out.
  using PackSlots = std::function<void(int first, int count, std::vector<char>* out)>;
  using UnpackSlots = std::function<loomResult_t(const std::vector<char>& in, int first, int count)>;
  loomResult_t gatherRounds(const PackSlots& pack, const UnpackSlots& unpack);
  // The exchange itself; *lost is the peer that failed, timed out or announced a failure (else -1).
  loomResult_t logAllGather(const PackSlots& pack, const UnpackSlots& unpack, int* lost);
  // A frame of `type` to `peer` over a connection of its own; and the wait for one from `peer`.
  // `stop` ends the send early (the communicator's abort flag, or the allgather's own).
  loomResult_t sendFrame(FrameType type, int peer, int tag, const void* data, size_t len,
                         const std::atomic<bool>* stop);
  loomResult_t receive(FrameType type, int peer, int tag, std::vector<char>* payload, bool despiteFailures);
  // After losing `lost`: blames the rank that `lost` said failed (if it gave up because of an earlier
  // failure) or `lost` itself, tells every rank, and returns `r` with the message naming the rank to
  // blame.
  loomResult_t blameAndAnnounce(loomResult_t r, int lost);
  // Says hello to `root` as a rank of the block [first, first + count) and reads the block's table.
  loomResult_t joinRoot(const UniqueIdData& root, int first, int count, int requests, const SocketAddress& me,
                        std::vector<PackedAddress>* table);
  // Asks another block's root for its table of `count` ranks.
  loomResult_t fetchTable(const UniqueIdData& root, int count, std::vector<PackedAddress>* table);
  loomResult_t readTable(int fd, const UniqueIdData& root, int count, std::vector<PackedAddress>* table);
  // Accepts one connection and reads one frame from it into the unexpected queue.
  loomResult_t acceptOne(const Deadline& deadline);

  int rank_ = 0, nranks_ = 0;
  UniqueIdData id_{};
  double timeoutSec_ = 0;
  const std::atomic<bool>* abort_ = nullptr;
  int listenFd_ = -1;
  std::vector<PackedAddress> peers_;
  std::deque<Message> unexpected_;
  std::unique_ptr<IncomingFrames> incoming_;  // connections to our listener whose first frame is arriving
  uint32_t gatherSeq_ = 0;  // allGather calls so far: each call's rounds have tags of their own
};

}  // namespace loom
