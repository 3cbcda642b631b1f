#include "runtime/group.h"

#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "algos/p2p.h"
#include "base/log.h"
#include "device_runtime/device_api.h"
#include "device/device_call.h"
#include "device/gdr_path.h"

namespace loom {

namespace {

thread_local int tlsDepth = 0;
thread_local std::vector<DeferredCall> tlsQueue;
thread_local Stream* tlsStream = nullptr;  // the group's stream (the first call's)
thread_local void* tlsDeviceStream = nullptr;  // or its device stream
thread_local bool tlsStreamMismatch = false;

// One communicator's share of a group: collectives in order, then every send and receive together.
// The calls keep their PreMulSum scalars (DeferredCall) until they run.
loomResult_t runCalls(loomComm* comm, const std::vector<CollArgs>& calls) {
  if (comm->error != loomSuccess)  // failed while this group waited on a stream
    return setError(comm->error, "loomGroupEnd: the communicator failed earlier: %s", comm->errorMessage.c_str());
  std::vector<Transfer> transfers;
  for (const CollArgs& a : calls) {
    if (a.coll == CollType::Send || a.coll == CollType::Recv) {
      transfers.push_back(transferOf(a));
    } else {
      LOOM_CHECK(comm->fail(runCollective(comm, a)));
    }
  }
  LOOM_CHECK(comm->fail(runTransfers(comm, transfers, "group send/recv")));
  return comm->fail(comm->flushSends());
}

// The same for the group's calls as made, with device buffers staged through host memory when the
// group touches any (device/device_call.h), unless every call may use GPUDirect RDMA (a group of sends
// and receives whose GPU buffers the NIC reaches: device/gdr_path.h).
loomResult_t runForComm(loomComm* comm, const std::vector<DeferredCall>& deferred, DeviceApi* dev, bool staged) {
  std::vector<CollArgs> calls;
  for (const DeferredCall& call : deferred) calls.push_back(call.resolved());
  bool everyCallGdr = staged;
  for (size_t i = 0; everyCallGdr && i < calls.size(); ++i)
    LOOM_CHECK(comm->fail(gdrChosen(comm, dev, calls[i], &everyCallGdr)));
  if (everyCallGdr) staged = false;
  if (!staged) return runCalls(comm, calls);
  return comm->fail(runStaged(comm, dev, calls, [comm](const std::vector<CollArgs>& onHost) {
    return runCalls(comm, onHost);
  }));
}

}  // namespace

bool groupActive() { return tlsDepth > 0; }

loomResult_t groupStart() {
  ++tlsDepth;
  return loomSuccess;
}

loomResult_t groupEnqueue(const DeferredCall& call, Stream* stream, void* deviceStream) {
  if (tlsQueue.empty()) tlsStream = stream, tlsDeviceStream = deviceStream;
  else if (stream != tlsStream || deviceStream != tlsDeviceStream) tlsStreamMismatch = true;
  tlsQueue.push_back(call);
  return loomSuccess;
}

loomResult_t groupEnd() {
  if (tlsDepth == 0) return setError(loomInvalidUsage, "loomGroupEnd without a matching loomGroupStart");
  if (--tlsDepth > 0) return loomSuccess;
  std::vector<DeferredCall> queue;
  queue.swap(tlsQueue);
  Stream* stream = tlsStream;
  void* deviceStream = tlsDeviceStream;
  const bool mismatch = tlsStreamMismatch;
  tlsStream = nullptr;
  tlsDeviceStream = nullptr;
  tlsStreamMismatch = false;
  if (mismatch)
    return setError(loomInvalidUsage, "loomGroupEnd: the calls of one group must all name the same stream; nothing "
                    "of the group was run");
  std::map<loomComm*, std::vector<DeferredCall>> byComm;
  std::vector<loomComm*> order;
  for (const DeferredCall& q : queue) {
    if (!byComm.count(q.comm)) order.push_back(q.comm);
    byComm[q.comm].push_back(q);
  }
  // Pin every communicator until its share has been run or handed to its engine.
  std::vector<std::unique_ptr<CommCall>> pins;
  for (loomComm* comm : order) {
    pins.push_back(std::make_unique<CommCall>(comm));
    if (!pins.back()->ok())
      return setError(loomInvalidUsage, "loomGroupEnd: a communicator of the group was destroyed first");
  }
  DeviceApi* dev = deviceApi();
  if (deviceStream != nullptr) {
    // One operation per communicator, all starting when the device stream reaches the group.
    DeviceStreamWork work;
    for (loomComm* comm : order) {
      std::vector<DeferredCall> calls = std::move(byComm[comm]);
      work.emplace_back(comm, [comm, calls, dev] { return runForComm(comm, calls, dev, true); });
    }
    return enqueueOnDeviceStream(dev, deviceStream, std::move(work));
  }
  // Per communicator: whether its share touches device buffers, and so must be staged.
  std::map<loomComm*, bool> staged;
  for (loomComm* comm : order) {
    bool any = false;
    for (const DeferredCall& q : byComm[comm])
      any = any || (dev != nullptr && touchesDevice(dev, q.resolved(), comm->nranks, comm->rank));
    staged[comm] = any;
  }
  if (stream != nullptr) {
    // One operation per communicator, all after the stream's previous work and none after another,
    // so a send and its receive on two communicators of this process progress together.
    const std::vector<std::shared_ptr<AsyncOp>> after = stream->tail();
    std::vector<std::shared_ptr<AsyncOp>> ops;
    for (loomComm* comm : order) {
      std::vector<DeferredCall> calls = std::move(byComm[comm]);
      const bool stage = staged[comm];
      ops.push_back(std::make_shared<AsyncOp>([comm, calls, dev, stage] { return runForComm(comm, calls, dev, stage); },
                                              after));
    }
    stream->append(ops);
    for (size_t i = 0; i < order.size(); ++i) order[i]->engine->enqueue(ops[i]);
    return loomSuccess;
  }
  for (loomComm* comm : order) comm->engine->drain();  // calls issued on streams before the group run first
  if (order.size() <= 1)
    return order.empty() ? loomSuccess : runForComm(order[0], byComm[order[0]], dev, staged[order[0]]);
  std::vector<loomResult_t> results(order.size(), loomSuccess);
  std::vector<std::string> messages(order.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < order.size(); ++i) {
    threads.emplace_back([&, i] {
      setLogRank(order[i]->rank);
      results[i] = runForComm(order[i], byComm[order[i]], dev, staged[order[i]]);
      messages[i] = lastError();
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < order.size(); ++i)
    if (results[i] != loomSuccess) return setError(results[i], "loomGroupEnd: %s", messages[i].c_str());
  return loomSuccess;
}

}  // namespace loom
