// Collectives on device buffers and on device streams (cudaStream_t), for every collective and every
// transport: the call's device buffers are staged through page-locked host memory (inputs copied in
// before the host algorithm runs, outputs copied out after it), and on a device stream the whole call
// runs on the communicator's progress thread when the stream reaches it, while the stream waits for it.
//
//   device stream:  [earlier work] -> marker -> host call "wait for op" -> [later work]
//   progress thread:            waits marker -> copy in -> algorithm -> copy out -> op done
//
// So the issuing thread never blocks, the call sees its inputs only after the stream's earlier kernels
// wrote them, and the stream's later kernels see its outputs.  This is also the staged fallback that the
// design names for GPU pairs without peer-to-peer access: the host algorithms and transports move the
// bytes (shared memory inside a host, the network across).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/collective.h"
#include "runtime/stream.h"

namespace loom {

class DeviceApi;

// Whether a call must take the device path: `api` is present and a buffer of the call (or a
// device-resident PreMulSum scalar) is device memory.
bool touchesDevice(DeviceApi* api, const CollArgs& args, int nranks, int rank);

// Buffers of one communicator, reused from call to call (allocating pinned or device memory costs
// milliseconds): pinned host memory to stage device data in, or device memory for the algorithms'
// scratch on the GPU.  Used by one thread at a time: the communicator's calls never run concurrently.
// A buffer that is outgrown is kept, not freed, until the pool goes (with the communicator): freeing
// pinned or device memory synchronises the whole device, and a call runs while the user's stream waits
// for it, so a free inside a call would wait for itself (seen on an H200: cudaFreeHost never returned).
// Sizes grow to powers of two, so what is kept is less than what is in use.
class StagingPool {
 public:
  enum class Memory { kPinnedHost, kDevice };
  explicit StagingPool(DeviceApi* api, Memory memory = Memory::kPinnedHost) : api_(api), memory_(memory) {}
  ~StagingPool();
  // Buffer `index` of at least `bytes` bytes (grown, never shrunk); device memory goes on the device of
  // `near` (moved there when an earlier call's was elsewhere).
  loomResult_t get(size_t index, size_t bytes, void** ptr, const void* near = nullptr);

 private:
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  void release(Buffer* b);
  DeviceApi* api_;
  Memory memory_;
  std::vector<Buffer> buffers_;
  std::vector<Buffer> outgrown_;  // freed with the pool
};

// Waits until the device work this thread started (DeviceApi::copyStart / reduceStart) has finished,
// sleeping between looks; bounded by the communicator's timeout and abort flag.
loomResult_t waitDeviceWork(loomComm* comm, DeviceApi* api, const char* what);

// Copies `bytes` between any two of host and device memory with the runtime's copy engine, and waits.
loomResult_t deviceCopy(loomComm* comm, DeviceApi* api, void* dst, const void* src, size_t bytes, const char* what);

// Runs `run` on host copies of the calls' device buffers: rewrites each call's device pointers to
// staging buffers, copies the inputs in, runs, and (only if it succeeded) copies the outputs out.
using CallsRunner = std::function<loomResult_t(const std::vector<CollArgs>&)>;
loomResult_t runStaged(loomComm* comm, DeviceApi* api, const std::vector<CollArgs>& calls, const CallsRunner& run);

// One call with device buffers (or on a device stream), start to end: read from the peers' GPUs where
// every pair allows it (device/p2p_call.h), point-to-point calls over GPUDirect RDMA where the
// topology allows it (device/gdr_path.h), else staged through host memory.
loomResult_t runDeviceCall(loomComm* comm, DeviceApi* api, const CollArgs& args);

// Starts dst = a op b on `count` elements where dst lies (a device kernel, waited for, or the CPU's
// kernel); loomAvg is (a + b) / divisor.  `api` may be null when dst is host memory.
loomResult_t combineWhereItLies(loomComm* comm, DeviceApi* api, void* dst, const void* a, const void* b, size_t count,
                                loomDataType_t type, loomRedOp_t op, int divisor);

// Queues each run on its communicator's progress engine so that all start once device stream `stream`
// has reached this point (one marker for all: a group's shares on several communicators of this process
// must run together), and makes the stream wait until every one has ended (done, failed or cancelled;
// a failure is the communicator's error, seen by loomCommGetAsyncError).
using DeviceStreamWork = std::vector<std::pair<loomComm*, std::function<loomResult_t()>>>;
loomResult_t enqueueOnDeviceStream(DeviceApi* api, void* stream, DeviceStreamWork work);

}  // namespace loom
