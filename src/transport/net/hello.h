// The first bytes on every network connection: who connects, for which communicator and queue, with the
// random token the receiving side published through the bootstrap.  A receiver drops any connection
// whose hello does not match (a stray or hostile client, or a rank of another communicator).
#pragma once

#include <cstdint>

#include "base/socket.h"
#include "transport/transport.h"

namespace loom {

struct NetHello {
  uint32_t magic;
  int32_t from, to, channel;
  uint64_t commKey, token;
  int32_t index, count;  // which of the connection's streams this is (LOOM_NSOCKS), of how many
};

// What a receiving side publishes through the bootstrap (inside ConnectInfo): where it accepts its peer's
// connection, the token the peer must present, and how many streams the connection has.
struct NetListenInfo {
  uint32_t magic;
  uint32_t addrLength;
  uint64_t token;  // fresh and random for every connection
  int32_t count;
  int32_t reserved;
  sockaddr_storage addr;
};
static_assert(sizeof(NetListenInfo) <= sizeof(ConnectInfo), "listen info must fit a ConnectInfo");

void publishNetListenInfo(uint32_t magic, const SocketAddress& addr, int32_t count, ConnectInfo* info,
                          NetListenInfo* published);
// Opens a TCP listener on the bootstrap's interface and publishes it (socket and ib exchange connections).
loomResult_t listenAndPublish(uint32_t magic, int32_t count, ConnectInfo* info, NetListenInfo* published,
                              int* listenFd);
// Reads the listen info rank `peer` published for transport `name`: loomRemoteError when it is malformed
// (wrong magic, address size or stream count).
loomResult_t readNetListenInfo(const ConnectInfo& info, uint32_t magic, int32_t maxCount, const char* name, int peer,
                               NetListenInfo* out, SocketAddress* addr);

// Unpredictable per connection (not derived from anything a peer could see).
uint64_t randomNetToken();
// The sender's hello for stream `index` of `count`; `req` is the sender's request.
NetHello makeNetHello(uint32_t magic, const ConnectRequest& req, uint64_t token, int32_t index, int32_t count);
// Whether `h` comes from the peer of the receiver's request `req` with the published token.
bool netHelloMatches(const NetHello& h, uint32_t magic, const ConnectRequest& req, uint64_t token, int32_t count);

}  // namespace loom
