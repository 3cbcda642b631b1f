"""Prints, one `NAME=value` a line, how an extension must be built to load into the torch that this
Python imports: read from that torch, never assumed, so that one binding builds against torch 2.5 to 2.15.

  TORCH_VERSION        torch.__version__
  TORCH_LIB_DIR        the folder of libtorch*.so and libc10.so
  TORCH_INCLUDE_DIRS   |-separated, as torch.utils.cpp_extension gives them to extensions
  TORCH_CXX_STANDARD   the C++ standard torch's own CMake package requires of its users (17 for
                       torch 2.5, 20 for 2.15, whose ATen headers refuse anything older)
  TORCH_CXX11_ABI      0 or 1: the libstdc++ string ABI torch was built with
  TORCH_PYBIND11_DEFS  |-separated: the pybind11 ABI tags torch was built with, where that torch
                       still publishes them (torch._C._PYBIND11_*); empty where its pybind11 works the
                       ABI out itself.  They must match, or torch's Store is not the Store loom's module
                       takes.
  TORCH_CUDA           1 when this torch is a CUDA build with its libc10_cuda (the backend then takes CUDA
                       tensors, if loom is built with CUDA too), else 0
  TORCH_BACKEND_DEFS   |-separated: LOOM_TORCH_HAS_<NAME>=1 for each c10d::Backend method of
                       BACKEND_METHODS this torch declares (newer torch has more), so that the backend
                       overrides only what exists.

Run by bindings/torch/CMakeLists.txt with the Python it builds for.
"""
import os
import re
import sys


def cxx_standard(torch_dir):
    """The highest standard TorchConfig.cmake asks for (cxx_std_NN or CXX_STANDARD NN)."""
    config = os.path.join(torch_dir, "share", "cmake", "Torch", "TorchConfig.cmake")
    try:
        with open(config, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"loom_torch: cannot read torch's CMake package ({e}); is torch installed whole?")
    found = [int(a or b) for a, b in re.findall(r"cxx_std_(\d+)|CXX_STANDARD\s+(\d+)", text)]
    if not found:
        sys.exit(f"loom_torch: {config} names no C++ standard; this torch is newer than loom knows")
    return max(found)


# c10d::Backend methods that only newer torch declares, by the name they have in Backend.hpp.
BACKEND_METHODS = {"split": r"virtual\s+c10::intrusive_ptr<Backend>\s+split\s*\(",
                   "supportsCoalescing": r"virtual\s+bool\s+supportsCoalescing\s*\(",
                   "getBackendOptions": r"virtual\s+c10::intrusive_ptr<Options>\s+getBackendOptions\s*\(",
                   "shrink": r"virtual\s+c10::intrusive_ptr<Backend>\s+shrink\s*\("}


def backend_methods(torch_dir):
    header = os.path.join(torch_dir, "include", "torch", "csrc", "distributed", "c10d", "Backend.hpp")
    try:
        with open(header, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"loom_torch: cannot read {header} ({e}); is torch installed with its headers?")
    return [f"LOOM_TORCH_HAS_{name.upper()}=1" for name, pattern in BACKEND_METHODS.items() if re.search(pattern, text)]


def main():
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as e:
        sys.exit(f"loom_torch: torch is not importable by {sys.executable} ({e}). loom_torch builds against "
                 "the torch installed where it is installed: install torch first, then "
                 "`pip install --no-build-isolation bindings/torch`")
    torch_dir = os.path.dirname(torch.__file__)
    defs = []
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, f"_PYBIND11_{name}", None)
        if value:
            defs.append(f'PYBIND11_{name}="{value}"')
    print(f"TORCH_VERSION={torch.__version__}")
    print(f"TORCH_LIB_DIR={os.path.join(torch_dir, 'lib')}")
    print(f"TORCH_INCLUDE_DIRS={'|'.join(cpp_extension.include_paths())}")
    print(f"TORCH_CXX_STANDARD={cxx_standard(torch_dir)}")
    print(f"TORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
    print(f"TORCH_PYBIND11_DEFS={'|'.join(defs)}")
    print(f"TORCH_BACKEND_DEFS={'|'.join(backend_methods(torch_dir))}")
    has_cuda = torch.version.cuda is not None and os.path.exists(os.path.join(torch_dir, "lib", "libc10_cuda.so"))
    print(f"TORCH_CUDA={int(has_cuda)}")


if __name__ == "__main__":
    main()
