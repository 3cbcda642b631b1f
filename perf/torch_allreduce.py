#!/usr/bin/env python3
"""torch.distributed.all_reduce through the loom backend against the gloo backend, in the same run and
the same processes: float32 sum, for each size alternating loom and gloo REPEATS times (each a warm-up
then ITERS timed calls), reporting medians.  busbw = algbw * 2(n-1)/n as nccl-tests defines it.

    PYTHONPATH=build/python torchrun --standalone --nproc-per-node 2 perf/torch_allreduce.py
    ... perf/torch_allreduce.py --min 4K --max 64M --repeats 5
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import loom_torch  # noqa: F401


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def timed(group, x, iters):
    for _ in range(3):
        dist.all_reduce(x, group=group)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x, group=group)
    return (time.perf_counter() - t0) / iters * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--min", default="4K", help="smallest size in bytes (suffix K/M/G), default 4K")
    p.add_argument("--max", default="64M", help="largest size, default 64M")
    p.add_argument("--factor", type=int, default=4, help="size step factor, default 4")
    p.add_argument("--repeats", type=int, default=5, help="alternations per size (median), default 5")
    p.add_argument("--budget", type=float, default=0.3, help="seconds per timed run, to choose ITERS, default 0.3")
    args = p.parse_args()
    dist.init_process_group("loom")
    gloo = dist.new_group(backend="gloo")
    loom = dist.group.WORLD
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"# torch {torch.__version__}, {n} ranks, float32 sum, median of {args.repeats} alternating runs")
        print(f"# {'bytes':>10} {'loom us':>10} {'gloo us':>10} {'loom busbw':>11} {'gloo busbw':>11} {'speedup':>8}")
    size = parse_size(args.min)
    while size <= parse_size(args.max):
        x = torch.ones(size // 4)
        # ITERS from a probe on gloo (the slower), the same on every rank.
        probe = torch.tensor([timed(gloo, x, 2)])
        dist.all_reduce(probe, op=dist.ReduceOp.MAX, group=gloo)
        iters = max(5, min(2000, int(args.budget * 1e6 / probe.item())))
        loom_us, gloo_us = [], []
        for _ in range(args.repeats):
            loom_us.append(timed(loom, x, iters))
            gloo_us.append(timed(gloo, x, iters))
        lu, gu = statistics.median(loom_us), statistics.median(gloo_us)
        bus = lambda us: size / us / 1e3 * 2 * (n - 1) / n  # GB/s
        if rank == 0:
            print(f"  {size:>10} {lu:>10.1f} {gu:>10.1f} {bus(lu):>11.2f} {bus(gu):>11.2f} {gu / lu:>7.1f}x", flush=True)
        size *= args.factor
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
