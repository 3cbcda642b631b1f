// The first bytes on every network connection: who connects, for which communicator and queue, with the
// random token the receiving side published through the bootstrap.  A receiver drops any connection
// whose hello does not match (a stray or hostile client, or a rank of another communicator).
#pragma once

#include <cstdint>

#include "transport/transport.h"

namespace loom {

struct NetHello {
  uint32_t magic;
  int32_t from, to, channel;
  uint64_t commKey, token;
  int32_t index, count;  // which of the connection's streams this is (LOOM_NSOCKS), of how many
};

// Unpredictable per connection (not derived from anything a peer could see).
uint64_t randomNetToken();
// The sender's hello for stream `index` of `count`; `req` is the sender's request.
NetHello makeNetHello(uint32_t magic, const ConnectRequest& req, uint64_t token, int32_t index, int32_t count);
// Whether `h` comes from the peer of the receiver's request `req` with the published token.
bool netHelloMatches(const NetHello& h, uint32_t magic, const ConnectRequest& req, uint64_t token, int32_t count);

}  // namespace loom
