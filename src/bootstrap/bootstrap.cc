#include "bootstrap/bootstrap.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "bootstrap/incoming_frames.h"
#include "base/log.h"
#include "base/params.h"

namespace loom {

namespace {

constexpr uint32_t kFrameMagic = 0x4c4d4253;  // "LMBS"

// A rank's hello to its root.  With several roots (loomCommInitRankScalable) each serves a block of
// ranks, [first, first + count), and `requests` other roots' first ranks ask it for its block's table;
// with one root the block is every rank and nobody asks.
struct HelloPayload {
  int32_t rank;
  int32_t nranks;
  PackedAddress listen;
  int32_t first;
  int32_t count;
  int32_t requests;
};

bool secretsEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time
  for (int i = 0; i < kSecretBytes; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

BootstrapHeader makeHeader(const UniqueIdData& id, FrameType type, int from, int tag, uint64_t len) {
  BootstrapHeader h{};
  h.magic = kFrameMagic;
  h.type = static_cast<uint16_t>(type);
  std::memcpy(h.secret, id.secret, kSecretBytes);
  h.from = from;
  h.tag = tag;
  h.length = len;
  return h;
}

// A frame on a connected socket: the header under `id`'s secret, then the payload.  `stop` (an abort
// flag, or none) ends it early.
loomResult_t writeFrame(int fd, const UniqueIdData& id, FrameType type, int from, int tag, const void* data,
                        size_t len, const Deadline& d, const std::atomic<bool>* stop, const char* what) {
  const BootstrapHeader h = makeHeader(id, type, from, tag, len);
  LOOM_CHECK(sendAll(fd, &h, sizeof h, d, stop, what));
  if (len > 0) LOOM_CHECK(sendAll(fd, data, len, d, stop, what));
  return loomSuccess;
}

// A Table frame with this tag lists the ranks that never joined, instead of the table.
constexpr int kMissingTag = 1;
// The P2p tag under which a block's first rank hands the whole table to its block (several roots).
constexpr int kTableTag = 4000000;

// An allgather round of at most this many bytes is sent before the receive, from the rank's own thread:
// a fresh loopback or LAN connection takes that much without a reader (socket buffers of 16 KB and more).
constexpr size_t kInlineGatherBytes = 8 << 10;

Deadline earlier(const Deadline& a, double seconds) {
  Deadline b = Deadline::afterSeconds(seconds);
  return a.remainingMs(1 << 30) < b.remainingMs(1 << 30) ? a : b;
}

}  // namespace

bool validateBootstrapHeader(const BootstrapHeader& h, const uint8_t secret[kSecretBytes], int nranks,
                             std::string* why) {
  if (h.magic != kFrameMagic) return *why = "bad magic", false;
  if (!secretsEqual(h.secret, secret)) return *why = "wrong secret (another job, or a stale unique id)", false;
  if (h.type < static_cast<uint16_t>(FrameType::Hello) || h.type > static_cast<uint16_t>(FrameType::TableRequest))
    return *why = "unknown frame type " + std::to_string(h.type), false;
  if (h.from < 0 || (nranks > 0 && h.from >= nranks)) return *why = "sender rank out of range", false;
  if (h.length > kMaxFrameBytes) return *why = "frame length " + std::to_string(h.length) + " above limit", false;
  return true;
}

// ---- root ----

void runBootstrapRoot(int listenFd, UniqueIdData id, double timeoutSec) {
  Deadline deadline = Deadline::afterSeconds(timeoutSec);
  HelloPayload job{};  // the block and the requests to expect, from the first hello; count 0 until then
  int joined = 0, served = 0;
  std::vector<int> fds, waiting;  // the block's ranks; requests that came before the block was complete
  std::vector<PackedAddress> table;
  // Hellos are read from every connected client at once, each with its own deadline (incoming_frames.h),
  // so that a slow or silent client (slowloris) cannot hold up the ranks behind it.
  IncomingFrames incoming("bootstrap root", [&](const BootstrapHeader& h, std::string* why) -> long long {
    if (!validateBootstrapHeader(h, id.secret, 0, why)) return -1;
    if (h.type == static_cast<uint16_t>(FrameType::TableRequest) && h.length == 0) return 0;
    if (h.type != static_cast<uint16_t>(FrameType::Hello) || h.length != sizeof(HelloPayload))
      return *why = "not a hello", -1;
    return static_cast<long long>(sizeof(HelloPayload));
  });
  auto complete = [&] { return job.count > 0 && joined == job.count; };
  auto sendTable = [&](int fd, const char* to) {
    BootstrapHeader h = makeHeader(id, FrameType::Table, 0, 0, table.size() * sizeof(PackedAddress));
    if (sendAll(fd, &h, sizeof(h), deadline, nullptr, "bootstrap root: send table") != loomSuccess ||
        sendAll(fd, table.data(), h.length, deadline, nullptr, "bootstrap root: send table") != loomSuccess)
      LOOM_WARN(kBootstrap, "bootstrap root: could not send the table to %s", to);
  };
  while (!complete() || served < job.requests) {
    IncomingFrames::Frame f;
    const loomResult_t r = incoming.next(listenFd, deadline, nullptr, &f);
    if (r == loomTimeout) {
      LOOM_WARN(kBootstrap, "bootstrap root: %d of %d ranks joined and %d of %d other roots' ranks asked for "
                "the table within LOOM_TIMEOUT; giving up", joined, job.count, served, job.requests);
      break;
    }
    if (r != loomSuccess) break;
    if (f.header.type == static_cast<uint16_t>(FrameType::TableRequest)) {
      if (!complete()) {
        waiting.push_back(f.fd);
        continue;
      }
      sendTable(f.fd, "another root's rank");
      close(f.fd);
      ++served;
      continue;
    }
    HelloPayload hello{};
    std::memcpy(&hello, f.payload.data(), sizeof hello);
    const char* bad = nullptr;
    if (hello.nranks < 1 || hello.first < 0 || hello.count < 1 || hello.first > hello.nranks - hello.count ||
        hello.rank < hello.first || hello.rank >= hello.first + hello.count || hello.requests < 0)
      bad = "rank, size or block out of range";
    else if (job.count > 0 && (hello.nranks != job.nranks || hello.first != job.first || hello.count != job.count ||
                               hello.requests != job.requests))
      bad = "another job size or block";
    else if (job.count > 0 && fds[hello.rank - job.first] >= 0)
      bad = "that rank already joined";
    if (bad != nullptr) {
      LOOM_WARN(kBootstrap, "bootstrap root: dropped a connection that is not a valid hello (%s)", bad);
      close(f.fd);
      continue;
    }
    if (job.count == 0) {
      job = hello;
      fds.assign(job.count, -1);
      table.assign(job.count, PackedAddress{});
    }
    fds[hello.rank - job.first] = f.fd;
    table[hello.rank - job.first] = hello.listen;
    if (++joined < job.count) continue;
    for (int k = 0; k < job.count; ++k) sendTable(fds[k], ("rank " + std::to_string(job.first + k)).c_str());
    for (int fd : waiting) {
      sendTable(fd, "another root's rank");
      close(fd);
      ++served;
    }
    waiting.clear();
  }
  if (job.count > 0 && joined < job.count) {
    // Tell the ranks that did join which ones never came, so that each can name them (tag kMissingTag).
    std::vector<int32_t> missing;
    for (int k = 0; k < job.count; ++k)
      if (fds[k] < 0) missing.push_back(job.first + k);
    const Deadline d = Deadline::afterSeconds(1.0);
    for (int fd : fds) {
      if (fd < 0) continue;
      BootstrapHeader h = makeHeader(id, FrameType::Table, 0, kMissingTag, missing.size() * sizeof(int32_t));
      if (sendAll(fd, &h, sizeof(h), d, nullptr, "bootstrap root: report missing ranks") == loomSuccess)
        sendAll(fd, missing.data(), h.length, d, nullptr, "bootstrap root: report missing ranks");
    }
  }
  for (int& fd : fds) closeSocket(&fd);
  for (int& fd : waiting) closeSocket(&fd);  // they read the end of the connection: no table
  close(listenFd);
}

// ---- rank side ----

namespace {

// The root went away or stayed silent before sending the table.  Under LOOM_COMM_ID the root runs in
// rank 0; with loomGetUniqueId, in the process that made the id (usually rank 0's).
loomResult_t explainRootSilence(loomResult_t r, int rank, const SocketAddress& root) {
  const std::string detail = lastErrorDetail();
  const std::string who = params().COMM_ID.empty()
                              ? "the bootstrap root at " + root.toString() + " (in the process that called loomGetUniqueId)"
                              : "rank 0, the bootstrap root at " + root.toString() + " (LOOM_COMM_ID),";
  r = setError(r, "rank %d: %s stopped before sending the table of ranks (%s)", rank, who.c_str(), detail.c_str());
  if (!params().COMM_ID.empty()) setLastErrorPeer(0);
  return r;
}

}  // namespace

loomResult_t Bootstrap::create(const UniqueIdData& id, const std::vector<UniqueIdData>& roots, int rank, int nranks,
                               double timeoutSec, const std::atomic<bool>* abort, std::unique_ptr<Bootstrap>* out) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->id_ = id;
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->timeoutSec_ = timeoutSec;
  b->abort_ = abort;
  // What may arrive at our listener: point-to-point messages, allgather rounds, failure notices and
  // liveness pings of this job; anything else is dropped (a port scanner, an old job) and logged.
  b->incoming_ = std::make_unique<IncomingFrames>("rank " + std::to_string(rank), [b = b.get()](
      const BootstrapHeader& h, std::string* why) -> long long {
    if (!validateBootstrapHeader(h, b->id_.secret, b->nranks_, why)) return -1;
    switch (static_cast<FrameType>(h.type)) {
      case FrameType::Ping: return 0;
      case FrameType::P2p:
      case FrameType::Gather:
      case FrameType::Failure: return static_cast<long long>(h.length);
      default: return *why = "unexpected frame type " + std::to_string(h.type), -1;
    }
  });

  // Our listener, on the interface that reaches the root's network (same selection rules).
  SocketAddress me{};
  std::string iface;
  LOOM_CHECK(findInterfaceAddress(&me, &iface));
  reinterpret_cast<sockaddr_in*>(&me.storage)->sin_port = 0;
  LOOM_CHECK(listenSocket(&me, &b->listenFd_));

  if (roots.size() < 2) {
    LOOM_CHECK(b->joinRoot(id, 0, nranks, 0, me, &b->peers_));
  } else {
    // Several roots (loomCommInitRankScalable): root k serves the k-th of nroots blocks of ranks.  Each
    // block's first rank fetches the other blocks' tables from their roots and hands the whole table to
    // the rest of its block, so that no root meets more than its block and the other blocks' first ranks.
    const int nroots = static_cast<int>(roots.size());
    auto blockStart = [&](int k) { return static_cast<int>(static_cast<int64_t>(k) * nranks / nroots); };
    int k = 0;
    while (rank >= blockStart(k + 1)) ++k;
    const int first = blockStart(k), count = blockStart(k + 1) - first;
    std::vector<PackedAddress> block;
    LOOM_CHECK(b->joinRoot(roots[k], first, count, nroots - 1, me, &block));
    b->peers_.assign(nranks, PackedAddress{});
    std::copy(block.begin(), block.end(), b->peers_.begin() + first);
    const size_t tableBytes = b->peers_.size() * sizeof(PackedAddress);
    if (rank == first) {
      for (int j = 0; j < nroots; ++j) {
        if (j == k) continue;
        LOOM_CHECK(b->fetchTable(roots[j], blockStart(j + 1) - blockStart(j), &block));
        std::copy(block.begin(), block.end(), b->peers_.begin() + blockStart(j));
      }
      for (int m = first + 1; m < first + count; ++m) LOOM_CHECK(b->send(m, kTableTag, b->peers_.data(), tableBytes));
    } else {
      LOOM_CHECK(b->recv(first, kTableTag, b->peers_.data(), tableBytes));
    }
  }
  LOOM_INFO(kBootstrap, "rank %d/%d listens on %s (%s), %zu root(s)", rank, nranks, me.toString().c_str(),
            iface.c_str(), std::max<size_t>(1, roots.size()));
  *out = std::move(b);
  return loomSuccess;
}

loomResult_t Bootstrap::joinRoot(const UniqueIdData& root, int first, int count, int requests, const SocketAddress& me,
                                 std::vector<PackedAddress>* table) {
  const Deadline d = deadline();
  const SocketAddress at = root.root.unpack();
  int fd = -1;
  loomResult_t r = connectSocket(at, d, abort_, &fd);
  if (r != loomSuccess) {
    const std::string detail = lastErrorDetail();
    r = setError(r, "rank %d could not reach %s at %s: %s", rank_,
                 params().COMM_ID.empty() ? "the bootstrap root" : "rank 0, the bootstrap root (LOOM_COMM_ID),",
                 at.toString().c_str(), detail.c_str());
    if (!params().COMM_ID.empty()) setLastErrorPeer(0);
    return r;
  }
  const HelloPayload hello{rank_, nranks_, PackedAddress::pack(me), first, count, requests};
  r = writeFrame(fd, root, FrameType::Hello, rank_, 0, &hello, sizeof hello, d, abort_, "bootstrap: hello to root");
  // A root that dies between our connect and our hello breaks the pipe: the same loss as its silence after it.
  if (r != loomSuccess) r = explainRootSilence(r, rank_, at);
  if (r == loomSuccess) r = readTable(fd, root, count, table);
  closeSocket(&fd);
  return r;
}

loomResult_t Bootstrap::fetchTable(const UniqueIdData& root, int count, std::vector<PackedAddress>* table) {
  const Deadline d = deadline();
  int fd = -1;
  loomResult_t r = connectSocket(root.root.unpack(), d, abort_, &fd);
  if (r != loomSuccess)
    return setError(r, "rank %d could not reach another bootstrap root at %s: %s", rank_,
                    root.root.unpack().toString().c_str(), std::string(lastErrorDetail()).c_str());
  r = writeFrame(fd, root, FrameType::TableRequest, rank_, 0, nullptr, 0, d, abort_, "bootstrap: table request");
  if (r == loomSuccess) r = readTable(fd, root, count, table);
  closeSocket(&fd);
  return r;
}

loomResult_t Bootstrap::readTable(int fd, const UniqueIdData& root, int count, std::vector<PackedAddress>* table) {
  const SocketAddress at = root.root.unpack();
  BootstrapHeader h{};
  // The root gives up after its own LOOM_TIMEOUT and then says which ranks never came: wait a little
  // longer than that to hear it.
  const Deadline tableDeadline = Deadline::afterSeconds(timeoutSec_ + 2);
  loomResult_t r = recvAll(fd, &h, sizeof h, tableDeadline, abort_, "bootstrap: waiting for the root's table");
  std::string why;
  if (r == loomSuccess && !validateBootstrapHeader(h, root.secret, 0, &why))
    r = setError(loomRemoteError, "bootstrap: the root's answer is invalid (%s)", why.c_str());
  if (r != loomSuccess) return explainRootSilence(r, rank_, at);
  if (h.type == static_cast<uint16_t>(FrameType::Table) && h.tag == kMissingTag && h.length % sizeof(int32_t) == 0 &&
      h.length <= static_cast<uint64_t>(count) * sizeof(int32_t)) {
    std::vector<int32_t> missing(h.length / sizeof(int32_t));
    std::string names;
    if (recvAll(fd, missing.data(), h.length, tableDeadline, abort_, "bootstrap: read missing ranks") == loomSuccess)
      for (int32_t m : missing) names += (names.empty() ? "rank " : ", rank ") + std::to_string(m);
    return setError(loomTimeout, "bootstrap: %s never joined within LOOM_TIMEOUT (the root at %s waited for %s)",
                    names.empty() ? "some rank" : names.c_str(), at.toString().c_str(),
                    missing.size() == 1 ? "it" : "them");
  }
  if (h.type != static_cast<uint16_t>(FrameType::Table) ||
      h.length != static_cast<uint64_t>(count) * sizeof(PackedAddress))
    return setError(loomInvalidUsage, "bootstrap: the root answered with a table of %llu bytes for %d ranks; do all "
                    "ranks pass the same nranks?", static_cast<unsigned long long>(h.length), count);
  table->resize(static_cast<size_t>(count));
  return recvAll(fd, table->data(), h.length, deadline(), abort_, "bootstrap: read table");
}

Bootstrap::~Bootstrap() {
  closeSocket(&listenFd_);
}

std::string Bootstrap::peerAddress(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(peers_.size())) return "?";
  return peers_[peer].unpack().toString();
}

loomResult_t Bootstrap::acceptOne(const Deadline& d) {
  for (;;) {
    IncomingFrames::Frame f;
    const loomResult_t r = incoming_->next(listenFd_, d, abort_, &f);
    if (r == loomTimeout)
      return setError(loomTimeout, "bootstrap: rank %d waited LOOM_TIMEOUT for a peer to connect", rank_);
    LOOM_CHECK(r);
    const FrameType type = static_cast<FrameType>(f.header.type);
    if (type == FrameType::Ping) {  // a liveness check (peerAlive): nothing to keep
      close(f.fd);
      continue;
    }
    close(f.fd);
    unexpected_.push_back(Message{type, f.header.from, f.header.tag, std::move(f.payload)});
    return loomSuccess;
  }
}

loomResult_t Bootstrap::send(int peer, int tag, const void* data, size_t len) {
  return sendFrame(FrameType::P2p, peer, tag, data, len, abort_);
}

loomResult_t Bootstrap::recv(int peer, int tag, void* data, size_t len, bool despiteFailures) {
  std::vector<char> payload;
  LOOM_CHECK(receive(FrameType::P2p, peer, tag, &payload, despiteFailures));
  if (payload.size() != len)
    return setError(loomInvalidUsage, "bootstrap: rank %d expected %zu bytes from rank %d (tag %d), got %zu", rank_,
                    len, peer, tag, payload.size());
  if (len > 0) std::memcpy(data, payload.data(), len);
  return loomSuccess;
}

loomResult_t Bootstrap::sendFrame(FrameType type, int peer, int tag, const void* data, size_t len,
                                  const std::atomic<bool>* stop) {
  Deadline d = deadline();
  int fd = -1;
  // The peer has listened since before the table existed: refused means it is gone (no retrying).
  loomResult_t r = connectSocket(peers_[peer].unpack(), d, stop, &fd, /*retryRefused=*/false);
  if (r != loomSuccess) {
    r = setError(r, "bootstrap: rank %d cannot reach rank %d at %s: %s", rank_, peer, peerAddress(peer).c_str(),
                 std::string(lastErrorDetail()).c_str());
    setLastErrorPeer(peer);
    return r;
  }
  r = writeFrame(fd, id_, type, rank_, tag, data, len, d, stop, "bootstrap: send");
  closeSocket(&fd);
  return r;
}

loomResult_t Bootstrap::receive(FrameType type, int peer, int tag, std::vector<char>* payload, bool despiteFailures) {
  Deadline d = deadline();
  for (;;) {
    for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
      if (it->type != type || it->from != peer || it->tag != tag) continue;
      *payload = std::move(it->payload);
      unexpected_.erase(it);
      return loomSuccess;
    }
    int culprit = -1, from = -1;
    const size_t queued = unexpected_.size();
    const bool failed = failureAnnounced(&culprit, &from);  // also takes in whatever is pending
    if ((!failed || despiteFailures) && unexpected_.size() != queued) continue;  // maybe the awaited message
    if (failed && !despiteFailures) {
      loomResult_t r = setError(loomRemoteError, "bootstrap: rank %d announced that rank %d failed while rank %d "
                                "waited for a message from rank %d", from, culprit, rank_, peer);
      setLastErrorPeer(from);
      return r;
    }
    // In slices, to look between them whether the peer is still there at all (a slice ending is not news):
    // 0.2 s, so that a rank that dies while its peers connect to it is known within ~0.2 s (it was 1 s).
    loomResult_t r;
    {
      QuietErrors quiet;
      r = acceptOne(earlier(d, 0.2));
    }
    if (r == loomTimeout && !d.expired()) {
      if (peerAlive(peer)) continue;
      r = setError(loomRemoteError, "bootstrap: rank %d was waiting for a message from rank %d (%s), which is gone",
                   rank_, peer, peerAddress(peer).c_str());
      setLastErrorPeer(peer);
      return r;
    }
    if (r == loomTimeout) {
      r = setError(loomTimeout, "bootstrap: rank %d waited LOOM_TIMEOUT for a message from rank %d (%s)", rank_, peer,
                   peerAddress(peer).c_str());
      setLastErrorPeer(peer);
      return r;
    }
    LOOM_CHECK(r);
  }
}

loomResult_t Bootstrap::allGather(void* data, size_t bytesPerRank) {
  char* base = static_cast<char*>(data);
  auto pack = [&](int first, int count, std::vector<char>* out) {
    out->clear();
    for (int k = 0; k < count; ++k) {
      const char* slot = base + static_cast<size_t>((first + k) % nranks_) * bytesPerRank;
      out->insert(out->end(), slot, slot + bytesPerRank);
    }
  };
  auto unpack = [&](const std::vector<char>& in, int first, int count) -> loomResult_t {
    if (in.size() != static_cast<size_t>(count) * bytesPerRank)
      return setError(loomInvalidUsage, "bootstrap: rank %d expected %zu bytes of allgather from rank %d, got %zu; "
                      "do all ranks call the same collective?", rank_, count * bytesPerRank, first, in.size());
    for (int k = 0; k < count; ++k)
      std::memcpy(base + static_cast<size_t>((first + k) % nranks_) * bytesPerRank, in.data() + k * bytesPerRank,
                  bytesPerRank);
    return loomSuccess;
  };
  return gatherRounds(pack, unpack);
}

loomResult_t Bootstrap::allGatherV(const std::string& mine, std::vector<std::string>* all) {
  all->assign(static_cast<size_t>(nranks_), std::string());
  (*all)[static_cast<size_t>(rank_)] = mine;
  // Each slot goes as its length (8 bytes) and its bytes.
  auto pack = [&](int first, int count, std::vector<char>* out) {
    out->clear();
    for (int k = 0; k < count; ++k) {
      const std::string& slot = (*all)[static_cast<size_t>((first + k) % nranks_)];
      const uint64_t len = slot.size();
      out->insert(out->end(), reinterpret_cast<const char*>(&len), reinterpret_cast<const char*>(&len) + sizeof len);
      out->insert(out->end(), slot.begin(), slot.end());
    }
  };
  auto unpack = [&](const std::vector<char>& in, int first, int count) -> loomResult_t {
    size_t at = 0;
    for (int k = 0; k < count; ++k) {
      uint64_t len = 0;
      if (in.size() - at >= sizeof len) std::memcpy(&len, in.data() + at, sizeof len);
      if (in.size() - at < sizeof len || in.size() - at - sizeof len < len)
        return setError(loomInvalidUsage, "bootstrap: rank %d got a malformed allgather from rank %d; do all ranks "
                        "call the same collective?", rank_, first);
      at += sizeof len;
      (*all)[static_cast<size_t>((first + k) % nranks_)].assign(in.data() + at, len);
      at += len;
    }
    if (at == in.size()) return loomSuccess;
    return setError(loomInvalidUsage, "bootstrap: rank %d got %zu bytes too many in an allgather from rank %d", rank_,
                    in.size() - at, first);
  };
  return gatherRounds(pack, unpack);
}

loomResult_t Bootstrap::gatherRounds(const PackSlots& pack, const UnpackSlots& unpack) {
  if (nranks_ == 1) return loomSuccess;
  int lost = -1;
  const loomResult_t r = logAllGather(pack, unpack, &lost);
  return r == loomSuccess || lost < 0 ? r : blameAndAnnounce(r, lost);
}

bool Bootstrap::failureAnnounced(int* culprit, int* from) {
  QuietErrors quiet;
  const std::string keep = lastError();
  // New connections, and those whose first frame is still arriving: take what is there, never wait
  // (this runs between the sleeps of every blocked call).
  pollfd p{listenFd_, POLLIN, 0};
  while ((::poll(&p, 1, 0) > 0 || incoming_->pendingCount() > 0) && acceptOne(Deadline::afterSeconds(0)) == loomSuccess) {
  }
  restoreLastError(keep);
  for (const Message& m : unexpected_) {
    const int named = announcedCulprit(m);
    if (named < 0) continue;
    *culprit = named;
    *from = m.from;
    return true;
  }
  return false;
}

int Bootstrap::announcedCulprit(const Message& m) const {
  int32_t named = -1;
  if (m.type != FrameType::Failure || m.payload.size() != sizeof named) return -1;
  std::memcpy(&named, m.payload.data(), sizeof named);
  return named >= 0 && named < nranks_ && named != rank_ ? named : -1;
}

bool Bootstrap::peerAlive(int peer) {
  // Its listener lives as long as its communicator: a refused connection means the rank is gone.  A
  // Ping frame says why we knocked (dropped silently there); anything slow or odd counts as alive.
  // Gone only when refused twice, 20 ms apart: one refusal is not proof enough to fail a communicator.
  // (100 ms apart made every death across hosts known 0.1 s later than it needs to be.)
  QuietErrors quiet;
  const std::string keep = lastError();
  loomResult_t r = loomSuccess;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (attempt > 0) usleep(20 * 1000);
    const Deadline d = Deadline::afterSeconds(0.2);
    int fd = -1;
    r = connectSocket(peers_[peer].unpack(), d, nullptr, &fd, /*retryRefused=*/false);
    if (r == loomSuccess) {
      writeFrame(fd, id_, FrameType::Ping, rank_, 0, nullptr, 0, d, abort_, "bootstrap: ping");
      closeSocket(&fd);
    }
    if (r != loomRemoteError) break;
  }
  restoreLastError(keep);
  return r != loomRemoteError;
}

int Bootstrap::blame(int lost) {
  // A peer that stopped because of an earlier failure sent its notice before closing its connections,
  // so the notice is already queued at our listener, or a network round trip away: take what arrives
  // within 5 ms in all.  (A wait of 20 ms per notice here delayed this rank's own announcement, and so
  // every other survivor, by 20-40 ms.)
  const std::string keep = lastError();
  QuietErrors quiet;
  const Deadline drain = Deadline::afterSeconds(0.005);
  while (acceptOne(drain) == loomSuccess) {
  }
  // What `lost` announced wins; else what anyone announced (the failure is the same one); else `lost`.
  int fromLost = -1, fromAnyone = -1;
  for (const Message& m : unexpected_) {
    const int named = announcedCulprit(m);
    if (named >= 0 && m.from == lost && fromLost < 0) fromLost = named;
    if (named >= 0 && fromAnyone < 0) fromAnyone = named;
  }
  restoreLastError(keep);  // the drain records its own timeout
  return fromLost >= 0 ? fromLost : fromAnyone >= 0 ? fromAnyone : lost;
}

void Bootstrap::announceFailure(int culprit, bool everyone) {
  const std::string keep = lastError();
  QuietErrors quiet;
  const int32_t notice = culprit;
  const Deadline total = Deadline::afterSeconds(1.0);
  std::vector<int> to;
  if (everyone) {
    for (int p = 0; p < nranks_; ++p) to.push_back(p);
  } else {
    to = {(rank_ + 1) % nranks_, (rank_ + nranks_ - 1) % nranks_};
  }
  for (int peer : to) {
    if (peer == culprit || peer == rank_ || total.expired()) continue;
    const Deadline d = earlier(total, 0.1);
    int fd = -1;
    if (connectSocket(peers_[peer].unpack(), d, nullptr, &fd, /*retryRefused=*/false) != loomSuccess) continue;  // gone too
    writeFrame(fd, id_, FrameType::Failure, rank_, 0, &notice, sizeof notice, d, nullptr, "bootstrap: failure notice");
    closeSocket(&fd);
  }
  restoreLastError(keep);
}

loomResult_t Bootstrap::blameAndAnnounce(loomResult_t r, int lost) {
  const std::string detail = lastErrorDetail();
  const int culprit = blame(lost);
  announceFailure(culprit, /*everyone=*/true);
  if (culprit == lost) return r;
  return setError(r, "bootstrap: rank %d (%s) failed or died; rank %d left the ring after noticing it (%s)", culprit,
                  peerAddress(culprit).c_str(), lost, detail.c_str());
}

// Bruck's allgather: before the round of distance d (1, 2, 4, ...), rank r holds the slots of ranks r,
// r+1, ..., r+d-1 (mod n); it sends the first min(d, n-d) of them to rank r-d and receives as many from
// rank r+d, which holds r+d onwards.  ceil(log2 n) rounds where a ring takes n-1: with many ranks per
// core each round costs every rank a turn on a core, and init makes four allgathers (256 processes on
// 2 cores: the ring's took 0.6-1.8 s each).  Every rank still sends and receives n-1 slots in all.
loomResult_t Bootstrap::logAllGather(const PackSlots& pack, const UnpackSlots& unpack, int* lost) {
  const int n = nranks_;
  const uint32_t call = gatherSeq_++;
  std::vector<char> out, in;
  for (int d = 1, round = 0; d < n; d *= 2, ++round) {
    const int count = std::min(d, n - d);
    const int to = (rank_ - d + n) % n, from = (rank_ + d) % n;
    const int tag = static_cast<int>(((call << 5) | static_cast<uint32_t>(round)) & 0x7fffffffu);
    pack(rank_, count, &out);
    // Every rank sends before it receives: a message larger than what a fresh connection's buffers take
    // goes from a thread of its own, or every rank of a cycle would wait in its send for a receiver
    // that waits in its own send.  The thread stops once the receive failed (or the communicator was
    // aborted, which ends the receive); its failure's message is its own thread's, so it is passed back.
    loomResult_t sent = loomSuccess, got = loomSuccess;
    std::string sendWhy;
    std::atomic<bool> giveUp{false};
    auto sendRound = [&](const std::atomic<bool>* stop) {
      sent = sendFrame(FrameType::Gather, to, tag, out.data(), out.size(), stop);
      if (sent != loomSuccess) sendWhy = lastErrorDetail();
    };
    if (out.size() <= kInlineGatherBytes) {
      sendRound(abort_);
      if (sent == loomSuccess) got = receive(FrameType::Gather, from, tag, &in, false);
    } else {
      std::thread sender(sendRound, &giveUp);
      got = receive(FrameType::Gather, from, tag, &in, false);
      if (got != loomSuccess) giveUp.store(true);
      sender.join();
    }
    if (got != loomSuccess) return *lost = from, got;
    if (sent != loomSuccess) return *lost = to, setError(sent, "%s", sendWhy.c_str());
    LOOM_CHECK(unpack(in, from, count));
  }
  return loomSuccess;
}

loomResult_t Bootstrap::barrier() {
  std::vector<char> dummy(nranks_);
  return allGather(dummy.data(), 1);
}

}  // namespace loom
