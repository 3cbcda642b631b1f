#!/usr/bin/env python3
"""Elastic training through loom: 4 CPU processes train a small model with DistributedDataParallel;
rank 2 dies (SIGKILL) at step 20.  Every survivor sees the failure as a DistBackendError, shrinks the
group without it (loom_torch.shrink: torch.distributed.shrink_group, loomCommShrink underneath),
restores the state it
saved after the last completed step and trains 50 more steps.  The same 50 steps are then run by a
fresh 3-process job (gloo) from that saved state, with the same data per rank: the parameters must
agree (float32, different summation orders: rtol 1e-5, atol 1e-6).

The ranks are started by this script, not by torchrun: torchrun stops every worker when one dies.

    python3 elastic_shrink.py            # prints what each survivor saw and the comparison
"""
import datetime
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

WORLD, VICTIM, DEATH_STEP, AFTER_STEPS = 4, 2, 20, 50


def model_and_optimizer(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def batch(torch, step, data_rank):
    """The batch of `data_rank` (a rank of the original job) at `step`: the same in both runs."""
    g = torch.Generator().manual_seed(1000 * step + data_rank)
    return torch.randn(16, 20, generator=g), torch.randn(16, 4, generator=g)


def train_step(torch, ddp, opt, step, data_rank):
    x, y = batch(torch, step, data_rank)
    opt.zero_grad()
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    opt.step()


def elastic_rank(rank, out):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import loom_torch

    dist.init_process_group("loom", rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=20))
    model, opt = model_and_optimizer(torch)
    ddp = DDP(model)
    saved, step = None, 0
    while step < DEATH_STEP + AFTER_STEPS:
        if rank == VICTIM and step == DEATH_STEP:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            train_step(torch, ddp, opt, step, rank)
            saved = ({k: v.clone() for k, v in model.state_dict().items()},
                     {"state": {k: {n: t.clone() for n, t in s.items()} for k, s in opt.state_dict()["state"].items()},
                      "param_groups": opt.state_dict()["param_groups"]}, step + 1)
            step += 1
        except dist.DistBackendError as e:
            t0 = time.monotonic()
            dead = loom_torch.failed_rank()
            assert dead == VICTIM, f"loom blames rank {dead}, not rank {VICTIM}"
            loom_torch.shrink([dead])  # the survivors' group, the new default group
            model.load_state_dict(saved[0])
            opt.load_state_dict(saved[1])
            step = saved[2]
            ddp = DDP(model)  # over the shrunk default group
            with open(out, "a") as f:
                f.write(f"rank {rank}: caught DistBackendError at step {step} ({str(e)[:120]!r}); shrank to "
                        f"{dist.get_world_size()} ranks in {time.monotonic() - t0:.3f} s, new rank {dist.get_rank()}\n")
            if dist.get_rank() == 0:  # the state the reference job starts from (the same on every survivor)
                torch.save({"model": saved[0], "opt": saved[1], "step": step}, out + ".state")
    torch.save([p.detach() for p in model.parameters()], f"{out}.{rank}.params")
    dist.destroy_process_group()


def reference_rank(rank, out, old_ranks):
    """A fresh 3-process job (gloo) from the saved state, each rank on its old rank's data."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", rank=rank, world_size=len(old_ranks), timeout=datetime.timedelta(seconds=60))
    model, opt = model_and_optimizer(torch)
    state = torch.load(out + ".state")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    ddp = DDP(model)
    for step in range(state["step"], DEATH_STEP + AFTER_STEPS):
        train_step(torch, ddp, opt, step, old_ranks[rank])
    torch.save([p.detach() for p in model.parameters()], f"{out}.ref{old_ranks[rank]}.params")
    dist.destroy_process_group()


def launch(mode, n, out):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, __file__, mode, str(r), out], env=env) for r in range(n)]
    return [p.wait(timeout=300) for p in procs]


def main():
    if len(sys.argv) == 4:
        mode, rank, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        if mode == "elastic":
            elastic_rank(rank, out)
        else:
            reference_rank(rank, out, [r for r in range(WORLD) if r != VICTIM])
        return 0
    import torch
    with tempfile.TemporaryDirectory(prefix="loom-elastic-") as d:
        out = os.path.join(d, "log")
        codes = launch("elastic", WORLD, out)
        print(open(out).read() if os.path.exists(out) else "(no survivor wrote)", end="")
        survivors = [r for r in range(WORLD) if r != VICTIM]
        if codes[VICTIM] != -signal.SIGKILL or any(codes[r] != 0 for r in survivors):
            print(f"FAIL: exit codes {codes} (the victim must die by SIGKILL, the survivors end with 0)")
            return 1
        if launch("reference", len(survivors), out) != [0] * len(survivors):
            print("FAIL: the reference job failed")
            return 1
        for r in survivors:
            mine = torch.load(f"{out}.{r}.params")
            ref = torch.load(f"{out}.ref{r}.params")
            for a, b in zip(mine, ref):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        print(f"ok: {len(survivors)} survivors shrank after rank {VICTIM} died at step {DEATH_STEP} and, "
              f"{AFTER_STEPS} steps on, hold the parameters of a fresh {len(survivors)}-rank job from the same state")
    return 0


if __name__ == "__main__":
    sys.exit(main())
