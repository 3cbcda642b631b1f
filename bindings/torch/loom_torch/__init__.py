"""loom as a torch.distributed backend.

    import torch.distributed as dist, loom_torch
    dist.init_process_group("loom")           # env:// (torchrun), or init_method/store as usual
    dist.all_reduce(torch.ones(4))

Importing this package registers the backend name "loom" for CPU tensors, and for CUDA tensors where
loom and torch are both CUDA builds (each call runs on the caller's current CUDA stream).  After a rank died,
loom_torch.shrink([loom_torch.failed_rank()]) makes a working group of the survivors (see their help).
"""
import torch as _torch
import torch.distributed as _dist

from . import _C

__all__ = ["create_backend", "failed_rank", "shrink"]

create_backend = _C.create_backend


def failed_rank(group=None):
    """The rank of `group` (default: the default group) that loom blames for the failure the group met:
    the one that died or failed first, as the survivors announce it to each other.  None while the group
    has lost no rank.  What to pass to shrink() after a DistBackendError."""
    pg = group if group is not None else _dist.distributed_c10d._get_default_group()
    rank = _C.failed_rank(pg._get_backend(_torch.device("cpu")))
    return None if rank < 0 else rank


def shrink(ranks_to_exclude, group=None, abort=True):
    """The ranks of `group` (default: the default group) not in `ranks_to_exclude` (ranks of that group,
    typically those that died) make a new group among themselves, also after a failure: loomCommShrink
    underneath, through the old group's connections, no new rendezvous.  abort=True first ends what is
    still in flight on the old group (torch's SHRINK_ABORT).  Only the survivors call it, all with the
    same list.  A shrunk default group becomes the new default group (torch destroys the other groups,
    whose ranks no longer exist); rebuild what held the old one (DistributedDataParallel, optimizers that
    keep a group).  Needs a torch with torch.distributed.shrink_group (2.10 and later).
    """
    if not hasattr(_dist, "shrink_group"):
        raise RuntimeError(f"loom_torch.shrink needs torch.distributed.shrink_group (torch 2.10 or later); this is "
                           f"torch {_torch.__version__}")
    from torch.distributed.distributed_c10d import SHRINK_ABORT, SHRINK_DEFAULT

    pg = _dist.shrink_group(list(ranks_to_exclude), group=group, shrink_flags=SHRINK_ABORT if abort else SHRINK_DEFAULT)
    # torch registers a shrunk CPU group's backend as Gloo; DistributedDataParallel's logger then takes
    # loom's backend for ProcessGroupGloo and crashes.  Register it as what it is: a custom backend.
    cpu = _torch.device("cpu")
    backend = pg._get_backend(cpu)
    for device in ["cpu", "cuda"] if _C.build_info()["cuda_tensors"] else ["cpu"]:  # one backend serves both
        pg._register_backend(_torch.device(device), _dist.ProcessGroup.BackendType.CUSTOM, backend)
    pg._set_default_backend(_dist.ProcessGroup.BackendType.CUSTOM)
    return pg

if "loom" not in _dist.Backend.backend_list:
    # CUDA tensors where loom and torch were both built with CUDA (they run on the caller's current stream).
    _dist.Backend.register_backend("loom", _C.create_backend,
                                   devices=["cpu", "cuda"] if _C.build_info()["cuda_tensors"] else ["cpu"])
