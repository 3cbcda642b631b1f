// CUDA tensors (CUDA builds of loom and torch): each call goes onto the caller's current CUDA stream, as
// loom takes a cudaStream_t for its stream argument.  The call is ordered after the work the caller
// issued before it and before the work it issues next, and nothing blocks the host thread.  Every
// buffer is used on that one stream, so the caching allocator needs no recordStream: memory freed
// after the call is reused only by later work on the same stream, which waits for the call.
// (ProcessGroupNCCL runs on a stream of its own and makes the caller's stream wait for it; loom's
// progress thread already does that to the caller's stream.)
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <vector>

#include "loom.h"

namespace loom_torch {

// Whether the call's tensors are CUDA tensors: all of them on one GPU (true), all on the CPU (false);
// a mix is refused.
bool onCuda(const std::vector<at::Tensor>& tensors, c10::Device* device);

// Issues the call on `device`'s current stream and returns its Work: wait() makes the caller's current
// stream wait for the call's end (the host does not block), isCompleted() asks the GPU, and the future
// is complete at once for work on the current stream (as ProcessGroupNCCL's).  `afterwards` (copies
// into non-contiguous outputs) is issued on the same stream right after the call.  Refused arguments
// raise here; a failure while the stream runs the call is raised by a later wait() (loom records it as
// the communicator's error: loomCommGetAsyncError).
c10::intrusive_ptr<c10d::Work> issueOnCurrentStream(loomComm_t comm, int rank, c10d::OpType type,
                                                    std::vector<at::Tensor> outputs, c10::Device device,
                                                    const std::function<loomResult_t(loomStream_t)>& issue,
                                                    const std::function<void()>& afterwards);

}  // namespace loom_torch
