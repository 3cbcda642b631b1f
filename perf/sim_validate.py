#!/usr/bin/env python3
"""loom-sim against this machine: every collective of the report measured through loom's perf tools
(shared memory at 2, 4 and 8 ranks; 2 and 4 network-namespace hosts of one rank), and predicted by
loom-sim for the same ranks, hosts and sizes with the cost model that very run probed (its
`loom-sim --model ...` log line).  The error of a point is (predicted - measured) / measured; the
table gives every point and the median |error| per configuration, and whether loom-sim's automatic
choice is the algorithm the run chose (its ALGO log lines).

    perf/sim_validate.py --build build --out docs/perf/sim_validation.md
    perf/sim_validate.py --configs shm2 --collectives all_reduce --out /tmp/v.md   # a quick look

Network configurations need root (namespaces) and are skipped with a note otherwise.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402  (the report's hosts and collectives: the same runs, the same placements)

CONFIGS = ["shm2", "shm4", "shm8", "net2", "net4"]
SIM_COLL = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
            "broadcast": "broadcast", "alltoall": "alltoall"}
SWEEP = dict(b="64K", e="16M", f="4", iters="10", warmup="3")


def measure(args, host, coll, workdir):
    """One perf tool run: ({bytes: time_us}, model spec, {call bytes: algorithm})."""
    tool = os.path.join(args.build, "perf", report.COLLECTIVES[coll][0])
    out = os.path.join(workdir, f"{coll}.json")
    cmd = host.mpirun(False) + ["-x", "LOOM_DEBUG", "-x", "LOOM_DEBUG_SUBSYS"] + [
        tool, "-b", SWEEP["b"], "-e", SWEEP["e"], "-f", SWEEP["f"], "-n", SWEEP["iters"], "-w", SWEEP["warmup"],
        "-c", "0", "-d", "float", "-o", "sum", "--placement", report.COLLECTIVES[coll][3], "--json", out]
    env = dict(os.environ, LOOM_DEBUG="INFO", LOOM_DEBUG_SUBSYS="ALGO")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    log = run.stdout + run.stderr
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({run.returncode}):\n{log[-3000:]}")
    spec = re.search(r"loom-sim --model (\S+)", log)
    if not spec:
        raise RuntimeError("the run logged no cost model:\n" + log[-2000:])
    chosen = {}
    for m in re.finditer(r"ALGO \w+ (\d+) bytes on \d+ ranks: (\w+) \(predicted", log):
        chosen[int(m.group(1))] = m.group(2)
    with open(out) as f:
        times = {r["bytes"]: r["time_us"] for r in json.load(f)["results"] if r["bytes"] > 0}
    return times, spec.group(1), chosen


def simulate(args, coll, nranks, hosts, spec):
    """loom-sim's table for the same sizes: {bytes: (time_us, algorithm)}."""
    per_host = nranks // hosts
    cmd = [os.path.join(args.build, "tools", "loom-sim"), "-c", SIM_COLL[coll], "-b", SWEEP["b"], "-e", SWEEP["e"],
           "-f", SWEEP["f"], "-H", str(hosts), "-r", str(per_host), "--model", spec]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows, algos = {}, {}
    for line in out.splitlines():
        f = line.split()
        if line.startswith("#") and len(f) >= 3 and f[1].isdigit():
            algos[int(f[1])] = f[2]
        elif not line.startswith("#") and len(f) >= 6 and f[0].isdigit():
            rows[int(f[0])] = float(f[5])
    return {b: (t, algos.get(b, "?")) for b, t in rows.items()}


def call_bytes(coll, size, nranks):
    """The call's count x type size for a table size (what the ALGO log line names)."""
    return size // nranks if coll in ("all_gather", "reduce_scatter", "alltoall") else size


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(report.ROOT, "build"))
    p.add_argument("--out", default=os.path.join(report.ROOT, "docs", "perf", "sim_validation.md"))
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--collectives", default=",".join(SIM_COLL))
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3, help="rounds over the collectives (medians)")
    args = p.parse_args()
    configs = args.configs.split(",")
    collectives = args.collectives.split(",")
    rows, summary, notes = [], [], []
    for name in configs:
        kind, count, per_host = report.CONFIGS[name]
        if kind == "net" and os.geteuid() != 0:
            notes.append(f"{name}: skipped (network namespaces need root)")
            continue
        host = report.LocalHost(count) if kind == "shm" else report.NamespaceHosts(count, per_host)
        nranks, hosts = (count, 1) if kind == "shm" else (count * per_host, count)
        errors, spreads, matches, points = [], [], 0, 0
        try:
            with tempfile.TemporaryDirectory() as work:
                # Rounds over the collectives, so that drift on a shared machine hits all alike; each point
                # is the median over the rounds of the measured times and of the predictions (each from
                # its own run's probe).
                runs = {coll: [] for coll in collectives}
                for _ in range(args.repeats):
                    for coll in collectives:
                        measured, spec, chosen = measure(args, host, coll, work)
                        runs[coll].append((measured, simulate(args, coll, nranks, hosts, spec), chosen, spec))
                for coll in collectives:
                    first_measured, _, chosen, spec = runs[coll][0]
                    for size in sorted(first_measured):
                        samples = [(m[size], p[size]) for m, p, _, _ in runs[coll] if size in m and size in p]
                        if not samples:
                            continue
                        t_meas = statistics.median(m for m, _ in samples)
                        # The machine's own noise: how far the same call's measured times lie apart
                        # from run to run (a floor under any prediction's error).
                        spreads.append((max(m for m, _ in samples) - min(m for m, _ in samples)) / t_meas)
                        t_pred = statistics.median(p[0] for _, p in samples)
                        algo = runs[coll][0][1][size][1]
                        err = (t_pred - t_meas) / t_meas
                        live = chosen.get(call_bytes(coll, size, nranks), "?")
                        errors.append(abs(err))
                        points += 1
                        matches += live == algo
                        rows.append((name, coll, size, t_meas, t_pred, err, live, algo))
                    print(f"{name} {coll}: model {spec}", flush=True)
        finally:
            host.close()
        if errors:
            summary.append((name, statistics.median(errors), max(errors), statistics.median(spreads), points, matches,
                            spec))
    write(args.out, rows, summary, notes)
    for s in summary:
        print(f"{s[0]}: median |error| {100 * s[1]:.1f}% (max {100 * s[2]:.0f}%), measured spread {100 * s[3]:.0f}%, "
              f"choice matched {s[5]}/{s[4]}")
    return 0


def human(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def write(path, rows, summary, notes):
    with open(path, "w") as f:
        f.write("# loom-sim against measurements on this machine\n\n")
        f.write("Written by `perf/sim_validate.py` (sizes 64 KB to 16 MB, float, the report's placements: "
                "allreduce and broadcast in place; 10 timed calls a run, the median of 3 runs).  Each configuration's runs probe the "
                "machine as every loom job does, and loom-sim prices the same call with that probed model "
                "(`--model`, from the run's own log); the error is (predicted - measured) / measured.  "
                "'choice' is the algorithm the first run chose / the one loom-sim names as loom's choice.  "
                "'measured spread' is the median over the points of (slowest - fastest) / median of the runs' "
                "measured times: the machine's own noise in the same run.\n\n")
        f.write("| configuration | median \\|error\\| | max \\|error\\| | measured spread | points | same choice | "
                "probed model (of its last collective's first run) |\n")
        f.write("|---|---:|---:|---:|---:|---:|---|\n")
        for name, med, mx, spread, points, matches, spec in summary:
            f.write(f"| {name} | {100 * med:.1f}% | {100 * mx:.0f}% | {100 * spread:.0f}% | {points} | "
                    f"{matches}/{points} | `{spec}` |\n")
        for n in notes:
            f.write(f"\n{n}\n")
        f.write("\n| configuration | collective | size | measured (us) | predicted (us) | error | choice |\n")
        f.write("|---|---|---:|---:|---:|---:|---|\n")
        for name, coll, size, meas, pred, err, live, algo in rows:
            f.write(f"| {name} | {coll} | {human(size)} | {meas:.1f} | {pred:.1f} | {100 * err:+.0f}% | "
                    f"{live} / {algo} |\n")


if __name__ == "__main__":
    sys.exit(main())
