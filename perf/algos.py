#!/usr/bin/env python3
"""Benchmarks every allreduce algorithm forced with LOOM_ALGO, and the automatic choice, with
all_reduce_perf under mpirun (alternating runs, medians), and prints per rank count a Markdown table:
time per algorithm by size, the automatic choice's time against the best forced one, and the cost model's
predicted time (from rank 0's LOOM_DEBUG_SUBSYS=ALGO log) against the measured one.

Two columns judge the choice.  "auto / best" is the automatic run's own median against the best forced
median: it carries the run-to-run spread of this machine (a whole run can be 2x slower than its
neighbour).  "choice / best" is the median of the chosen algorithm's forced runs against the best forced
median: the automatic run executes exactly that algorithm (the choice is made once per size and cached),
so this column isolates how good the choice is from the spread.

With --hosts H the ranks run on H hosts made of network namespaces (as perf/report.py makes them; root
only), --per-host P ranks each: the choice across hosts, with the model's network terms.

Example:  perf/algos.py --build build --np 2 4 8 --repeats 3 -b 8 -e 64M -f 8
          perf/algos.py --hosts 2 --per-host 1 --repeats 3 -b 8 -e 64M -f 8
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

# The allreduce algorithms of src/algos/selector.cc (kTable); loom-info lists every algorithm.
ALGOS = ["ring", "tree", "rhd", "oneshot", "hier"]


def run(args, np_, algo, hosts=None):
    env = dict(os.environ, LOOM_DEBUG="INFO", LOOM_DEBUG_SUBSYS="ALGO")
    if algo != "auto":
        env["LOOM_ALGO"] = algo
    if hosts is not None:
        cmd = hosts.mpirun(False)
    else:
        cmd = ["mpirun", "-np", str(np_), "--oversubscribe"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    for var in ("LOOM_DEBUG", "LOOM_DEBUG_SUBSYS", "LOOM_ALGO"):
        if var in env:
            cmd += ["-x", var]
    cmd += [os.path.join(args.build, "perf", "all_reduce_perf"), "-b", args.b, "-e", args.e, "-f", args.f,
            "-n", str(args.iters), "-w", str(args.warmup), "-c", "0", "-d", "float", "-o", "sum"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    times, chosen, predicted = {}, {}, {}
    for line in out.stdout.splitlines():
        f = line.split()
        if f and not line.startswith("#") and f[0].isdigit() and int(f[0]) > 0:
            times[int(f[0])] = float(f[5])
    # "allreduce 1024 bytes on 4 ranks: ring (predicted: ring 12.0 us, tree 14.0 us, ...)" from rank 0
    for line in (out.stderr + out.stdout).splitlines():
        m = re.search(r":0 loom INFO ALGO allreduce (\d+) bytes on \d+ ranks: (\w+) \(predicted: (.*)\)", line)
        if m:
            size = int(m.group(1))
            chosen[size] = m.group(2)
            predicted[size] = {a: float(t) for a, t in re.findall(r"(\w+) ([\d.e+]+) us", m.group(3))}
    return times, chosen, predicted


def human(n):
    for unit in ("", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:g}{unit}"
        n /= 1024


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--np", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("-b", default="8")
    p.add_argument("-e", default="64M")
    p.add_argument("-f", default="8")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--hosts", type=int, help="network-namespace hosts (root only); replaces --np")
    p.add_argument("--per-host", type=int, default=1, help="ranks per host with --hosts")
    args = p.parse_args()
    hosts = None
    if args.hosts:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from report import NamespaceHosts
        hosts = NamespaceHosts(args.hosts, args.per_host)
        args.np = [hosts.nranks]
    try:
        report_all(args, hosts)
    finally:
        if hosts is not None:
            hosts.close()


def report_all(args, hosts):
    for np_ in args.np:
        samples = {a: {} for a in ALGOS + ["auto"]}
        chosen, predicted = {}, {}
        for _ in range(args.repeats):
            for algo in ALGOS + ["auto"]:
                t, c, pr = run(args, np_, algo, hosts)
                for size, v in t.items():
                    samples[algo].setdefault(size, []).append(v)
                if algo == "auto":
                    chosen.update(c)
                else:
                    for size, d in pr.items():  # each run probes anew: the median of the repeats
                        if algo in d:
                            predicted.setdefault(size, {}).setdefault(algo, []).append(d[algo])
        med = {a: {s: statistics.median(v) for s, v in d.items()} for a, d in samples.items()}
        sizes = sorted(med["ring"])
        where = f" ({args.hosts} hosts x {args.per_host})" if hosts is not None else ""
        print(f"\n### allreduce float32 sum, np={np_}{where}: time (us), median of {args.repeats} alternating runs\n")
        print("| size | " + " | ".join(ALGOS) + " | auto (choice) | auto / best | choice / best |")
        print("|---:|" + "---:|" * len(ALGOS) + "---|---:|---:|")
        worst = worstChoice = 0
        for s in sizes:
            best = min(med[a][s] for a in ALGOS)
            ratio = med["auto"][s] / best
            worst = max(worst, ratio)
            pick = chosen.get(s, "?")
            choice = med[pick][s] / best if pick in ALGOS else float("nan")
            worstChoice = max(worstChoice, choice)
            cells = [f"**{med[a][s]:.1f}**" if med[a][s] == best else f"{med[a][s]:.1f}" for a in ALGOS]
            print(f"| {human(s)} | " + " | ".join(cells) + f" | {med['auto'][s]:.1f} ({pick}) | {ratio:.2f} "
                  f"| {choice:.2f} |")
        print(f"\nworst auto/best: {worst:.2f}; worst choice/best: {worstChoice:.2f}")
        print(f"\n#### np={np_}: busbw (GB/s, 2(n-1)/n x size / time)\n")
        print("| size | " + " | ".join(ALGOS + ["auto"]) + " |")
        print("|---:|" + "---:|" * (len(ALGOS) + 1))
        for s in sizes:
            bus = [2 * (np_ - 1) / np_ * s / (med[a][s] * 1e3) for a in ALGOS + ["auto"]]
            print(f"| {human(s)} | " + " | ".join(f"{b:.3f}" for b in bus) + " |")
        print(f"\n#### np={np_}: predicted / measured, sizes >= 64K\n")
        print("| size | " + " | ".join(ALGOS) + " |")
        print("|---:|" + "---:|" * len(ALGOS))
        worst = 1
        for s in sizes:
            if s < 65536:
                continue
            cells = []
            for a in ALGOS:
                pr = predicted.get(s, {}).get(a)
                pr = statistics.median(pr) if pr else None
                if pr is None:
                    cells.append("?")
                    continue
                r = pr / med[a][s]
                worst = max(worst, r, 1 / r)
                cells.append(f"{r:.2f}")
            print(f"| {human(s)} | " + " | ".join(cells) + " |")
        print(f"\nworst prediction error factor: {worst:.2f}")


if __name__ == "__main__":
    main()
