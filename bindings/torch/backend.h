// The loom torch.distributed backend: each c10d call becomes loom calls on host tensors.  Small calls
// run on the caller's thread (loom's NULL stream: nothing to hand over, lowest latency); larger ones are
// issued on a loom stream and return at once, their Work completed by the Completer (work.h).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>

#include "loom.h"
#include "work.h"

namespace loom_torch {

class LoomBackend : public c10d::Backend {
 public:
  // Rank 0 makes the unique id and publishes it through `store`; every rank then joins with `timeout`.
  LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout);
  // Takes over a communicator made otherwise (a shrink's).
  LoomBackend(loomComm_t comm, int rank, int size, std::chrono::milliseconds timeout);
  ~LoomBackend() override;
  const std::string getBackendName() const override { return "loom"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  // recv(src=None): from whichever rank sends first (loomRecvAnySource); the Work's source_rank() says which.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Coalescing (torch's _coalescing_manager): the calls between start and end are held, then run as
  // one loom group; each call's Work completes with the group's, which endCoalescing returns.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#ifdef LOOM_TORCH_HAS_SUPPORTSCOALESCING
  bool supportsCoalescing() const override { return true; }
#endif
#ifdef LOOM_TORCH_HAS_GETBACKENDOPTIONS
  c10::intrusive_ptr<Options> getBackendOptions() override { return c10::make_intrusive<Options>("loom", timeout_); }
#endif
#ifdef LOOM_TORCH_HAS_SPLIT
  // torch.distributed.split_group: a new loom communicator of `ranks` (ranks of this group), joined
  // through `store` (the caller namespaces it per child).
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
#endif

#ifdef LOOM_TORCH_HAS_SHRINK
  // torch.distributed.shrink_group: the ranks not excluded make a new loom communicator among themselves
  // (loomCommShrink: through this one's bootstrap, no store needed), also after a rank died.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                           const c10::intrusive_ptr<Options>& opts) override;
#endif

  // The rank of this group that loom blames for its failure (loomCommGetFailedRank), -1 if none.
  int failedRank() const;

  // The factory torch.distributed.Backend.register_backend calls (store, rank, size, timeout).
  static c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  const std::chrono::duration<float>& timeout);

 private:
  // One call: `issue` makes the loom calls on the stream it is given (NULL: run now, on this thread);
  // `afterwards` copies results out of staging buffers once they succeeded; `keepAlive` holds every
  // buffer loom touches until then.  Throws at once when loom refuses the arguments.
  // While coalescing, the call is held (issued by endCoalescing).
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, std::vector<at::Tensor> outputs, size_t bytes,
                                        std::function<loomResult_t(loomStream_t)> issue,
                                        std::function<void()> afterwards, std::vector<at::Tensor> keepAlive);
  // Issues now: on this thread when small, else on a loom stream completed by the Completer.
  c10::intrusive_ptr<c10d::Work> issueNow(PendingCall call, size_t bytes,
                                          const std::function<loomResult_t(loomStream_t)>& issue);
  // recv and recvAnysource: one tensor received (through a contiguous copy where it is not), `post`
  // making the loom call into the buffer it is given.
  using PostReceive = std::function<loomResult_t(void* buf, size_t count, loomDataType_t type, loomStream_t stream)>;
  c10::intrusive_ptr<c10d::Work> receive(c10d::OpType type, std::vector<at::Tensor>& tensors, PostReceive post);
  // Sends and receives of equal-or-uneven blocks in one loom group (alltoall, gather, scatter).
  struct Exchange {
    std::vector<at::Tensor> sends, recvs;  // by peer; undefined or empty = nothing
  };
  loomResult_t issueExchange(const Exchange& x, loomStream_t stream);

  loomComm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  size_t inlineBytes_;
  // Between startCoalescing and endCoalescing: the held calls, each with its loom calls.
  struct HeldCall {
    PendingCall call;
    std::function<loomResult_t(loomStream_t)> issue;
    size_t bytes;
  };
  bool coalescing_ = false;
  std::vector<HeldCall> held_;
  std::unique_ptr<Completer> completer_;
};

}  // namespace loom_torch
