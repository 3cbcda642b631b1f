// The p2p path of collectives on device buffers, for ranks on one host whose GPUs reach each other
// (the same GPU: MPS or shared containers; peer-to-peer over NVLink or PCIe where the runtime allows it
// and the GPUs are within LOOM_P2P_LEVEL of each other in the host's model): every rank maps its peers'
// buffers through the p2p transport (transport/p2p: CUDA IPC) and reads them with device copies and
// reduction kernels, so the bytes never leave the GPUs.  It replaces the staged path
// (device/device_call.h) where the hardware allows; the staged path stays the fallback everywhere else.
//
// Each call: (1) the ranks exchange their buffers' IPC handles and GPU bus ids (a small host allgather
// over the communicator's own connections), (2) each maps its peers' buffers (cached) and checks that its
// GPU reaches theirs, (3) all agree (a host allreduce of "ok"), else every rank takes the staged path;
// (4) each rank computes its share straight from its peers' buffers, (5) a host barrier, so that no rank
// returns (and lets its buffers change) while another still reads them.
//   allreduce      my block <- sum of every rank's block (my input first, so in place is safe); barrier;
//                  the other blocks <- their owners' outputs
//   reduce         root: output <- sum of every rank's input
//   reducescatter  my output <- sum of every rank's block for me
//   broadcast      output <- the root's input
//   allgather      block r of my output <- rank r's input
//   alltoall       block r of my output <- rank r's block for me
// Sends, receives and groups take the staged path, as do PreMulSum ops.
#pragma once

#include "device_runtime/device_api.h"
#include "runtime/collective.h"
#include "transport/p2p/p2p_transport.h"

namespace loom {

// Whether the communicator may try the p2p path for this call: every rank on one host, a collective
// (not send/recv) with a builtin op, LOOM_DEVICE_P2P on.  The same answer on every rank.
bool p2pCandidate(const loomComm* comm, const CollArgs& args);

// Runs the call on the p2p path, or sets *staged when the ranks agreed it cannot (then nothing was
// done and the caller stages it).  Collective: every rank calls it for the call.
loomResult_t runP2p(loomComm* comm, DeviceApi* api, const CollArgs& args, bool* staged);

}  // namespace loom
