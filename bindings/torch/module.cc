// The Python module loom_torch._C: the factory that torch.distributed calls to make a loom backend
// (registered by loom_torch/__init__.py), and what was built (loom_torch/info.py prints it).
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "backend.h"
#include "loom_build_config.h"

namespace {

pybind11::dict buildInfo() {
  int version = 0;
  loomGetVersion(&version);
  pybind11::dict d;
  d["loom_version"] = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
                      std::to_string(version % 100);
  d["built_against_torch"] = LOOM_TORCH_BUILT_AGAINST;
  d["build_type"] = LOOM_BUILD_TYPE;
  d["cuda"] = static_cast<bool>(LOOM_HAVE_CUDA);
#ifdef LOOM_TORCH_CUDA
  d["cuda_tensors"] = true;  // the backend is registered for "cuda" too
#else
  d["cuda_tensors"] = false;
#endif
  d["ucx"] = static_cast<bool>(LOOM_HAVE_UCX);
  d["verbs"] = static_cast<bool>(LOOM_HAVE_VERBS);
  d["hwloc"] = static_cast<bool>(LOOM_HAVE_HWLOC);
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "loom collectives as a torch.distributed backend";
  m.def("create_backend", &loom_torch::LoomBackend::create, pybind11::arg("store"), pybind11::arg("rank"),
        pybind11::arg("size"), pybind11::arg("timeout"),
        "Makes the loom backend of one process group (called by torch.distributed, not by users).");
  m.def("build_info", &buildInfo, "What this build of loom_torch has: versions and optional parts.");
  m.def(
      "failed_rank",
      [](const c10::intrusive_ptr<c10d::Backend>& backend) {
        const auto* loom = dynamic_cast<const loom_torch::LoomBackend*>(backend.get());
        TORCH_CHECK(loom != nullptr, "loom_torch.failed_rank: the group's CPU backend is not loom's");
        return loom->failedRank();
      },
      pybind11::arg("backend"), "The rank a loom group blames for its failure, -1 if none (loom_torch.failed_rank).");
}
