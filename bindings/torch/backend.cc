#include "backend.h"

#include <c10/util/Exception.h>

#ifdef LOOM_TORCH_CUDA
#include "cuda_work.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

namespace loom_torch {

namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// Environment settings of the binding (the library's own are in src/base/params.h).
// LOOM_TORCH_INLINE_BYTES: calls of at most this many bytes run on the caller's thread (default 64 KiB).
size_t inlineBytesSetting() {
  const char* v = std::getenv("LOOM_TORCH_INLINE_BYTES");
  if (v == nullptr || *v == '\0') return 64 << 10;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  TORCH_CHECK(end != v && *end == '\0' && n >= 0, "loom: LOOM_TORCH_INLINE_BYTES=", v, " is not a byte count");
  return static_cast<size_t>(n);
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "loom: ", what, " is an undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "loom: ", what, " is ", t.layout(), "; only dense tensors are supported");
#ifdef LOOM_TORCH_CUDA
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "loom: ", what, " is on ", t.device(),
              "; loom handles CPU and CUDA tensors");
#else
  TORCH_CHECK(t.device().is_cpu(), "loom: ", what, " is on ", t.device(), "; this build of loom handles CPU tensors");
#endif
}

void checkSame(const at::Tensor& t, const at::Tensor& ref, const char* what) {
  checkTensor(t, what);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "loom: ", what, " has dtype ", t.scalar_type(), " but the input has ",
              ref.scalar_type());
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "loom: ", call, " takes one tensor per process, got ", tensors.size());
  checkTensor(tensors[0], "the tensor");
  return tensors[0];
}

loomDataType_t loomType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return loomFloat32;
    case at::kDouble: return loomFloat64;
    case at::kHalf: return loomFloat16;
    case at::kBFloat16: return loomBfloat16;
    case at::kChar: return loomInt8;
    case at::kByte: return loomUint8;
    case at::kBool: return loomUint8;
    case at::kInt: return loomInt32;
    case at::kLong: return loomInt64;
    default: TORCH_CHECK(false, "loom: tensors of dtype ", t, " are not supported");
  }
  return loomUint8;  // not reached
}

// Bool tensors reduce as logic: SUM and MAX are "or", PRODUCT and MIN are "and" (as bytes 0/1).
loomRedOp_t loomOp(const c10d::ReduceOp& op, at::ScalarType t) {
  const bool logic = t == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return logic ? loomMax : loomSum;
    case c10d::ReduceOp::PRODUCT: return logic ? loomMin : loomProd;
    case c10d::ReduceOp::MIN: return loomMin;
    case c10d::ReduceOp::MAX: return loomMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!logic, "loom: ReduceOp.AVG of bool tensors has no meaning");
      return loomAvg;
    default: TORCH_CHECK(false, "loom: ReduceOp ", static_cast<int>(op.op_), " (bitwise or PREMUL_SUM) is not supported");
  }
  return loomSum;  // not reached
}

size_t bytesOf(const at::Tensor& t) { return t.numel() * t.element_size(); }

// A buffer loom can write: the tensor itself when contiguous, else a contiguous copy that is copied back
// into the tensor when the call succeeded.
at::Tensor writable(const at::Tensor& t, std::vector<std::function<void()>>& copyBack) {
  if (t.is_contiguous()) return t;
  at::Tensor c = t.contiguous();
  copyBack.push_back([t, c]() mutable { t.copy_(c); });
  return c;
}

std::function<void()> inOrder(std::vector<std::function<void()>> steps) {
  if (steps.empty()) return nullptr;
  return [steps = std::move(steps)] {
    for (const auto& s : steps) s();
  };
}

// The loom calls of `n` collectives as one loom group (their results as if issued one by one).
loomResult_t grouped(size_t n, const std::function<loomResult_t(size_t)>& one) {
  loomResult_t r = loomGroupStart();
  if (r != loomSuccess) return r;
  for (size_t i = 0; i < n && r == loomSuccess; ++i) r = one(i);
  loomResult_t end = loomGroupEnd();
  return r != loomSuccess ? r : end;
}

// The buffers of a coalesced call: input i and output i of one collective each, where one side holds
// `world` times the other's elements (allgather: the output; reduce_scatter: the input).
struct CoalescedBuffers {
  std::vector<at::Tensor> ins, outs, keep;
  std::vector<std::function<void()>> after;
  size_t bytes = 0;
};

CoalescedBuffers coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, int world,
                           bool outputIsLarger, const char* call) {
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "loom: ", call, " needs as many outputs as inputs (",
              outputs.size(), " and ", inputs.size(), ")");
  CoalescedBuffers b;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkSame(inputs[i], inputs[0], "an input");
    checkSame(outputs[i], inputs[0], "an output");
    const at::Tensor& large = outputIsLarger ? outputs[i] : inputs[i];
    const at::Tensor& small = outputIsLarger ? inputs[i] : outputs[i];
    TORCH_CHECK(large.numel() == small.numel() * world, "loom: ", call, ": ", outputIsLarger ? "output " : "input ", i,
                " has ", large.numel(), " elements; it needs ", world, " x ", small.numel());
    b.ins.push_back(inputs[i].contiguous());
    b.outs.push_back(writable(outputs[i], b.after));
    b.bytes += bytesOf(large);
  }
  b.keep = b.ins;
  b.keep.insert(b.keep.end(), b.outs.begin(), b.outs.end());
  b.keep.insert(b.keep.end(), outputs.begin(), outputs.end());
  return b;
}

}  // namespace

LoomBackend::LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout), inlineBytes_(inlineBytesSetting()) {
  // The store is this group's own (torch prefixes it per group), so one key serves every group.
  const std::string key = "loom_unique_id";
  loomUniqueId id;
  if (rank == 0) {
    TORCH_CHECK(loomGetUniqueId(&id) == loomSuccess, "loom: ", loomGetLastError(nullptr));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(key, std::vector<uint8_t>(p, p + sizeof(id)));
  } else {
    std::vector<uint8_t> v = store->get(key);  // waits (bounded by the store's timeout) for rank 0
    TORCH_CHECK(v.size() == sizeof(id), "loom: the store's ", key, " has ", v.size(), " bytes, not ", sizeof(id));
    std::memcpy(&id, v.data(), sizeof(id));
  }
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutSec = static_cast<int>(std::max<int64_t>(1, (timeout.count() + 999) / 1000));
  config.commName = "torch";
  TORCH_CHECK(loomCommInitRankConfig(&comm_, size, id, rank, &config) == loomSuccess, "loom: ",
              loomGetLastError(nullptr));
  completer_ = std::make_unique<Completer>();
}

LoomBackend::LoomBackend(loomComm_t comm, int rank, int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), comm_(comm), timeout_(timeout), inlineBytes_(inlineBytesSetting()) {
  completer_ = std::make_unique<Completer>();
}

LoomBackend::~LoomBackend() {
  completer_.reset();  // every issued call completes (each is bounded by the timeout)
  if (comm_ != nullptr) loomCommDestroy(comm_);
}

c10::intrusive_ptr<c10d::Backend> LoomBackend::create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                      int size, const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<LoomBackend>(store, rank, size,
                                          std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

WorkPtr LoomBackend::launch(OpType type, std::vector<at::Tensor> outputs, size_t bytes,
                            std::function<loomResult_t(loomStream_t)> issue, std::function<void()> afterwards,
                            std::vector<at::Tensor> keepAlive) {
  completer_->releaseFinished();  // on this (Python) thread
#ifdef LOOM_TORCH_CUDA
  c10::Device device(c10::kCPU);
  if (onCuda(keepAlive, &device) && !coalescing_)
    return issueOnCurrentStream(comm_, rank_, type, std::move(outputs), device, issue, afterwards);
#endif
  PendingCall call;
  call.work = c10::make_intrusive<LoomWork>(rank_, type, std::move(outputs));
  call.afterwards = std::move(afterwards);
  call.keepAlive = std::move(keepAlive);
  if (coalescing_) {
    WorkPtr work = call.work;
    held_.push_back(HeldCall{std::move(call), std::move(issue), bytes});
    return work;
  }
  return issueNow(std::move(call), bytes, issue);
}

WorkPtr LoomBackend::issueNow(PendingCall call, size_t bytes, const std::function<loomResult_t(loomStream_t)>& issue) {
  // Refused arguments raise here; a failure while running is the Work's (raised by wait()).  Raising,
  // the call's Works end too (coalesced calls' Works were handed out already).
  auto refuse = [&](loomResult_t r, const std::string& message) {
    Completer::finish(call, r, message);
    TORCH_CHECK(false, "loom: ", message);
  };
#ifdef LOOM_TORCH_CUDA
  c10::Device device(c10::kCPU);
  if (onCuda(call.keepAlive, &device)) {
    // Coalesced calls on CUDA tensors: one group on the current stream; the members' Works (handed out
    // while coalescing) complete once it is issued, the returned one follows the stream.
    auto afterwards = [&call] {
      for (const PendingCall& m : call.members)
        if (m.afterwards) m.afterwards();
    };
    WorkPtr work;
    try {
      work = issueOnCurrentStream(comm_, rank_, OpType::COALESCED, call.work->result(), device, issue, afterwards);
    } catch (const std::exception& e) {
      Completer::finish(call, loomRemoteError, e.what());
      throw;
    }
    for (PendingCall& m : call.members) {
      m.afterwards = nullptr;  // issued above, on the stream
      Completer::finish(m, loomSuccess, "");
    }
    return work;
  }
#endif
  if (bytes <= inlineBytes_) {
    loomResult_t r = issue(nullptr);
    const std::string message = r == loomSuccess ? std::string() : std::string(loomGetLastError(comm_));
    if (r == loomInvalidArgument) refuse(r, message);
    Completer::finish(call, r, message);
    return call.work;
  }
  loomStream_t stream = nullptr;
  if (loomStreamCreate(&stream) != loomSuccess) refuse(loomInternalError, loomGetLastError(comm_));
  loomResult_t r = issue(stream);
  if (r != loomSuccess) {
    std::string message = loomGetLastError(comm_);
    loomStreamDestroy(stream);
    refuse(r, message);
  }
  WorkPtr work = call.work;
  call.stream = stream;
  completer_->add(std::move(call));
  return work;
}

void LoomBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "loom: startCoalescing while already coalescing");
  coalescing_ = true;
}

WorkPtr LoomBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "loom: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<HeldCall> held = std::move(held_);
  held_.clear();
  PendingCall whole;
  std::vector<at::Tensor> outputs;
  std::vector<std::function<loomResult_t(loomStream_t)>> issues;
  size_t bytes = 0;
  for (HeldCall& h : held) {
    for (const at::Tensor& t : h.call.work->result()) outputs.push_back(t);
    whole.keepAlive.insert(whole.keepAlive.end(), h.call.keepAlive.begin(), h.call.keepAlive.end());
    issues.push_back(std::move(h.issue));
    bytes += h.bytes;
    whole.members.push_back(std::move(h.call));
  }
  whole.work = c10::make_intrusive<LoomWork>(rank_, OpType::COALESCED, std::move(outputs));
  return issueNow(std::move(whole), bytes, [issues](loomStream_t s) {
    return grouped(issues.size(), [&](size_t i) { return issues[i](s); });
  });
}

#ifdef LOOM_TORCH_HAS_SPLIT
c10::intrusive_ptr<c10d::Backend> LoomBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const std::vector<int>& ranks,
                                                     const c10::intrusive_ptr<Options>& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  TORCH_CHECK(it != ranks.end(), "loom: split: rank ", rank_, " is not one of the new group's ranks");
  return c10::make_intrusive<LoomBackend>(store, static_cast<int>(it - ranks.begin()), static_cast<int>(ranks.size()),
                                          opts ? opts->timeout : timeout_);
}
#endif

int LoomBackend::failedRank() const {
  int rank = -1;
  if (loomCommGetFailedRank(comm_, &rank) != loomSuccess) return -1;
  return rank;
}

#ifdef LOOM_TORCH_HAS_SHRINK
c10::intrusive_ptr<c10d::Backend> LoomBackend::shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                                      const c10::intrusive_ptr<Options>& opts) {
  // torch's SHRINK_ABORT is 1, as LOOM_SHRINK_ABORT: loom ends what is still in flight on this group
  // (those calls fail; their Works report it), then the survivors make their communicator.
  std::vector<int> exclude(ranksToExclude.begin(), ranksToExclude.end());
  const std::chrono::milliseconds timeout = opts ? std::chrono::duration_cast<std::chrono::milliseconds>(opts->timeout)
                                                 : timeout_;
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutSec = static_cast<int>(std::max<int64_t>(1, (timeout.count() + 999) / 1000));
  config.commName = "torch";
  loomComm_t small = nullptr;
  const loomResult_t r = loomCommShrink(comm_, exclude.data(), static_cast<int>(exclude.size()), &small, &config,
                                        shrinkFlags & LOOM_SHRINK_ABORT);
  if (r != loomSuccess) C10_THROW_ERROR(DistBackendError, std::string("loom: shrink: ") + loomGetLastError(comm_));
  int rank = 0, size = 0;
  loomCommUserRank(small, &rank);
  loomCommCount(small, &size);
  return c10::make_intrusive<LoomBackend>(small, rank, size, timeout);
}
#endif

WorkPtr LoomBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  at::Tensor& t = single(tensors, "allreduce");
  std::vector<std::function<void()>> after;
  at::Tensor buf = writable(t, after);
  const loomDataType_t type = loomType(t.scalar_type());
  const loomRedOp_t op = loomOp(opts.reduceOp, t.scalar_type());
  loomComm_t comm = comm_;
  return launch(OpType::ALLREDUCE, tensors, bytesOf(buf), [=](loomStream_t s) {
    return loomAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), type, op, comm, s);
  }, inOrder(std::move(after)), {buf, t});
}

WorkPtr LoomBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "loom: allreduce_coalesced needs at least one tensor");
  std::vector<std::function<void()>> after;
  std::vector<at::Tensor> bufs;
  size_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    checkSame(t, tensors[0], "a tensor of allreduce_coalesced");
    bufs.push_back(writable(t, after));
    bytes += bytesOf(t);
  }
  const loomDataType_t type = loomType(tensors[0].scalar_type());
  const loomRedOp_t op = loomOp(opts.reduceOp, tensors[0].scalar_type());
  loomComm_t comm = comm_;
  std::vector<at::Tensor> keep = bufs;
  keep.insert(keep.end(), tensors.begin(), tensors.end());
  return launch(OpType::ALLREDUCE_COALESCED, tensors, bytes, [=](loomStream_t s) {
    return grouped(bufs.size(), [&](size_t i) {
      return loomAllReduce(bufs[i].data_ptr(), bufs[i].data_ptr(), bufs[i].numel(), type, op, comm, s);
    });
  }, inOrder(std::move(after)), keep);
}

WorkPtr LoomBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  at::Tensor& t = single(tensors, "broadcast");
  std::vector<std::function<void()>> after;
  at::Tensor buf = writable(t, after);
  const loomDataType_t type = loomType(t.scalar_type());
  const int root = static_cast<int>(opts.rootRank);
  loomComm_t comm = comm_;
  return launch(OpType::BROADCAST, tensors, bytesOf(buf), [=](loomStream_t s) {
    return loomBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(), type, root, comm, s);
  }, inOrder(std::move(after)), {buf, t});
}

WorkPtr LoomBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  at::Tensor& t = single(tensors, "reduce");
  std::vector<std::function<void()>> after;
  at::Tensor buf = writable(t, after);
  const loomDataType_t type = loomType(t.scalar_type());
  const loomRedOp_t op = loomOp(opts.reduceOp, t.scalar_type());
  const int root = static_cast<int>(opts.rootRank);
  loomComm_t comm = comm_;
  return launch(OpType::REDUCE, tensors, bytesOf(buf), [=](loomStream_t s) {
    return loomReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), type, op, root, comm, s);
  }, inOrder(std::move(after)), {buf, t});
}

WorkPtr LoomBackend::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  checkTensor(input, "the input");
  checkSame(output, input, "the output");
  TORCH_CHECK(output.numel() == input.numel() * size_, "loom: allgather output has ", output.numel(),
              " elements; it needs world size x input = ", size_, " x ", input.numel());
  at::Tensor in = input.contiguous();
  std::vector<std::function<void()>> after;
  at::Tensor out = writable(output, after);
  const loomDataType_t type = loomType(input.scalar_type());
  loomComm_t comm = comm_;
  return launch(OpType::_ALLGATHER_BASE, {output}, bytesOf(out), [=](loomStream_t s) {
    return loomAllGather(in.data_ptr(), out.data_ptr(), in.numel(), type, comm, s);
  }, inOrder(std::move(after)), {in, out, output});
}

WorkPtr LoomBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                               const c10d::AllgatherOptions&) {
  at::Tensor& input = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_), "loom: allgather needs one list of ",
              size_, " output tensors");
  for (const at::Tensor& o : outputs[0]) {
    checkSame(o, input, "an allgather output");
    TORCH_CHECK(o.numel() == input.numel(), "loom: allgather outputs must have the input's ", input.numel(),
                " elements; one has ", o.numel());
  }
  // Gathered into one flat buffer, then copied into the list's tensors when it succeeded.
  at::Tensor in = input.contiguous();
  at::Tensor flat = at::empty({static_cast<int64_t>(size_) * input.numel()}, input.options());
  std::vector<at::Tensor> outs = outputs[0];
  const int64_t n = input.numel();
  const int size = size_;
  const loomDataType_t type = loomType(input.scalar_type());
  loomComm_t comm = comm_;
  return launch(OpType::ALLGATHER, outs, bytesOf(flat), [=](loomStream_t s) {
    return loomAllGather(in.data_ptr(), flat.data_ptr(), n, type, comm, s);
  }, [flat, outs, n, size] {
    for (int i = 0; i < size; ++i) outs[i].copy_(flat.narrow(0, i * n, n).view_as(outs[i]));
  }, {in, flat});
}

// outputLists[r][i] receives rank r's input i (torch's layout).  Each input is gathered into a flat
// buffer (one loom allgather each, in one group), copied into the lists once all succeeded.
WorkPtr LoomBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                         std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  TORCH_CHECK(!inputs.empty(), "loom: allgather_coalesced needs at least one input");
  TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_), "loom: allgather_coalesced needs one output list per "
              "rank (", outputLists.size(), " lists for ", size_, " ranks)");
  std::vector<at::Tensor> ins, flats, results;
  size_t bytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "an allgather_coalesced input");
    ins.push_back(inputs[i].contiguous());
    flats.push_back(at::empty({static_cast<int64_t>(size_) * inputs[i].numel()}, inputs[i].options()));
    bytes += bytesOf(flats.back());
  }
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK(outputLists[r].size() == inputs.size(), "loom: allgather_coalesced output list ", r, " has ",
                outputLists[r].size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& o = outputLists[r][i];
      checkSame(o, inputs[i], "an allgather_coalesced output");
      TORCH_CHECK(o.numel() == inputs[i].numel(), "loom: allgather_coalesced output ", i, " of rank ", r, " has ",
                  o.numel(), " elements; its input has ", inputs[i].numel());
      results.push_back(o);
    }
  }
  std::vector<std::vector<at::Tensor>> lists = outputLists;
  loomComm_t comm = comm_;
  std::vector<at::Tensor> keep = ins;
  keep.insert(keep.end(), flats.begin(), flats.end());
  return launch(OpType::ALLGATHER_COALESCED, results, bytes, [=](loomStream_t s) {
    return grouped(ins.size(), [&](size_t i) {
      return loomAllGather(ins[i].data_ptr(), flats[i].data_ptr(), ins[i].numel(), loomType(ins[i].scalar_type()), comm,
                           s);
    });
  }, [lists, flats] {
    for (size_t r = 0; r < lists.size(); ++r)
      for (size_t i = 0; i < flats.size(); ++i) {
        const int64_t n = lists[r][i].numel();
        lists[r][i].copy_(flats[i].narrow(0, static_cast<int64_t>(r) * n, n).view_as(lists[r][i]));
      }
  }, keep);
}

WorkPtr LoomBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions&) {
  CoalescedBuffers b = coalesced(outputs, inputs, size_, /*outputIsLarger=*/true, "allgather_into_tensor_coalesced");
  const loomDataType_t type = loomType(inputs[0].scalar_type());
  loomComm_t comm = comm_;
  std::vector<at::Tensor> ins = b.ins, outs = b.outs;
  return launch(OpType::COALESCED, outputs, b.bytes, [=](loomStream_t s) {
    return grouped(ins.size(), [&](size_t i) {
      return loomAllGather(ins[i].data_ptr(), outs[i].data_ptr(), ins[i].numel(), type, comm, s);
    });
  }, inOrder(std::move(b.after)), b.keep);
}

WorkPtr LoomBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "the input");
  checkSame(output, input, "the output");
  TORCH_CHECK(input.numel() == output.numel() * size_, "loom: reduce_scatter input has ", input.numel(),
              " elements; it needs world size x output = ", size_, " x ", output.numel());
  at::Tensor in = input.contiguous();
  std::vector<std::function<void()>> after;
  at::Tensor out = writable(output, after);
  const loomDataType_t type = loomType(input.scalar_type());
  const loomRedOp_t op = loomOp(opts.reduceOp, input.scalar_type());
  loomComm_t comm = comm_;
  return launch(OpType::_REDUCE_SCATTER_BASE, {output}, bytesOf(in), [=](loomStream_t s) {
    return loomReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), type, op, comm, s);
  }, inOrder(std::move(after)), {in, out, output});
}

WorkPtr LoomBackend::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                    const c10d::ReduceScatterOptions& opts) {
  at::Tensor& output = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_), "loom: reduce_scatter needs one list "
              "of ", size_, " input tensors");
  const int64_t n = output.numel();
  at::Tensor flat = at::empty({static_cast<int64_t>(size_) * n}, output.options());
  for (int i = 0; i < size_; ++i) {
    const at::Tensor& in = inputs[0][i];
    checkSame(in, output, "a reduce_scatter input");
    TORCH_CHECK(in.numel() == n, "loom: reduce_scatter inputs must have the output's ", n, " elements; input ", i,
                " has ", in.numel());
    flat.narrow(0, i * n, n).copy_(in.reshape({-1}));
  }
  return _reduce_scatter_base(output, flat, opts);
}

WorkPtr LoomBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                     const c10d::ReduceScatterOptions& opts) {
  CoalescedBuffers b = coalesced(outputs, inputs, size_, /*outputIsLarger=*/false, "reduce_scatter_tensor_coalesced");
  const loomDataType_t type = loomType(inputs[0].scalar_type());
  const loomRedOp_t op = loomOp(opts.reduceOp, inputs[0].scalar_type());
  loomComm_t comm = comm_;
  std::vector<at::Tensor> ins = b.ins, outs = b.outs;
  return launch(OpType::COALESCED, outputs, b.bytes, [=](loomStream_t s) {
    return grouped(ins.size(), [&](size_t i) {
      return loomReduceScatter(ins[i].data_ptr(), outs[i].data_ptr(), outs[i].numel(), type, op, comm, s);
    });
  }, inOrder(std::move(b.after)), b.keep);
}

loomResult_t LoomBackend::issueExchange(const Exchange& x, loomStream_t stream) {
  loomResult_t r = loomGroupStart();
  if (r != loomSuccess) return r;
  for (int p = 0; p < size_ && r == loomSuccess; ++p) {
    if (p == rank_) continue;
    const at::Tensor& snd = x.sends[p];
    const at::Tensor& rcv = x.recvs[p];
    if (snd.defined() && snd.numel() > 0)
      r = loomSend(snd.data_ptr(), snd.numel(), loomType(snd.scalar_type()), p, comm_, stream);
    if (r == loomSuccess && rcv.defined() && rcv.numel() > 0)
      r = loomRecv(rcv.data_ptr(), rcv.numel(), loomType(rcv.scalar_type()), p, comm_, stream);
  }
  loomResult_t end = loomGroupEnd();
  return r != loomSuccess ? r : end;
}

WorkPtr LoomBackend::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                   std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions&) {
  checkTensor(input, "the input");
  checkSame(output, input, "the output");
  at::Tensor in = input.contiguous();
  std::vector<std::function<void()>> after;
  at::Tensor out = writable(output, after);
  loomComm_t comm = comm_;
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(in.numel() == out.numel() && in.numel() % size_ == 0, "loom: alltoall with equal splits needs input "
                "and output of the same size, divisible by the world size ", size_, " (got ", in.numel(), " and ",
                out.numel(), ")");
    const loomDataType_t type = loomType(input.scalar_type());
    const int64_t perRank = in.numel() / size_;
    return launch(OpType::ALLTOALL_BASE, {output}, bytesOf(in), [=](loomStream_t s) {
      return loomAllToAll(in.data_ptr(), out.data_ptr(), perRank, type, comm, s);
    }, inOrder(std::move(after)), {in, out, output});
  }
  // Uneven splits, counted in rows of dimension 0.
  auto splitsOf = [&](std::vector<int64_t>& splits, const at::Tensor& t, const char* which) {
    TORCH_CHECK(t.dim() > 0, "loom: alltoall with splits needs tensors with a first dimension");
    if (splits.empty()) {
      TORCH_CHECK(t.size(0) % size_ == 0, "loom: ", which, " has ", t.size(0), " rows, not divisible by ", size_);
      splits.assign(size_, t.size(0) / size_);
    }
    TORCH_CHECK(splits.size() == static_cast<size_t>(size_), "loom: ", which, " splits have ", splits.size(),
                " entries for ", size_, " ranks");
    TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == t.size(0), "loom: ", which,
                " splits do not add up to its ", t.size(0), " rows");
  };
  splitsOf(inputSplits, in, "the input");
  splitsOf(outputSplits, out, "the output");
  Exchange x;
  x.sends.resize(size_);
  x.recvs.resize(size_);
  int64_t inAt = 0, outAt = 0;
  for (int p = 0; p < size_; ++p) {
    x.sends[p] = in.narrow(0, inAt, inputSplits[p]);
    x.recvs[p] = out.narrow(0, outAt, outputSplits[p]);
    inAt += inputSplits[p];
    outAt += outputSplits[p];
  }
  TORCH_CHECK(x.sends[rank_].sizes() == x.recvs[rank_].sizes(), "loom: alltoall sends ", x.sends[rank_].size(0),
              " rows to itself but expects ", x.recvs[rank_].size(0));
  x.recvs[rank_].copy_(x.sends[rank_]);
  return launch(OpType::ALLTOALL_BASE, {output}, bytesOf(in), [this, x](loomStream_t s) { return issueExchange(x, s); },
                inOrder(std::move(after)), {in, out, output});
}

WorkPtr LoomBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllToAllOptions&) {
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
              "loom: alltoall needs ", size_, " input and output tensors (got ", inputs.size(), " and ", outputs.size(), ")");
  Exchange x;
  std::vector<std::function<void()>> after;
  std::vector<at::Tensor> keep = outputs;
  size_t bytes = 0;
  for (int p = 0; p < size_; ++p) {
    checkSame(inputs[p], inputs[0], "an alltoall input");
    checkSame(outputs[p], inputs[0], "an alltoall output");
    x.sends.push_back(inputs[p].contiguous());
    x.recvs.push_back(writable(outputs[p], after));
    keep.push_back(x.sends.back());
    keep.push_back(x.recvs.back());
    bytes += bytesOf(inputs[p]);
  }
  TORCH_CHECK(x.sends[rank_].numel() == x.recvs[rank_].numel(), "loom: alltoall input and output for this rank differ "
              "in size");
  x.recvs[rank_].copy_(x.sends[rank_].view_as(x.recvs[rank_]));
  return launch(OpType::ALLTOALL, outputs, bytes, [this, x](loomStream_t s) { return issueExchange(x, s); },
                inOrder(std::move(after)), keep);
}

WorkPtr LoomBackend::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                            const c10d::GatherOptions& opts) {
  at::Tensor& input = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "loom: gather root ", root, " out of range [0, ", size_, ")");
  Exchange x;
  x.sends.resize(size_);
  x.recvs.resize(size_);
  std::vector<std::function<void()>> after;
  std::vector<at::Tensor> keep, results;
  at::Tensor in = input.contiguous();
  keep.push_back(in);
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_), "loom: gather's root needs one "
                "list of ", size_, " output tensors");
    for (int p = 0; p < size_; ++p) {
      checkSame(outputs[0][p], input, "a gather output");
      TORCH_CHECK(outputs[0][p].numel() == input.numel(), "loom: gather outputs must have the input's size");
      x.recvs[p] = writable(outputs[0][p], after);
      keep.push_back(x.recvs[p]);
    }
    x.recvs[root].copy_(in.view_as(x.recvs[root]));
    results = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "loom: only gather's root takes output tensors");
    x.sends[root] = in;
  }
  return launch(OpType::GATHER, results, bytesOf(in) * (rank_ == root ? size_ : 1),
                [this, x](loomStream_t s) { return issueExchange(x, s); }, inOrder(std::move(after)), keep);
}

WorkPtr LoomBackend::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                             const c10d::ScatterOptions& opts) {
  at::Tensor& output = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "loom: scatter root ", root, " out of range [0, ", size_, ")");
  Exchange x;
  x.sends.resize(size_);
  x.recvs.resize(size_);
  std::vector<std::function<void()>> after;
  at::Tensor out = writable(output, after);
  std::vector<at::Tensor> keep{out, output};
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_), "loom: scatter's root needs one "
                "list of ", size_, " input tensors");
    for (int p = 0; p < size_; ++p) {
      checkSame(inputs[0][p], output, "a scatter input");
      TORCH_CHECK(inputs[0][p].numel() == output.numel(), "loom: scatter inputs must have the output's size");
      x.sends[p] = inputs[0][p].contiguous();
      keep.push_back(x.sends[p]);
    }
    out.copy_(x.sends[root].view_as(out));
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "loom: only scatter's root takes input tensors");
    x.recvs[root] = out;
  }
  return launch(OpType::SCATTER, outputs, bytesOf(out) * (rank_ == root ? size_ : 1),
                [this, x](loomStream_t s) { return issueExchange(x, s); }, inOrder(std::move(after)), keep);
}

// Tags are not matched: between two ranks, sends and receives pair up in the order they were issued.
WorkPtr LoomBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int) {
  at::Tensor in = single(tensors, "send").contiguous();
  const loomDataType_t type = loomType(in.scalar_type());
  loomComm_t comm = comm_;
  return launch(OpType::SEND, tensors, bytesOf(in), [=](loomStream_t s) {
    return loomSend(in.data_ptr(), in.numel(), type, dstRank, comm, s);
  }, nullptr, {in});
}

WorkPtr LoomBackend::receive(OpType type, std::vector<at::Tensor>& tensors, PostReceive post) {
  at::Tensor& t = single(tensors, "recv");
  std::vector<std::function<void()>> after;
  at::Tensor buf = writable(t, after);
  const loomDataType_t dtype = loomType(t.scalar_type());
  return launch(type, tensors, bytesOf(buf), [=](loomStream_t s) { return post(buf.data_ptr(), buf.numel(), dtype, s); },
                inOrder(std::move(after)), {buf, t});
}

WorkPtr LoomBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int) {
  loomComm_t comm = comm_;
  return receive(OpType::RECV, tensors, [=](void* buf, size_t count, loomDataType_t type, loomStream_t s) {
    return loomRecv(buf, count, type, srcRank, comm, s);
  });
}

WorkPtr LoomBackend::recvAnysource(std::vector<at::Tensor>& tensors, int) {
  TORCH_CHECK(tensors.size() != 1 || !tensors[0].defined() || tensors[0].device().is_cpu(),
              "loom: a receive from any source takes a CPU tensor");
  loomComm_t comm = comm_;
  auto source = std::make_shared<int>(-1);
  WorkPtr work = receive(OpType::RECVANYSOURCE, tensors, [=](void* buf, size_t count, loomDataType_t type,
                                                             loomStream_t s) {
    return loomRecvAnySource(buf, count, type, source.get(), comm, s);
  });
  static_cast<LoomWork*>(work.get())->setSource(source);  // read only after the Work completed
  return work;
}

// One byte through an allreduce; on the caller's thread, after everything issued before it.
WorkPtr LoomBackend::barrier(const c10d::BarrierOptions&) {
  at::Tensor flag = at::zeros({1}, at::kByte);
  loomComm_t comm = comm_;
  return launch(OpType::BARRIER, {}, 0, [=](loomStream_t s) {
    return loomAllReduce(flag.data_ptr(), flag.data_ptr(), 1, loomUint8, loomMax, comm, s);
  }, nullptr, {flag});
}

}  // namespace loom_torch
