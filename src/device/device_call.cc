#include "device/device_call.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "kernels/reduce_kernels.h"
#include "runtime/comm.h"
#include "base/datatypes.h"
#include "base/log.h"
#include "base/wait.h"
#include "device_runtime/device_api.h"
#include "device/p2p_call.h"
#include "device/gdr_path.h"

namespace loom {

namespace {

struct Copy {
  void* dst;
  const void* src;
  size_t bytes;
};

// Starts every copy, then waits for them.
loomResult_t copyAll(loomComm* comm, DeviceApi* api, const std::vector<Copy>& copies, const char* what) {
  bool any = false;
  for (const Copy& c : copies) {
    if (c.bytes == 0) continue;
    if (api->copyStart(c.dst, c.src, c.bytes) != loomSuccess)
      return setError(loomUnhandledCudaError, "%s: starting a %zu-byte copy failed (%s): %s", what, c.bytes, api->name(),
                      api->lastErrorText().c_str());
    any = true;
  }
  return any ? waitDeviceWork(comm, api, what) : loomSuccess;
}

// Frees the marker whether or not the op ran (an op cancelled by abort never runs).
struct Marker {
  DeviceApi* api;
  void* handle;
  ~Marker() { api->markerFree(handle); }
};

// A host call waiting for an op: the device stream holds it until the op has ended.
struct StreamWait {
  std::shared_ptr<AsyncOp> op;
};

void waitForOp(void* arg) {
  std::unique_ptr<StreamWait> wait(static_cast<StreamWait*>(arg));
  // Ends: every op ends (run to its end, bounded by the timeout, or cancelled by abort or destroy).
  wait->op->wait();
}

// Asks `poll` (device work done?) until it says yes, sleeping between looks: device work takes micro- to
// milliseconds, and spinning would take a core from the ranks.  Bounded by the communicator's timeout and
// abort flag.
template <typename Poll>
loomResult_t pollDevice(loomComm* comm, DeviceApi* api, const char* what, Poll poll) {
  const WaitContext ctx = comm->waitContext(what);
  const Deadline deadline = Deadline::afterSeconds(ctx.timeoutSec);
  for (int pause = 2;; pause = std::min(pause * 2, 1000)) {
    bool done = false;
    if (poll(&done) != loomSuccess)
      return setError(loomUnhandledCudaError, "%s: failed (%s): %s", what, api->name(), api->lastErrorText().c_str());
    if (done) return loomSuccess;
    std::string message;
    loomResult_t code = checkWait(ctx, deadline, &message);
    if (code == loomTimeout)
      return setError(code, "%s: not done within LOOM_TIMEOUT (%g s)", what, ctx.timeoutSec);
    if (code != loomSuccess) return setError(code, "%s", message.c_str());
    std::this_thread::sleep_for(std::chrono::microseconds(pause));
  }
}

}  // namespace

loomResult_t waitDeviceWork(loomComm* comm, DeviceApi* api, const char* what) {
  return pollDevice(comm, api, what, [api](bool* done) { return api->copyDone(done); });
}

loomResult_t deviceCopy(loomComm* comm, DeviceApi* api, void* dst, const void* src, size_t bytes, const char* what) {
  return copyAll(comm, api, {Copy{dst, src, bytes}}, what);
}

bool touchesDevice(DeviceApi* api, const CollArgs& args, int nranks, int rank) {
  if (api == nullptr) return false;
  const CallExtents e = callExtents(args, nranks, rank);
  return (e.sendBytes > 0 && api->isDeviceMemory(args.sendbuff)) ||
         (e.recvBytes > 0 && api->isDeviceMemory(args.recvbuff)) ||
         (args.scalar != nullptr && api->isDeviceMemory(args.scalar));
}

StagingPool::~StagingPool() {
  for (Buffer& b : buffers_) release(&b);
  for (Buffer& b : outgrown_) release(&b);
}

void StagingPool::release(Buffer* b) {
  if (b->ptr != nullptr) (memory_ == Memory::kDevice ? api_->deviceFree(b->ptr) : api_->hostFree(b->ptr));
  *b = Buffer();
}

loomResult_t StagingPool::get(size_t index, size_t bytes, void** ptr, const void* near) {
  if (buffers_.size() <= index) buffers_.resize(index + 1);
  Buffer& b = buffers_[index];
  const bool device = memory_ == Memory::kDevice;
  const bool elsewhere = b.ptr != nullptr && device && near != nullptr && api_->busIdOf(b.ptr) != api_->busIdOf(near);
  if (b.bytes < bytes || elsewhere) {
    if (b.ptr != nullptr) outgrown_.push_back(b);  // not freed here: see the class comment
    b = Buffer();
    size_t want = 4096;
    while (want < bytes) want *= 2;
    if ((device ? api_->deviceAlloc(&b.ptr, want, near) : api_->hostAlloc(&b.ptr, want)) != loomSuccess)
      return setError(loomSystemError, "allocating %zu bytes of %s failed (%s): %s", want,
                      device ? "device memory for scratch" : "page-locked host memory to stage device data",
                      api_->name(), api_->lastErrorText().c_str());
    b.bytes = want;
  }
  *ptr = b.ptr;
  return loomSuccess;
}

loomResult_t combineWhereItLies(loomComm* comm, DeviceApi* api, void* dst, const void* a, const void* b, size_t count,
                                loomDataType_t type, loomRedOp_t op, int divisor) {
  if (count == 0) return loomSuccess;
  if (api != nullptr && api->isDeviceMemory(dst)) {
    if (api->reduceStart(dst, a, b, count, type, op, divisor) != loomSuccess)
      return setError(loomUnhandledCudaError, "reducing %zu elements on the device failed (%s): %s", count, api->name(),
                      api->lastErrorText().c_str());
    return waitDeviceWork(comm, api, "reducing on the device");
  }
  const ReduceKernels& k = reduceKernels();
  if (op == loomAvg) k.sumDivide[type](dst, a, b, count, divisor);
  else k.reduce[type][op](dst, a, b, count);
  return loomSuccess;
}

loomResult_t runStaged(loomComm* comm, DeviceApi* api, const std::vector<CollArgs>& calls, const CallsRunner& run) {
  if (!comm->staging) comm->staging = std::make_unique<StagingPool>(api);
  StagingPool& pool = *comm->staging;
  std::vector<CollArgs> onHost = calls;
  std::vector<Copy> in, out;
  size_t next = 0;  // staging buffer index
  for (CollArgs& a : onHost) {
    const CallExtents e = callExtents(a, comm->nranks, comm->rank);
    auto* s = static_cast<char*>(const_cast<void*>(a.sendbuff));
    auto* r = static_cast<char*>(a.recvbuff);
    const bool devSend = e.sendBytes > 0 && api->isDeviceMemory(s);
    const bool devRecv = e.recvBytes > 0 && api->isDeviceMemory(r);
    if (e.inPlace && (devSend || devRecv)) {
      // One span holds both, so the algorithm sees the in-place layout it expects.
      char* lo = e.sendBytes == 0 ? r : e.recvBytes == 0 ? s : std::min(s, r);
      char* hi = std::max(e.sendBytes ? s + e.sendBytes : lo, e.recvBytes ? r + e.recvBytes : lo);
      void* h = nullptr;
      LOOM_CHECK(pool.get(next++, static_cast<size_t>(hi - lo), &h));
      char* host = static_cast<char*>(h);
      in.push_back({host, lo, static_cast<size_t>(hi - lo)});
      if (s != nullptr) a.sendbuff = host + (s - lo);
      if (r != nullptr) a.recvbuff = host + (r - lo);
      if (e.recvBytes > 0) out.push_back({r, host + (r - lo), e.recvBytes});
    } else {
      if (devSend) {
        void* h = nullptr;
        LOOM_CHECK(pool.get(next++, e.sendBytes, &h));
        in.push_back({h, s, e.sendBytes});
        a.sendbuff = h;
      }
      if (devRecv) {
        void* h = nullptr;
        LOOM_CHECK(pool.get(next++, e.recvBytes, &h));
        out.push_back({r, h, e.recvBytes});
        a.recvbuff = h;
      }
    }
    if (a.scalar != nullptr && api->isDeviceMemory(a.scalar)) {
      void* h = nullptr;
      LOOM_CHECK(pool.get(next++, sizeof(double), &h));
      in.push_back({h, a.scalar, typeSize(a.type)});
      a.scalar = h;
    }
  }
  LOOM_TRACE(kColl, "device call: %zu call(s), %zu input and %zu output buffer(s) staged through host memory",
             calls.size(), in.size(), out.size());
  LOOM_CHECK(copyAll(comm, api, in, "copying device inputs to the host"));
  LOOM_CHECK(run(onHost));
  return copyAll(comm, api, out, "copying results to the device");
}

loomResult_t runDeviceCall(loomComm* comm, DeviceApi* api, const CollArgs& args) {
  if (comm->error != loomSuccess) return runCall(comm, args);  // reports the earlier failure
  bool staged = true;
  if (p2pCandidate(comm, args)) LOOM_CHECK(comm->fail(runP2p(comm, api, args, &staged)));
  if (!staged) return loomSuccess;
  bool gdr = false;
  LOOM_CHECK(comm->fail(gdrChosen(comm, api, args, &gdr)));
  if (gdr) {
    LOOM_TRACE(kColl, "device call: %s over GPUDirect RDMA", collName(args.coll));
    return runCall(comm, args);
  }
  return comm->fail(runStaged(comm, api, {args}, [comm](const std::vector<CollArgs>& onHost) {
    return runCall(comm, onHost[0]);
  }));
}

loomResult_t enqueueOnDeviceStream(DeviceApi* api, void* stream, DeviceStreamWork work) {
  void* handle = nullptr;
  if (api->markerRecord(stream, &handle) != loomSuccess)
    return setError(loomUnhandledCudaError, "recording an event on stream %p failed (%s): %s", stream, api->name(),
                    api->lastErrorText().c_str());
  std::shared_ptr<Marker> marker(new Marker{api, handle});
  std::vector<std::shared_ptr<AsyncOp>> ops;
  for (auto& [comm, run] : work) {
    // Each op first waits for the marker: the stream's earlier work (the kernels that wrote our inputs).
    ops.push_back(std::make_shared<AsyncOp>(
        [comm = comm, api, marker, run = std::move(run)]() -> loomResult_t {
          LOOM_CHECK(comm->fail(pollDevice(comm, api, "waiting for the device stream's earlier work",
                                            [&](bool* ready) { return api->markerReady(marker->handle, ready); })));
          return run();
        },
        std::vector<std::shared_ptr<AsyncOp>>{}));
  }
  // The stream's later work waits for every op.  Should the runtime refuse a host call, nothing was
  // enqueued for the ops yet: they are dropped and the call fails as a whole.
  for (auto& op : ops) {
    auto* wait = new StreamWait{op};
    if (api->enqueueHostCall(stream, waitForOp, wait) != loomSuccess) {
      delete wait;
      return setError(loomUnhandledCudaError, "making stream %p wait for the call failed (%s): %s", stream,
                      api->name(), api->lastErrorText().c_str());
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) work[i].first->engine->enqueue(ops[i]);
  return loomSuccess;
}

}  // namespace loom
