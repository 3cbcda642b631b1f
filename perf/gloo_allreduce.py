#!/usr/bin/env python3
"""Gloo's allreduce (PyTorch's gloo backend) timed the way the loom perf tools time theirs: float32 sum,
warm-up, then the mean of ITERS calls; rank 0 prints one line per size with busbw = algbw * 2(n-1)/n.
Launched once per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (perf/netns_bench.sh).

usage: gloo_allreduce.py SIZE_BYTES [SIZE_BYTES ...]
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    iters = int(os.environ.get("ITERS", "20"))
    for size in (int(s) for s in sys.argv[1:]):
        x = torch.ones(size // 4, dtype=torch.float32)
        for _ in range(3):
            dist.all_reduce(x)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        us = (time.perf_counter() - t0) / iters * 1e6
        if rank == 0:
            algbw = size / us / 1e3
            print(f"gloo allreduce {size} bytes: {us:.1f} us, algbw {algbw:.3f} GB/s, "
                  f"busbw {algbw * 2 * (n - 1) / n:.3f} GB/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
