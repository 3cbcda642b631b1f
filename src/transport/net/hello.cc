#include "transport/net/hello.h"

#include <cstring>
#include <mutex>
#include <random>

#include "base/log.h"

namespace loom {

uint64_t randomNetToken() {
  static std::mutex mu;
  static std::mt19937_64 gen(std::random_device{}());
  std::lock_guard<std::mutex> g(mu);
  return gen();
}

NetHello makeNetHello(uint32_t magic, const ConnectRequest& req, uint64_t token, int32_t index, int32_t count) {
  return NetHello{magic, req.self, req.peer, req.channel, req.commKey, token, index, count};
}

bool netHelloMatches(const NetHello& h, uint32_t magic, const ConnectRequest& req, uint64_t token, int32_t count) {
  return h.magic == magic && h.token == token && h.commKey == req.commKey && h.from == req.peer &&
         h.to == req.self && h.channel == req.channel && h.count == count && h.index >= 0 && h.index < count;
}

void publishNetListenInfo(uint32_t magic, const SocketAddress& addr, int32_t count, ConnectInfo* info,
                          NetListenInfo* published) {
  NetListenInfo li{};
  li.magic = magic;
  li.addrLength = addr.length;
  li.token = randomNetToken();
  li.count = count;
  std::memcpy(&li.addr, &addr.storage, sizeof li.addr);
  std::memcpy(info->bytes, &li, sizeof li);
  *published = li;
}

loomResult_t listenAndPublish(uint32_t magic, int32_t count, ConnectInfo* info, NetListenInfo* published,
                              int* listenFd) {
  SocketAddress addr;
  std::string iface;
  LOOM_CHECK(findInterfaceAddress(&addr, &iface));
  LOOM_CHECK(listenSocket(&addr, listenFd));
  publishNetListenInfo(magic, addr, count, info, published);
  LOOM_TRACE(kNet, "listening for a peer on %s (%s)", addr.toString().c_str(), iface.c_str());
  return loomSuccess;
}

loomResult_t readNetListenInfo(const ConnectInfo& info, uint32_t magic, int32_t maxCount, const char* name, int peer,
                               NetListenInfo* out, SocketAddress* addr) {
  std::memcpy(out, info.bytes, sizeof *out);
  if (out->magic != magic || out->addrLength > sizeof out->addr || out->count < 1 || out->count > maxCount)
    return setError(loomRemoteError, "%s: rank %d sent a malformed connection description", name, peer);
  *addr = SocketAddress{};
  std::memcpy(&addr->storage, &out->addr, sizeof out->addr);
  addr->length = out->addrLength;
  return loomSuccess;
}

}  // namespace loom
