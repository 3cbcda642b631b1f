// Registered memory for the ib connections' rings and note buffers, kept for reuse once a connection
// closes.  Registering pins and maps every page (on real devices about a millisecond per megabyte), and
// communicators come and go with rings of one size (loomCommSplit, torch's new_group, a job that
// re-creates its communicator), so a closed connection's buffers serve the next one instead of being
// deregistered and registered again.  Idle buffers are bounded by LOOM_IB_MR_CACHE bytes; beyond it the
// oldest are deregistered and freed.
//
// Reuse is safe: a buffer comes back only after its connection's queue pairs were destroyed, so no peer
// can still write into it (an RDMA write needs a connected queue pair on this side).
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/ib/verbs_api.h"

namespace loom {

struct RegisteredBuffer {
  char* data = nullptr;  // page aligned, zeroed when handed out
  size_t bytes = 0;
  ibv_mr* mr = nullptr;
  ibv_pd* pd = nullptr;
  int access = 0;
};

// A buffer of `bytes` registered on `pd` with `access`: an idle one that matches, else a new one.  False
// (errno set by the failing call) when memory or the registration is refused.
bool acquireRegistered(const VerbsApi& api, ibv_pd* pd, size_t bytes, int access, RegisteredBuffer* out);
// Gives a buffer back (its connection is gone): kept for reuse within the bound, else released.
void releaseRegistered(const VerbsApi& api, RegisteredBuffer* b);

struct MrCacheStats {
  uint64_t registrations = 0;  // buffers registered since the process started
  uint64_t reuses = 0;         // buffers handed out again from the cache
  size_t idleBytes = 0;        // registered, waiting for a connection
};
MrCacheStats mrCacheStats();

}  // namespace loom
