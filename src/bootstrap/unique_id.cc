#include "bootstrap/unique_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/params.h"

namespace loom {

namespace {
constexpr uint32_t kIdMagic = 0x444d4c4c;  // "LLMD"
constexpr uint32_t kIdVersion = 1;

uint32_t checksumOf(const UniqueIdData& id) {
  return static_cast<uint32_t>(hashBytes(&id, offsetof(UniqueIdData, checksum)));
}
}  // namespace

uint64_t hashBytes(const void* data, size_t len, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < len; ++i) {  // FNV-1a
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

PackedAddress PackedAddress::pack(const SocketAddress& a) {
  PackedAddress p{};
  p.family = a.storage.ss_family;
  p.port = static_cast<uint16_t>(a.port());
  if (p.family == AF_INET)
    std::memcpy(p.addr, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, 4);
  else if (p.family == AF_INET6)
    std::memcpy(p.addr, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, 16);
  return p;
}

SocketAddress PackedAddress::unpack() const {
  SocketAddress a{};
  if (family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
    s->sin_family = AF_INET;
    s->sin_port = htons(port);
    std::memcpy(&s->sin_addr, addr, 4);
    a.length = sizeof(sockaddr_in);
  } else if (family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(port);
    std::memcpy(&s->sin6_addr, addr, 16);
    a.length = sizeof(sockaddr_in6);
  }
  return a;
}

loomResult_t makeUniqueId(UniqueIdData* id, int* listenFd, bool jobId) {
  std::memset(id, 0, sizeof(*id));
  id->magic = kIdMagic;
  id->version = kIdVersion;
  *listenFd = -1;
  const std::string& commId = params().COMM_ID;
  SocketAddress addr{};
  if (jobId && !commId.empty()) {
    // Deterministic in this mode, so that every rank can compute the same id without exchanging it.
    LOOM_CHECK(parseHostPort(commId, &addr));
    uint64_t h1 = hashBytes(commId.data(), commId.size());
    uint64_t h2 = hashBytes(commId.data(), commId.size(), h1 ^ 0x9e3779b97f4a7c15ull);
    std::memcpy(id->secret, &h1, 8);
    std::memcpy(id->secret + 8, &h2, 8);
    id->rootInRank0 = 1;
  } else {
    if (getrandom(id->secret, sizeof(id->secret), 0) != static_cast<ssize_t>(sizeof(id->secret)))
      return setError(loomSystemError, "getrandom: %s", strerror(errno));
    std::string iface;
    LOOM_CHECK(findInterfaceAddress(&addr, &iface));
    reinterpret_cast<sockaddr_in*>(&addr.storage)->sin_port = 0;  // same offset for v4 and v6
    LOOM_CHECK(listenSocket(&addr, listenFd));
  }
  id->root = PackedAddress::pack(addr);
  id->checksum = checksumOf(*id);
  return loomSuccess;
}

loomResult_t decodeUniqueId(const loomUniqueId& raw, UniqueIdData* out) {
  std::memcpy(out, raw.internal, sizeof(*out));
  if (out->magic != kIdMagic || out->version != kIdVersion || out->checksum != checksumOf(*out) ||
      (out->root.family != AF_INET && out->root.family != AF_INET6) || out->root.port == 0)
    return setError(loomInvalidArgument,
                    "the unique id is corrupt or not from loomGetUniqueId of this loom version (bad magic, "
                    "version or checksum)");
  return loomSuccess;
}

UniqueIdData combineIds(const std::vector<UniqueIdData>& ids) {
  UniqueIdData c = ids.at(0);
  std::vector<uint8_t> secrets;
  for (const UniqueIdData& id : ids) secrets.insert(secrets.end(), id.secret, id.secret + kSecretBytes);
  const uint64_t h1 = hashBytes(secrets.data(), secrets.size());
  const uint64_t h2 = hashBytes(secrets.data(), secrets.size(), h1 ^ 0x9e3779b97f4a7c15ull);
  std::memcpy(c.secret, &h1, 8);
  std::memcpy(c.secret + 8, &h2, 8);
  c.checksum = checksumOf(c);
  return c;
}

void encodeUniqueId(const UniqueIdData& id, loomUniqueId* raw) {
  std::memset(raw->internal, 0, sizeof(raw->internal));
  std::memcpy(raw->internal, &id, sizeof(id));
}

}  // namespace loom
