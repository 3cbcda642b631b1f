"""Every op of the loom backend against the gloo backend's result on the same inputs (or, where gloo has
no such op, against the result computed here), then the Work API, subgroups, timeouts and bad input."""
import datetime
import time

import pytest
import torch
import torch.distributed as dist

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64]
# Below and above the size that runs on the caller's thread (LOOM_TORCH_INLINE_BYTES, 64 KiB).
COUNTS = [1, 7, 1023, 300_003]


def data(count, dtype, rank, salt=0):
    """Inputs that differ by rank, exact in every dtype (small integers)."""
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randint(-4, 5, (count,), generator=g).to(dtype)


def same(loom_result, gloo_result):
    if loom_result.dtype.is_floating_point:
        torch.testing.assert_close(loom_result, gloo_result, rtol=1e-6, atol=1e-6)
    else:
        assert torch.equal(loom_result, gloo_result)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("op", [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT])
def test_all_reduce(groups, rank, dtype, count, op):
    loom, gloo = groups
    if op == dist.ReduceOp.PRODUCT:  # keep products small: values in {1, 2}
        a = data(count, dtype, rank).abs().clamp(1, 2)
    else:
        a = data(count, dtype, rank)
    b = a.clone()
    dist.all_reduce(a, op=op, group=loom)
    dist.all_reduce(b, op=op, group=gloo)
    same(a, b)


def test_all_reduce_non_contiguous_and_bool(groups, rank, world):
    loom, gloo = groups
    a = data(64, torch.float32, rank).reshape(8, 8).t()  # a transposed view: not contiguous
    b = a.clone()
    dist.all_reduce(a, group=loom)
    dist.all_reduce(b, group=gloo)
    same(a, b)
    flags = torch.tensor([rank == 0, True, False])
    dist.all_reduce(flags, op=dist.ReduceOp.SUM, group=loom)  # "or"
    assert flags.tolist() == [True, True, False]
    avg = torch.full((5,), float(rank))
    dist.all_reduce(avg, op=dist.ReduceOp.AVG, group=loom)  # gloo has no AVG
    assert avg.tolist() == [sum(range(world)) / world] * 5


@pytest.mark.parametrize("count", [5, 100_000])
def test_all_reduce_coalesced(groups, rank, count):
    loom, gloo = groups
    xs = [data(count + i, torch.float32, rank, salt=i) for i in range(3)]
    ys = [x.clone() for x in xs]
    dist.all_reduce_coalesced(xs, group=loom)
    dist.all_reduce_coalesced(ys, group=gloo)
    for x, y in zip(xs, ys):
        same(x, y)


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("root", ["first", "last"])
def test_broadcast_and_reduce(groups, rank, world, count, root):
    loom, gloo = groups
    src = 0 if root == "first" else world - 1
    a = data(count, torch.float64, rank)
    b = a.clone()
    dist.broadcast(a, src=src, group=loom)
    dist.broadcast(b, src=src, group=gloo)
    same(a, b)
    a = data(count, torch.int64, rank)
    b = a.clone()
    dist.reduce(a, dst=src, group=loom)
    dist.reduce(b, dst=src, group=gloo)
    if rank == src:
        same(a, b)


@pytest.mark.parametrize("count", COUNTS)
def test_all_gather(groups, rank, world, count):
    loom, gloo = groups
    x = data(count, torch.float32, rank)
    outs = [torch.zeros(count) for _ in range(world)]
    ref = [torch.zeros(count) for _ in range(world)]
    dist.all_gather(outs, x, group=loom)
    dist.all_gather(ref, x, group=gloo)
    for o, r in zip(outs, ref):
        same(o, r)
    flat = torch.zeros(world * count)
    flat_ref = torch.zeros(world * count)
    dist.all_gather_into_tensor(flat, x, group=loom)
    dist.all_gather_into_tensor(flat_ref, x, group=gloo)
    same(flat, flat_ref)


@pytest.mark.parametrize("count", COUNTS)
def test_reduce_scatter(groups, rank, world, count):
    loom, _ = groups
    ins = [data(count, torch.int32, rank, salt=p) for p in range(world)]
    out = torch.zeros(count, dtype=torch.int32)
    dist.reduce_scatter(out, ins, group=loom)
    # gloo's reduce_scatter is not available on CPU in this torch: the reference is summed here.
    expected = sum(data(count, torch.int32, r, salt=rank) for r in range(world))
    same(out, expected)
    whole = torch.cat([data(count, torch.float64, rank, salt=p) for p in range(world)])
    out = torch.zeros(count, dtype=torch.float64)
    dist.reduce_scatter_tensor(out, whole, group=loom)
    same(out, sum(data(count, torch.float64, r, salt=rank) for r in range(world)))


@pytest.mark.parametrize("count", [3, 40_000])
def test_all_to_all(groups, rank, world, count):
    loom, gloo = groups
    x = data(world * count, torch.float32, rank)
    a, b = torch.zeros_like(x), torch.zeros_like(x)
    dist.all_to_all_single(a, x, group=loom)
    dist.all_to_all_single(b, x, group=gloo)
    same(a, b)
    # Uneven: rank r sends p + 1 rows of 2 to rank p.
    rows_in = [p + 1 for p in range(world)]
    rows_out = [rank + 1] * world
    x = data(sum(rows_in) * 2, torch.int64, rank).reshape(-1, 2)
    a = torch.zeros(sum(rows_out), 2, dtype=torch.int64)
    b = torch.zeros_like(a)
    dist.all_to_all_single(a, x, rows_out, rows_in, group=loom)
    dist.all_to_all_single(b, x, rows_out, rows_in, group=gloo)
    same(a, b)
    # gloo has no list all_to_all on CPU: block p of rank r is made here as data(.., r, salt=p).
    ins = [data(count, torch.float64, rank, salt=p) for p in range(world)]
    outs = [torch.zeros(count, dtype=torch.float64) for _ in range(world)]
    dist.all_to_all(outs, ins, group=loom)
    for p in range(world):
        same(outs[p], data(count, torch.float64, p, salt=rank))


def test_gather_and_scatter(groups, rank, world):
    loom, _ = groups
    x = data(1000, torch.float32, rank)
    outs = [torch.zeros(1000) for _ in range(world)] if rank == 0 else None
    dist.gather(x, outs, dst=0, group=loom)
    if rank == 0:
        for p in range(world):
            same(outs[p], data(1000, torch.float32, p))
    src = world - 1
    pieces = [data(500, torch.float32, src, salt=p) for p in range(world)] if rank == src else None
    got = torch.zeros(500)
    dist.scatter(got, pieces, src=src, group=loom)
    same(got, data(500, torch.float32, src, salt=rank))


@pytest.mark.parametrize("count", [10, 200_000])
def test_send_recv_ring(groups, rank, world, count):
    loom, _ = groups
    right, left = (rank + 1) % world, (rank - 1) % world
    x = data(count, torch.float32, rank)
    got = torch.zeros(count)
    # Even ranks send first, odd ranks receive first: large sends wait for their receiver.
    if rank % 2 == 0:
        dist.send(x, right, group=loom)
        dist.recv(got, left, group=loom)
    else:
        dist.recv(got, left, group=loom)
        dist.send(x, right, group=loom)
    same(got, data(count, torch.float32, left))


def test_work_wait_is_completed_and_future(groups, rank, world):
    loom, _ = groups
    x = torch.ones(1 << 20)  # 4 MB: issued on a loom stream, completed by the completion thread
    work = dist.all_reduce(x, group=loom, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    assert work.wait()
    assert work.is_completed()
    assert x[0].item() == world
    assert fut.wait()[0].item() == 2 * world
    small = torch.ones(3)
    work = dist.all_reduce(small, group=loom, async_op=True)
    assert work.wait() and work.is_completed()
    assert small.tolist() == [world] * 3
    dist.barrier(group=loom)


def test_subgroups(groups, rank, world):
    first_two = dist.new_group(ranks=[0, 1], backend="loom")
    if rank in (0, 1):
        x = torch.full((100,), float(rank + 1))
        dist.all_reduce(x, group=first_two)
        assert x[0].item() == 3.0
    subgroup, all_subgroups = dist.new_subgroups(group_size=2 if world % 2 == 0 else world, backend="loom")
    y = torch.full((10,), float(rank))
    dist.all_reduce(y, group=subgroup)
    members = dist.get_process_group_ranks(subgroup)
    assert y[0].item() == float(sum(members))
    for g in all_subgroups:
        dist.destroy_process_group(g)
    dist.destroy_process_group(first_two) if rank in (0, 1) else None


def test_bad_input_raises(groups, rank, world):
    loom, _ = groups
    mixed = [torch.zeros(4, dtype=torch.float64) for _ in range(world)]
    with pytest.raises(ValueError, match="dtype"):  # torch's own check, before the backend
        dist.all_gather(mixed, torch.zeros(4), group=loom)
    backend = loom._get_backend(torch.device("cpu"))  # the backend's check, reached directly
    with pytest.raises(RuntimeError, match="dtype"):
        backend.allgather([mixed], [torch.zeros(4)])
    with pytest.raises(RuntimeError, match="elements"):
        backend.allgather([[torch.zeros(3) for _ in range(world)]], [torch.zeros(4)])
    with pytest.raises(RuntimeError, match="elements"):
        dist.all_gather_into_tensor(torch.zeros(3), torch.zeros(4), group=loom)
    with pytest.raises(RuntimeError, match="not supported"):
        dist.all_reduce(torch.zeros(4, dtype=torch.int16), group=loom)
    with pytest.raises(RuntimeError, match="not supported"):
        dist.all_reduce(torch.zeros(4, dtype=torch.int32), op=dist.ReduceOp.BAND, group=loom)
    with pytest.raises(RuntimeError, match="meta"):  # newer torch keeps meta tensors from backends: direct
        backend.allreduce([torch.zeros(4, device="meta")])
    dist.barrier(group=loom)  # the group is still healthy


def test_mismatched_sizes_across_ranks_raise(groups, rank):
    """Ranks that disagree on the count: loom reports the two calls, as a Python exception, on its own
    group (a failed loom communicator stays failed)."""
    bad = dist.new_group(backend="loom", timeout=datetime.timedelta(seconds=10))
    x = torch.zeros(100 + 100 * (rank % 2))
    with pytest.raises(dist.DistBackendError, match="loom"):
        dist.all_reduce(x, group=bad)
    dist.destroy_process_group(bad)


def test_timeout_comes_from_init(groups, rank):
    """A group made with a 3 s timeout: rank 0 calls a collective nobody else joins and gets an error
    after about 3 s, not the default 30 minutes, and not a hang."""
    short = dist.new_group(backend="loom", timeout=datetime.timedelta(seconds=3))
    if rank == 0:
        t0 = time.monotonic()
        with pytest.raises(dist.DistBackendError, match="(?i)timeout|waiting"):
            dist.all_reduce(torch.ones(4), group=short)
        took = time.monotonic() - t0
        assert 2.0 < took < 10.0, took
    dist.barrier(group=groups[1])  # on gloo: the others wait here while rank 0 times out
    dist.destroy_process_group(short)


@pytest.mark.parametrize("count", [6, 50_000])
def test_coalesced_gather_and_scatter(groups, rank, world, count):
    """Several allgathers (reduce_scatters) into one tensor each, as one loom group."""
    loom, _ = groups
    ins = [data(count + i, torch.float32, rank, salt=i) for i in range(3)]
    outs = [torch.zeros(world * (count + i)) for i in range(3)]
    loom.allgather_into_tensor_coalesced(outs, ins).wait()
    for i in range(3):
        same(outs[i], torch.cat([data(count + i, torch.float32, r, salt=i) for r in range(world)]))
    ins = [data(world * (count + i), torch.int64, rank, salt=i) for i in range(3)]
    outs = [torch.zeros(count + i, dtype=torch.int64) for i in range(3)]
    loom.reduce_scatter_tensor_coalesced(outs, ins).wait()
    for i in range(3):
        n = count + i
        same(outs[i], sum(data(world * n, torch.int64, r, salt=i)[rank * n:(rank + 1) * n] for r in range(world)))
