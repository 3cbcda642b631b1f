#!/usr/bin/env python3
"""Runs a *_perf tool under mpirun for loom and for the MPI library's own collective, alternating the two
(A B A B ...) so that drift on a shared machine hits both alike, and prints the median of each point with
the loom/MPI ratio as a Markdown table.

Examples:  perf/compare.py --build build --np 2 4 --repeats 5 -b 8 -e 64M -f 4
           perf/compare.py --tool broadcast alltoall --np 2 4 -b 1M -e 32M -f 32
"""
import argparse
import os
import statistics
import subprocess
import sys


def run_once(args, tool, backend, np_):
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [os.path.join(args.build, "perf", tool + "_perf"), "-b", args.b, "-e", args.e, "-f", args.f,
            "-n", str(args.iters), "-w", str(args.warmup), "-c", "1", "-d", "float", "-o", "sum", "-B", backend]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    rows = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if not f or line.startswith("#"):
            continue
        # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
        if int(f[0]) == 0:
            continue  # sizes that round to zero elements per rank carry nothing
        num = lambda x: float(x) if x != "N/A" else float("nan")  # sendrecv has no in-place columns
        rows[int(f[0])] = dict(oop_us=float(f[5]), oop_bus=float(f[7]), oop_wrong=int(f[8]),
                               ip_us=num(f[9]), ip_bus=num(f[11]), ip_wrong=0 if f[12] == "N/A" else int(f[12]))
    return rows


def human(n):
    for unit in ("", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n}{unit}" if unit == "" else f"{n:g}{unit}"
        n /= 1024
    return str(n)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build directory holding perf/*_perf")
    p.add_argument("--tool", nargs="+", default=["all_reduce"],
                   help="tools to compare: all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv")
    p.add_argument("--np", type=int, nargs="+", default=[2, 4], help="rank counts to measure")
    p.add_argument("--repeats", type=int, default=5, help="runs of each backend per rank count (median taken)")
    p.add_argument("-b", default="8", help="smallest size")
    p.add_argument("-e", default="64M", help="largest size")
    p.add_argument("-f", default="4", help="size factor")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--timeout", type=int, default=600, help="seconds per mpirun")
    args = p.parse_args()

    for tool in args.tool:
        for np_ in args.np:
            compare(args, tool, np_)


def compare(args, tool, np_):
    samples = {"loom": [], "mpi": []}
    for _ in range(args.repeats):
        for backend in ("loom", "mpi"):
            samples[backend].append(run_once(args, tool, backend, np_))
    print(f"\n### {tool} float32, np={np_}, median of {args.repeats} alternating runs\n")
    print("| size | loom time (us) | MPI time (us) | loom busbw (GB/s) | MPI busbw (GB/s) | busbw loom/MPI "
          "| in-place loom/MPI | #wrong |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in sorted(samples["loom"][0]):
        def med(b, k):
            return statistics.median(r[s][k] for r in samples[b])
        wrong = sum(r[s]["oop_wrong"] + r[s]["ip_wrong"] for b in samples for r in samples[b])
        lb, mb = med("loom", "oop_bus"), med("mpi", "oop_bus")
        lib, mib = med("loom", "ip_bus"), med("mpi", "ip_bus")
        ratio = f"{lb / mb:.2f}" if mb > 0 else "-"
        ipratio = f"{lib / mib:.2f}" if mib > 0 else "-"  # also "-" where there is no in-place form
        print(f"| {human(s)} | {med('loom', 'oop_us'):.2f} | {med('mpi', 'oop_us'):.2f} | {lb:.2f} | {mb:.2f} "
              f"| {ratio} | {ipratio} | {wrong} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
