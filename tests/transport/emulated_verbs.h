// An emulated RDMA device for the ib transport's tests (this machine has no RDMA NIC): a verbs table
// whose queue pairs live in this process and move bytes between registered regions.  RC semantics that
// the transport relies on are kept: in-order delivery per QP, a write's data visible before the
// completion of anything posted after it, receive buffers consumed in order, bounds and keys checked
// (a bad key or range is a remote access error), RDMA READ from regions that allow it, regions
// registered from a dma-buf (mapped here, the way a NIC reaches GPU memory), an error state that
// flushes posted receives and every work request posted after it, and on-demand paging (Options::odp).
// Its rdma_cm (listen, resolve, connect with private data, accept or reject, events on a pollable
// channel) connects queue pairs the way the kernel does for iWARP.  Options make it behave like an iWARP
// device (no WRITE WITH IMMEDIATE: posting one fails; queue pairs cannot be moved to RTR/RTS by verbs,
// only rdma_cm connects them) and let a test break a queue pair on purpose.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/ib/verbs_api.h"

namespace loom {
namespace emulated {

struct Options {
  bool iwarp = false;   // transport type iWARP: WRITE WITH IMMEDIATE is refused at post time, and an RDMA
                        // READ's sink must allow remote writes
  bool roce = true;     // Ethernet link layer with a RoCE v2 GID at index 1 (else InfiniBand with a LID)
  bool portActive = true;
  // Completions of different queue pairs on one completion queue come out in a shuffled order (each
  // queue pair's own stay in order), as a device serving several queue pairs in parallel may deliver them.
  bool shuffleAcrossQps = false;
  // On-demand paging for RC writes and reads: none, on explicit ranges only (as soft RoCE), or implicit
  // too (one region over the whole address space, as mlx5).  ODP regions pin nothing: an access to an
  // unmapped address fails when it happens (a remote or local access error), not at registration.
  enum class Odp { kNone, kExplicit, kImplicit };
  Odp odp = Odp::kNone;
  // The thread that posts the device's first SEND (a receiver's first credit) sleeps this long after
  // it, so that its peer acts, or leaves, before the next one.
  int pauseAfterFirstSendMs = 0;
};

// Installs the emulated device (replacing any earlier one) and returns its table.
const VerbsApi& install(const Options& options);
// Moves every queue pair to the error state (as a cable pull or a dead peer would).
void breakAllQueuePairs();
// Counters, to check which completion mode ran (plain writes count those that carried data; a
// zero-length write is the sender's liveness probe).
uint64_t writesWithImm();
uint64_t plainWrites();
// RDMA writes (either kind) per queue pair that posted them, in queue-pair creation order.
std::vector<uint64_t> writesPerQp();
// Bytes moved between memories by RDMA WRITE, SEND and READ (payloads and headers), since install().
uint64_t bytesMoved();
// RDMA READs completed, and regions registered from a dma-buf (GPU memory), since install().
uint64_t reads();
uint64_t dmabufRegistrations();
// Regions registered from a dma-buf and not deregistered yet (GPU memory the NIC still pins).
uint64_t dmabufRegionsNow();
// rdma_cm connections accepted and requests rejected since install().
uint64_t cmEstablished();
uint64_t cmRejected();

}  // namespace emulated
}  // namespace loom
