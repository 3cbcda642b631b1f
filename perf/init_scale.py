#!/usr/bin/env python3
"""Init at scale: time to a communicator and to its first allreduce, and memory per rank, against the
number of ranks, for loom (processes, and threads through loomCommInitAll), OpenMPI (MPI_Init + the first
MPI_Allreduce under mpirun) and Gloo (torch init_process_group + the first all_reduce), in one run.

usage: perf/init_scale.py [--build build] [--out docs/perf/init_scale] [--procs 8,64,256]
                          [--threads 8,64,256,1024] [--mpi-max 256] [--gloo-max 64]
Writes OUT.md (the table, the fitted exponents) and OUT.png (time and memory against n, log-log).
"init" is the slowest rank's, measured inside each rank from just before its init call; "job" is the
wall time from starting the first process to the last one's exit (process start-up included).  Memory
is each rank's peak resident set (getrusage; threads: the process's, divided by n).  Gloo stops at
--gloo-max: each rank is a Python process with torch loaded (~300 MB).
"""
import argparse
import math
import os
import resource  # noqa: F401  (the Gloo ranks import it)
import socket
import statistics
import subprocess
import sys
import tempfile
import time

GLOO_RANK = r"""
import os, resource, sys, time
t_import = time.perf_counter()
import torch, torch.distributed as dist
t0 = time.perf_counter()
dist.init_process_group("gloo", init_method=os.environ["INIT"], rank=int(os.environ["RANK"]),
                        world_size=int(os.environ["WORLD"]))
t1 = time.perf_counter()
x = torch.ones(1)
dist.all_reduce(x)
t2 = time.perf_counter()
assert x.item() == int(os.environ["WORLD"])
print(f"init_s {t1 - t0:.6f} first_s {t2 - t1:.6f} rss_kb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(line):
    f = line.split()
    return {"init": float(f[1]), "first": float(f[3]), "rss_kb": int(f[5])}


def gather(procs, what):
    rows = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"{what}: a rank failed ({p.returncode}): {err.strip()[-400:]}")
        rows.append(parse(out.strip().splitlines()[-1]))
    return rows


def loom_procs(build, n):
    env = dict(os.environ, LOOM_COMM_ID=f"127.0.0.1:{free_port()}", INIT_PROBE_NRANKS=str(n))
    t0 = time.perf_counter()
    procs = [subprocess.Popen([f"{build}/perf/init_probe", "loom"], env=dict(env, INIT_PROBE_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
    rows = gather(procs, f"loom {n} processes")
    return summary(rows, time.perf_counter() - t0)


def loom_threads(build, n):
    t0 = time.perf_counter()
    p = subprocess.run([f"{build}/perf/init_probe", "threads", str(n)], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"loom {n} threads: {p.stderr.strip()[-400:]}")
    r = parse(p.stdout.strip().splitlines()[-1])
    return {"init": r["init"], "first": r["first"], "rss_mb": r["rss_kb"] / 1024 / n, "job": time.perf_counter() - t0}


def mpi(build, n):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    t0 = time.perf_counter()
    p = subprocess.run(["mpirun", "-np", str(n), "--oversubscribe", f"{build}/perf/init_probe", "mpi"], env=env,
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"mpi {n}: {p.stderr.strip()[-400:]}")
    r = parse(p.stdout.strip().splitlines()[-1])
    return {"init": r["init"], "first": r["first"], "rss_mb": r["rss_kb"] / 1024, "job": time.perf_counter() - t0}


def gloo(n):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, INIT=f"file://{d}/rdzv", WORLD=str(n), OMP_NUM_THREADS="1")
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", GLOO_RANK], env=dict(env, RANK=str(r)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
        rows = gather(procs, f"gloo {n}")
        return summary(rows, time.perf_counter() - t0)


def summary(rows, job):
    return {"init": max(r["init"] for r in rows), "first": max(r["first"] for r in rows),
            "rss_mb": statistics.median(r["rss_kb"] for r in rows) / 1024, "job": job}


def exponent(points):
    """Least-squares slope of log(value) against log(n): value ~ n^slope."""
    pts = [(math.log(n), math.log(v)) for n, v in points if v > 0]
    if len(pts) < 2:
        return float("nan")
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="docs/perf/init_scale")
    ap.add_argument("--procs", default="8,64,256")
    ap.add_argument("--threads", default="8,64,256,1024")
    ap.add_argument("--mpi-max", type=int, default=256)
    ap.add_argument("--gloo-max", type=int, default=64)
    args = ap.parse_args()
    procs = [int(x) for x in args.procs.split(",") if x]
    threads = [int(x) for x in args.threads.split(",") if x]
    results = {}  # (who, n) -> row
    for n in procs:
        results[("loom processes", n)] = loom_procs(args.build, n)
        print("loom processes", n, results[("loom processes", n)], flush=True)
        if n <= args.mpi_max:
            results[("OpenMPI", n)] = mpi(args.build, n)
            print("OpenMPI", n, results[("OpenMPI", n)], flush=True)
        if n <= args.gloo_max:
            results[("Gloo", n)] = gloo(n)
            print("Gloo", n, results[("Gloo", n)], flush=True)
    for n in threads:
        results[("loom threads", n)] = loom_threads(args.build, n)
        print("loom threads", n, results[("loom threads", n)], flush=True)

    who_order = ["loom processes", "loom threads", "OpenMPI", "Gloo"]
    lines = ["# Init at scale (perf/init_scale.py)", "",
             f"`python3 perf/init_scale.py --procs {args.procs} --threads {args.threads} --mpi-max {args.mpi_max} "
             f"--gloo-max {args.gloo_max}`, {time.strftime('%Y-%m-%d')}, on this 2-core VM (every rank shares 2 "
             "cores).  init and first: the slowest rank's seconds; job: wall seconds from the first process "
             "started to the last one ended; memory: peak resident set per rank (MB).", "",
             "| who | ranks | init (s) | first allreduce (s) | job (s) | memory per rank (MB) |", "|---|---:|---:|---:|---:|---:|"]
    for who in who_order:
        for (w, n), r in sorted(results.items(), key=lambda kv: kv[0][1]):
            if w == who:
                lines.append(f"| {who} | {n} | {r['init']:.3f} | {r['first']:.4f} | {r['job']:.2f} | {r['rss_mb']:.1f} |")
    lines += ["", "Fitted exponents (value ~ n^k, least squares over the counts measured):", "",
              "| who | init time k | memory per rank k |", "|---|---:|---:|"]
    for who in who_order:
        pts = [(n, r) for (w, n), r in results.items() if w == who]
        if len(pts) >= 2:
            lines.append(f"| {who} | {exponent([(n, r['init']) for n, r in pts]):.2f} | "
                         f"{exponent([(n, r['rss_mb']) for n, r in pts]):.2f} |")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
        for who in who_order:
            pts = sorted((n, r) for (w, n), r in results.items() if w == who)
            if pts:
                a.plot([n for n, _ in pts], [r["init"] for _, r in pts], "o-", label=who)
                b.plot([n for n, _ in pts], [r["rss_mb"] for _, r in pts], "o-", label=who)
        for ax, title in ((a, "init (s, slowest rank)"), (b, "memory per rank (MB)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("ranks")
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(args.out + ".png", dpi=110)
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
