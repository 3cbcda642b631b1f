#!/usr/bin/env python3
"""Gloo's collectives (PyTorch's gloo backend) timed the way loom's perf tools time theirs: float32 (sum
where the collective reduces), warm-up calls, then the mean of the timed calls on each rank, averaged
over ranks; sizes and busbw as nccl-tests defines them (the size is the larger of the send and receive
buffers; busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for allgather, reducescatter and alltoall, 1 for
broadcast).  Launched once per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set
(perf/report.py, perf/netns_bench.sh); rank 0 prints one line per point and, with --json, writes them
(with the CPU seconds of all ranks per GB, cpu_s_per_gb, as the perf tools report it).

usage: gloo_bench.py [--collectives all_reduce ...] [--json FILE] [--] SIZE[:ITERS] [SIZE[:ITERS] ...]
(the -- ends the list of collectives when the sizes follow it)
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist

BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "alltoall": lambda n: (n - 1) / n,
}


def make_call(name, size, n):
    """The call for one collective on a message of `size` bytes, or None when it carries no element.
    Sizes are rounded down as the perf tools round them: to whole elements, and for the collectives that
    split the buffer, to a whole number of elements per rank."""
    total = size // 4 // n * n if name != "all_reduce" and name != "broadcast" else size // 4
    if total == 0:
        return None
    if name == "all_reduce":
        x = torch.ones(total)
        return lambda: dist.all_reduce(x)
    if name == "broadcast":
        x = torch.ones(total)
        return lambda: dist.broadcast(x, 0)
    if name == "all_gather":
        out, part = torch.empty(total), torch.ones(total // n)
        return lambda: dist.all_gather_into_tensor(out, part)
    if name == "reduce_scatter":
        inp, part = torch.ones(total), torch.empty(total // n)
        return lambda: dist.reduce_scatter_tensor(part, inp)
    if name == "alltoall":
        inp, out = torch.ones(total), torch.empty(total)
        return lambda: dist.all_to_all_single(out, inp)
    raise ValueError(name)


def cpu_seconds():
    """User + system time of this process, every thread (gloo's own threads too), as the perf tools
    measure it (getrusage)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collectives", nargs="+", default=list(BUS_FACTOR), choices=list(BUS_FACTOR))
    p.add_argument("--warmup", type=int, default=2, help="untimed calls per point (default 2)")
    p.add_argument("--json", help="rank 0 writes the points here")
    p.add_argument("points", nargs="+", help="SIZE in bytes, optionally :ITERS (default 20)")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    results = []
    for name in args.collectives:
        for point in args.points:
            size, _, iters = point.partition(":")
            size, iters = int(size), int(iters or 20)
            call = make_call(name, size, n)
            if call is None:
                continue
            size = size // 4 // n * n * 4 if name not in ("all_reduce", "broadcast") else size // 4 * 4
            for _ in range(args.warmup):
                call()
            dist.barrier()
            cpu0 = cpu_seconds()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            # [time, CPU seconds] per call, summed over ranks (time is then averaged, CPU is a total).
            per_call = torch.tensor([(time.perf_counter() - t0) / iters * 1e6, (cpu_seconds() - cpu0) / iters],
                                    dtype=torch.float64)
            dist.all_reduce(per_call)
            us = per_call[0].item() / n
            algbw = size / us / 1e3
            results.append(dict(collective=name, bytes=size, time_us=us, algbw_gbs=algbw,
                                busbw_gbs=algbw * BUS_FACTOR[name](n),
                                cpu_s_per_gb=per_call[1].item() / (size / 1e9) if size else 0.0))
            if rank == 0:
                print(f"gloo {name} {size} bytes: {us:.1f} us, algbw {algbw:.3f} GB/s, "
                      f"busbw {results[-1]['busbw_gbs']:.3f} GB/s", flush=True)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(dict(backend="gloo", nranks=n, torch=torch.__version__, results=results), f, indent=1)
    # Every rank leaves together, and without destroy_process_group: torch 2.5's ~ProcessGroupGloo joins
    # its worker thread while holding the GIL, and that thread may be waiting for the GIL to drop the last
    # reference to a tensor (a deadlock seen here about one run in four).
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
