// GPUDirect RDMA for calls on device buffers made of point-to-point transfers: send, recv, out-of-place
// alltoall, and where every rank may use GPUDirect (and so runs them over transfers) allgather,
// allreduce and reduce-scatter, which reduce with the GPU's kernels (algos/transfer_ring.cc): the
// NIC reads the sender's GPU buffer and writes the receiver's where they lie, so the bytes never pass
// through host memory.  The transport offers it (an ib queue posts direct frames from device memory,
// which the receiver reads with RDMA READ: transport/net/relay_queue.h); the topology decides it: the
// rank's GPU and its NIC must be within LOOM_NET_GDR_LEVEL and the NIC must report GPUDirect support
// (topo/decisions.h), exactly the decision loom-topo prints.  Anything else is staged through host
// memory (device/device_call.h).
//
// The two ends decide alone and need not agree: a direct frame is read into a staged host buffer as
// well, and an ordinary frame is copied into a device buffer by the copy engine (algos/p2p.cc).
// Broadcast and reduce, and the reductions where some rank may not use GPUDirect, still stage: the
// network algorithms reduce and forward on the CPU.
#pragma once

#include "runtime/collective.h"

namespace loom {

class DeviceApi;

// Whether this call on device buffers goes over GPUDirect RDMA (connecting to its peers first, to ask
// their transports).  Logs the decision and its reason once per communicator.
loomResult_t gdrChosen(loomComm* comm, DeviceApi* api, const CollArgs& args, bool* chosen);

}  // namespace loom
