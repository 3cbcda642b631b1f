#include "cuda_work.h"

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <string>

namespace loom_torch {

namespace {

// The end of one call on its stream.
class LoomCudaWork : public c10d::Work {
 public:
  LoomCudaWork(loomComm_t comm, int rank, c10d::OpType type, std::vector<at::Tensor> outputs, c10::Device device,
               cudaEvent_t end)
      : c10d::Work(rank, type),
        comm_(comm),
        outputs_(std::move(outputs)),
        device_(device),
        end_(end),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                         std::vector<c10::Device>{device})) {
    // On the current stream: the future's users wait for this stream, as for ProcessGroupNCCL's work.
    future_->markCompleted(c10::IValue(outputs_));
  }
  ~LoomCudaWork() override { cudaEventDestroy(end_); }

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  bool isCompleted() override {
    raiseIfFailed();
    return cudaEventQuery(end_) == cudaSuccess;
  }

  bool wait(std::chrono::milliseconds /*timeout: loom's own LOOM_TIMEOUT bounds the call*/) override {
    synchronize();
    raiseIfFailed();
    return true;
  }

  void synchronize() override {
    c10::DeviceGuard guard(device_);
    const cudaStream_t current = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
    const cudaError_t e = cudaStreamWaitEvent(current, end_, 0);
    TORCH_CHECK(e == cudaSuccess, "loom: cudaStreamWaitEvent: ", cudaGetErrorString(e));
  }

 private:
  void raiseIfFailed() {
    loomResult_t async = loomSuccess;
    if (loomCommGetAsyncError(comm_, &async) == loomSuccess && async != loomSuccess && async != loomInProgress)
      C10_THROW_ERROR(DistBackendError, std::string("loom: ") + loomGetLastError(comm_));
  }

  loomComm_t comm_;
  std::vector<at::Tensor> outputs_;
  c10::Device device_;
  cudaEvent_t end_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace

bool onCuda(const std::vector<at::Tensor>& tensors, c10::Device* device) {
  bool cuda = false, cpu = false;
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (t.is_cuda()) {
      TORCH_CHECK(!cuda || t.device() == *device, "loom: one call's CUDA tensors are on ", *device, " and ",
                  t.device(), "; a call takes tensors of one GPU");
      cuda = true;
      *device = t.device();
    } else {
      cpu = true;
    }
  }
  TORCH_CHECK(!(cuda && cpu), "loom: one call mixes CPU and CUDA tensors");
  return cuda;
}

c10::intrusive_ptr<c10d::Work> issueOnCurrentStream(loomComm_t comm, int rank, c10d::OpType type,
                                                    std::vector<at::Tensor> outputs, c10::Device device,
                                                    const std::function<loomResult_t(loomStream_t)>& issue,
                                                    const std::function<void()>& afterwards) {
  c10::DeviceGuard guard(device);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  // torch's default stream is the null stream, which loom would take for "run now, on this thread":
  // name it by its handle instead, so that the call still waits for the work before it on that stream.
  if (stream == nullptr) stream = cudaStreamLegacy;
  const loomResult_t r = issue(reinterpret_cast<loomStream_t>(stream));
  if (r != loomSuccess) {
    const std::string message = loomGetLastError(comm);
    if (r == loomInvalidArgument || r == loomInvalidUsage) TORCH_CHECK(false, "loom: ", message);
    C10_THROW_ERROR(DistBackendError, "loom: " + message);
  }
  if (afterwards) afterwards();  // torch's copies, on the same (current) stream
  cudaEvent_t end = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&end, cudaEventDisableTiming);
  if (e == cudaSuccess && (e = cudaEventRecord(end, stream)) != cudaSuccess) cudaEventDestroy(end);
  TORCH_CHECK(e == cudaSuccess, "loom: recording the call's end on its stream: ", cudaGetErrorString(e));
  return c10::make_intrusive<LoomCudaWork>(comm, rank, type, std::move(outputs), device, end);
}

}  // namespace loom_torch
