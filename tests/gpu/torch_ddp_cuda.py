"""A DDP training step on CUDA tensors, through loom and through NCCL, in one run (tests/gpu/run.sh).

usage: python3 tests/gpu/torch_ddp_cuda.py [--ranks N] [--steps 30]   (needs loom_torch importable)
Spawns N processes per backend (NCCL: at most one per GPU; loom may put several on one GPU), trains the
same model from the same seed for --steps steps, and prints the median step time of each and whether the
two ended with the same parameters (rtol 1e-4: the reductions may add in another order).  Exit status 0
when both ran and agree.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def train(rank, world, backend, steps, init_file, out):
    if backend == "loom":
        import loom_torch  # noqa: F401  (registers "loom")
    gpus = torch.cuda.device_count()
    torch.cuda.set_device(rank % gpus)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank % gpus])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator(device="cuda").manual_seed(1 + rank)
    times = []
    for _ in range(steps):
        x = torch.randn(64, 1024, device="cuda", generator=gen)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        flat = torch.cat([p.detach().flatten().cpu() for p in model.parameters()])
        torch.save({"median_ms": statistics.median(times[5:]) * 1e3, "params": flat}, out)
    dist.destroy_process_group()


def run(backend, world, steps):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result.pt")
        mp.spawn(train, args=(world, backend, steps, os.path.join(d, "init"), out), nprocs=world, join=True)
        return torch.load(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=0, help="processes per backend (default: one per GPU, at least 2 "
                    "for loom)")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    gpus = torch.cuda.device_count()
    if gpus == 0:
        print("torch_ddp_cuda: no GPU visible")
        return 1
    results = {}
    nccl_world = args.ranks if args.ranks and args.ranks <= gpus else gpus
    results["nccl"] = run("nccl", nccl_world, args.steps)
    print(f"nccl: {nccl_world} rank(s) on {gpus} GPU(s), median step {results['nccl']['median_ms']:.2f} ms")
    for world in sorted({nccl_world, args.ranks or max(2, gpus)}):
        results[f"loom{world}"] = run("loom", world, args.steps)
        print(f"loom: {world} rank(s) on {gpus} GPU(s), median step {results[f'loom{world}']['median_ms']:.2f} ms")
    same = torch.allclose(results["nccl"]["params"], results[f"loom{nccl_world}"]["params"], rtol=1e-4, atol=1e-6)
    print(f"loom and nccl at {nccl_world} rank(s) end with the same parameters: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
