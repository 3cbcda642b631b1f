"""python -m loom_torch.info: the versions in use and what this build of loom_torch has.

Exits non-zero when the torch imported now is not the one loom_torch was built against (a C++
extension must be rebuilt for another torch: pip install --no-build-isolation bindings/torch).
"""
import sys

import torch

from . import _C


def main():
    info = _C.build_info()
    print(f"loom {info['loom_version']} ({info['build_type']} build)")
    print(f"torch {torch.__version__} imported; loom_torch built against torch {info['built_against_torch']}")
    parts = ", ".join(f"{name} {'yes' if info[name] else 'no'}" for name in ("cuda", "ucx", "verbs", "hwloc"))
    print(f"optional parts: {parts}")
    if info["cuda_tensors"]:
        print("backend: \"loom\" for CPU and CUDA tensors (init_process_group(\"loom\"); CUDA calls run on the "
              "current CUDA stream)")
    else:
        print("backend: \"loom\" for CPU tensors (init_process_group(\"loom\") or \"cpu:loom,cuda:nccl\")")
    if info["built_against_torch"] != torch.__version__:
        print("error: torch changed since loom_torch was built; rebuild it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
