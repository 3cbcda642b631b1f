#!/usr/bin/env python3
"""Runs a *_perf tool under mpirun for loom and for the MPI library's own collective, alternating the two
(A B A B ...) so that drift on a shared machine hits both alike, and prints the median of each point with
the loom/MPI ratio as a Markdown table.

Examples:  perf/compare.py --build build --np 2 4 --repeats 5 -b 8 -e 64M -f 4
           perf/compare.py --tool broadcast alltoall --np 2 4 -b 1M -e 32M -f 32
           perf/compare.py --tool alltoall all_gather --np 2 4 -b 1M -e 32M -f 32 --ceiling

--ceiling (alltoall and all_gather) adds perf/copy_ceiling to the alternation: the same number of
processes, each filling its receive buffer with one copy from memory it can address (glibc memcpy, and
non-temporal stores: the faster of the two is the "copy ceiling" of any single-copy design) and with the
alltoall pattern over process_vm_readv (the "cma ceiling": what loom and OpenMPI's vader do for large
messages), without any protocol.  The table then gives each library's busbw as a share of the copy
ceiling (median of the per-repeat ratios: the ceiling moves with the machine's load) and the most
loom/MPI could be at that ceiling.
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
    p.add_argument("--ceiling", action="store_true",
                   help="alltoall/all_gather: also time perf/copy_ceiling in the alternation (see above)")
    args = p.parse_args()

    for tool in args.tool:
        for np_ in args.np:
            compare(args, tool, np_)


def run_ceiling(args, np_, pattern):
    """busbw (GB/s) of perf/copy_ceiling per size, in size order."""
    cmd = [os.path.join(args.build, "perf", "copy_ceiling"), "-n", str(np_), "-b", args.b, "-e", args.e,
           "-f", args.f, "-i", str(args.iters), "-w", str(args.warmup), "-p", pattern]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return [float(line.split()[3]) for line in out.stdout.splitlines() if line.strip() and not line.startswith("#")]


def compare(args, tool, np_):
    samples = {"loom": [], "mpi": [], "memcpy": [], "stream": [], "cma": []}
    ceiling = args.ceiling and tool in ("alltoall", "all_gather")
    for _ in range(args.repeats):
        for backend in ("loom", "mpi"):
            samples[backend].append(run_once(args, tool, backend, np_))
        if ceiling:
            for pattern in ("memcpy", "stream", "cma"):
                samples[pattern].append(run_ceiling(args, np_, pattern))
            samples["copy"] = [list(map(max, m, t)) for m, t in zip(samples["memcpy"], samples["stream"])]
    if ceiling:
        print_ceiling(args, tool, np_, samples)
        return
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


def print_ceiling(args, tool, np_, samples):
    print(f"\n### {tool} float32, np={np_}, against the copy ceiling, median of {args.repeats} alternating runs\n")
    print("| size | loom busbw | MPI busbw | copy ceiling | cma ceiling | loom/ceiling | MPI/ceiling "
          "| loom/MPI | most loom/MPI at the ceiling | #wrong |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, s in enumerate(sorted(samples["loom"][0])):
        reps = range(args.repeats)
        bus = {b: [samples[b][k][s]["oop_bus"] for k in reps] for b in ("loom", "mpi")}
        cap = {p: [samples[p][k][i] for k in reps] for p in ("copy", "cma")}
        med = statistics.median
        wrong = sum(r[s]["oop_wrong"] for b in ("loom", "mpi") for r in samples[b])
        print(f"| {human(s)} | {med(bus['loom']):.2f} | {med(bus['mpi']):.2f} | {med(cap['copy']):.2f} "
              f"| {med(cap['cma']):.2f} | {med([l / c for l, c in zip(bus['loom'], cap['copy'])]):.2f} "
              f"| {med([m / c for m, c in zip(bus['mpi'], cap['copy'])]):.2f} "
              f"| {med([l / m for l, m in zip(bus['loom'], bus['mpi'])]):.2f} "
              f"| {med([c / m for c, m in zip(cap['copy'], bus['mpi'])]):.2f} | {wrong} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
