// The Python module loom_torch._C: the factory that torch.distributed calls to make a loom backend
// (registered by loom_torch/__init__.py).
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "backend.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "loom collectives as a torch.distributed backend";
  m.def("create_backend", &loom_torch::LoomBackend::create, pybind11::arg("store"), pybind11::arg("rank"),
        pybind11::arg("size"), pybind11::arg("timeout"),
        "Makes the loom backend of one process group (called by torch.distributed, not by users).");
}
