"""A small model trained with DistributedDataParallel for 50 steps over the loom backend ends with the
same parameters as the same training over gloo.  Each rank trains on its own batches; DDP averages the
gradients through the backend (its default comm hook: allreduce, then the future divides by the world
size).  The two runs sum the same gradients in different orders, so the parameters agree to rounding:
rtol 1e-5, atol 1e-6 after 50 steps (float32)."""
import os

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(group, rank, steps=50):
    torch.manual_seed(0)  # the same initial parameters on every rank and for both backends
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 4))
    # A small bucket cap splits the gradients into several allreduces, some issued while backward runs.
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(32, 20, generator=data)
        y = torch.randn(32, 4, generator=data)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("path", ["inline", "stream"])
def test_ddp_matches_gloo(groups, rank, path):
    """inline: the default group, whose small buckets run on the caller's thread.  stream: a group made
    with LOOM_TORCH_INLINE_BYTES=0, so every bucket goes through a loom stream, the completion thread and
    the Work's future (DDP's comm hook chains on it)."""
    _, gloo = groups
    if path == "stream":
        os.environ["LOOM_TORCH_INLINE_BYTES"] = "0"
        loom = dist.new_group(backend="loom")
        del os.environ["LOOM_TORCH_INLINE_BYTES"]
    else:
        loom = groups[0]
    with_loom = train(loom, rank)
    with_gloo = train(gloo, rank)
    for a, b in zip(with_loom, with_gloo):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # And the ranks agree with each other (DDP kept them in step).
    flat = torch.cat([p.reshape(-1) for p in with_loom])
    first = flat.clone()
    dist.broadcast(first, src=0, group=loom)
    assert torch.equal(flat, first)
    if path == "stream":
        dist.destroy_process_group(loom)
