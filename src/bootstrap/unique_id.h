// What a loomUniqueId holds: the bootstrap root's address, a random secret that authenticates every
// bootstrap frame, and a checksum so that a corrupted id is refused instead of misused.
#pragma once

#include <cstdint>
#include <vector>

#include "base/socket.h"
#include "loom.h"

namespace loom {

constexpr int kSecretBytes = 16;

// An IPv4/IPv6 address and port in a fixed 20-byte layout (what crosses the wire and sits in the id).
struct PackedAddress {
  uint16_t family;  // AF_INET / AF_INET6
  uint16_t port;    // host byte order
  uint8_t addr[16];
  static PackedAddress pack(const SocketAddress& a);
  SocketAddress unpack() const;
};

struct UniqueIdData {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[kSecretBytes];
  PackedAddress root;
  uint32_t rootInRank0;  // 1: LOOM_COMM_ID mode, rank 0 runs the root inside loomCommInitRank
  uint32_t checksum;     // over every field above
};
static_assert(sizeof(UniqueIdData) <= LOOM_UNIQUE_ID_BYTES, "unique id layout too large");

// Makes a new id: random secret; root address from LOOM_COMM_ID or a fresh listener (returned in
// *listenFd, -1 in LOOM_COMM_ID mode).  `jobId` false: a fresh id even where LOOM_COMM_ID is set (the
// communicators a job makes from its first one, split and shrink, each need their own: the job's id is
// the first one's).
loomResult_t makeUniqueId(UniqueIdData* id, int* listenFd, bool jobId = true);
// Validates magic, version and checksum.
loomResult_t decodeUniqueId(const loomUniqueId& raw, UniqueIdData* out);
void encodeUniqueId(const UniqueIdData& id, loomUniqueId* raw);

uint64_t hashBytes(const void* data, size_t len, uint64_t seed = 0xcbf29ce484222325ull);

// The id of a communicator made from several ids (loomCommInitRankScalable): the first id's fields,
// with a secret made of all their secrets, so that every rank derives the same one from the same ids.
UniqueIdData combineIds(const std::vector<UniqueIdData>& ids);

}  // namespace loom
