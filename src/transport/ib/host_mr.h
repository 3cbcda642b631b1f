// Callers' host buffers as the RDMA device reaches them: what lets the ib transport send from the
// caller's buffer and read into it (zero copy) instead of copying through its registered slots.
//
// The NIC reaches only registered memory.  Registering a caller's buffer per message pins its pages
// (tens of microseconds, plus about 0.1-0.3 ms per MB on real devices), which costs more than copying
// the message into a slot; and a cache of pinned registrations keyed by address goes stale without a
// sound when the caller frees a buffer and the allocator maps new pages at the same address (MPI
// libraries hook munmap for this; a library loaded into PyTorch cannot rely on such hooks).
// On-demand paging removes both problems: an ODP region follows the process's page tables (the kernel
// invalidates the device's mapping when pages go away), nothing is pinned, and an *implicit* ODP region
// covers the whole address space, so one registration per protection domain serves every buffer the
// process will ever have, and there is nothing left to cache.
//
// Where the device has no implicit ODP for RC writes and reads (soft RoCE has ODP on explicit ranges
// only; siw, erdma and most iWARP devices none), or LOOM_IB_ODP=0, callers' buffers are not offered and
// the slots carry the bytes, as before.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/ib/verbs_api.h"

namespace loom {

// Whether `context` has implicit on-demand paging for RC RDMA WRITE and READ (and LOOM_IB_ODP allows it).
bool hostZeroCopy(const VerbsApi& api, ibv_context* context);

// The keys under which the device reaches any host address of this process on `pd`: the implicit ODP
// region, registered on first use and kept for the life of the process (with the protection domain).
// Null when hostZeroCopy() is false or the registration was refused (errno set).
const ibv_mr* hostRegion(const VerbsApi& api, ibv_context* context, ibv_pd* pd);

}  // namespace loom
