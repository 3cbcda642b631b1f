#include "transport/net/hello.h"

#include <mutex>
#include <random>

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

}  // namespace loom
