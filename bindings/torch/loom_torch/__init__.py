"""loom as a torch.distributed backend.

    import torch.distributed as dist, loom_torch
    dist.init_process_group("loom")           # env:// (torchrun), or init_method/store as usual
    dist.all_reduce(torch.ones(4))

Importing this package registers the backend name "loom" for CPU tensors.
"""
import torch.distributed as _dist

from . import _C

__all__ = ["create_backend"]

create_backend = _C.create_backend

if "loom" not in _dist.Backend.backend_list:
    _dist.Backend.register_backend("loom", _C.create_backend, devices=["cpu"])
