"""The rest of the c10d surface a current backend has: receive from any source, allgather_coalesced,
coalescing (torch's _coalescing_manager), the "cpu:loom" backend string, and split_group where the
installed torch has it.  Each checked element by element against gloo or against the known result."""
import pytest
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from test_collectives import data, same


@pytest.mark.parametrize("count", [3, 100_000])  # on the caller's thread, and on a loom stream
def test_recv_from_any_source(groups, rank, world, count):
    loom, _ = groups
    if rank == 0:
        seen = []
        for _ in range(world - 1):
            t = torch.full((count,), -1.0)
            src = dist.recv(t, src=None, group=loom)  # returns the sender's rank
            assert 0 < src < world
            assert torch.equal(t, torch.arange(count, dtype=torch.float32) + 1000 * src), f"from rank {src}"
            seen.append(src)
        assert sorted(seen) == list(range(1, world))
    else:
        dist.send(torch.arange(count, dtype=torch.float32) + 1000 * rank, dst=0, group=loom)
    dist.barrier(group=loom)


def test_recv_from_any_source_async_work_says_the_source(groups, rank, world):
    loom, _ = groups
    if rank == 1:
        dist.send(torch.full((10,), 7), dst=0, group=loom)
    elif rank == 0:
        t = torch.zeros(10, dtype=torch.int64)
        work = dist.irecv(t, src=None, group=loom)
        work.wait()
        assert work._source_rank() == 1
        assert t.tolist() == [7] * 10
    dist.barrier(group=loom)


@pytest.mark.parametrize("count", [5, 50_000])
def test_all_gather_coalesced(groups, rank, world, count):
    loom, gloo = groups
    inputs = [data(count, torch.float32, rank, salt=1), data(count + 2, torch.float32, rank, salt=2)]
    # output_lists[r][i]: rank r's input i
    out_loom = [[torch.empty_like(t) for t in inputs] for _ in range(world)]
    out_gloo = [[torch.empty_like(t) for t in inputs] for _ in range(world)]
    dist.all_gather_coalesced(out_loom, inputs, group=loom)
    dist.all_gather_coalesced(out_gloo, inputs, group=gloo)
    for a, b in zip(out_loom, out_gloo):
        for x, y in zip(a, b):
            same(x, y)


@pytest.mark.parametrize("async_ops", [False, True])
def test_coalescing_manager(groups, rank, world, async_ops):
    loom, gloo = groups
    tensors = [data(n, torch.float32, rank, salt=n) for n in (3, 1000, 70_000)]
    expected = [t.clone() for t in tensors]
    for t in expected:
        dist.all_reduce(t, group=gloo)
    with c10d._coalescing_manager(group=loom, device=torch.device("cpu"), async_ops=async_ops) as cm:
        for t in tensors:
            dist.all_reduce(t, group=loom)
    if async_ops:
        cm.wait()
    for a, b in zip(tensors, expected):
        same(a, b)


def test_backend_string_with_device(groups, rank, world):
    """"cpu:loom" names loom for CPU tensors, as "cpu:gloo,cuda:nccl" does for a mix."""
    pg = dist.new_group(backend="cpu:loom")
    t = torch.full((100,), float(rank + 1))
    dist.all_reduce(t, group=pg)
    assert t.tolist() == [world * (world + 1) / 2] * 100
    assert "loom" in str(dist.get_backend(pg))
    dist.destroy_process_group(pg)


@pytest.mark.skipif(not hasattr(dist, "split_group"), reason="this torch has no split_group")
def test_split_group(groups, rank, world):
    loom, _ = groups
    halves = [[r for r in range(world) if r % 2 == 0], [r for r in range(world) if r % 2 == 1]]
    halves = [h for h in halves if h]
    child = dist.split_group(parent_pg=loom, split_ranks=halves)
    mine = next(h for h in halves if rank in h)
    t = torch.full((1000,), float(rank))
    dist.all_reduce(t, group=child)
    assert t.tolist() == [float(sum(mine))] * 1000
    dist.destroy_process_group(child)
