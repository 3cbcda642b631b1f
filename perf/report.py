#!/usr/bin/env python3
"""Side-by-side performance report: loom (its automatic choice) against OpenMPI's own collectives and
Gloo (PyTorch's gloo backend), measured in one run on this machine, with the physical references of the
same run: single-core memcpy bandwidth (the ceiling of a shared-memory copy) and iperf3's single-stream
TCP throughput on the namespace hosts' veths (the ceiling of the network configurations).

Configurations: N ranks on this host (shared memory; OpenMPI with btl vader) and H network-namespace
hosts of one rank each (loom's network transport; OpenMPI with btl tcp; Gloo over TCP).  For each
configuration the systems alternate, A B C A B C ..., so that drift on a shared machine hits all alike;
every point is the median of the repeats, with the spread ((max - min) / 2, relative to the median).

Writes, under --out: report.md (tables of busbw and latency with the ratios loom/OpenMPI, loom/Gloo and
loom/limit, and the geometric means of the ratios over sizes >= 64 KB), one busbw-vs-size plot per
configuration (PNG), and results.json (every measurement).

    perf/report.py --build build --out docs/perf            # the full report (about 12 minutes here)
    perf/report.py --configs shm2 --collectives all_reduce --repeats 1 --out /tmp/r   # a quick look

Network configurations need root (namespaces) and are skipped with a note otherwise.
"""
import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# collective -> (perf tool, gloo_bench name, title, placement).  Every library runs a collective in the
# placement torch's API gives it (gloo_bench.py): all_reduce and broadcast in place (a tensor is its own
# output), the others out of place.  Out of place, a broadcast's root first copies its input to its
# output (loom and the MPI perf tool; torch has no such call), which on the network configurations cost
# loom ~0.1 CPU s/GB that Gloo never paid.
COLLECTIVES = {
    "all_reduce": ("all_reduce_perf", "all_reduce", "allreduce", "in"),
    "all_gather": ("all_gather_perf", "all_gather", "allgather", "out"),
    "reduce_scatter": ("reduce_scatter_perf", "reduce_scatter", "reducescatter", "out"),
    "broadcast": ("broadcast_perf", "broadcast", "broadcast", "in"),
    "alltoall": ("alltoall_perf", "alltoall", "alltoall", "out"),
}
# name -> (kind, ranks or hosts, ranks per host)
CONFIGS = {"shm2": ("shm", 2, 2), "shm4": ("shm", 4, 4), "shm8": ("shm", 8, 8), "net2": ("net", 2, 1),
           "net4": ("net", 4, 1), "net2x2": ("net", 2, 2)}
SYSTEMS = ["loom", "openmpi", "gloo"]
LABEL = {"loom": "loom", "openmpi": "OpenMPI", "gloo": "Gloo"}
# Sizes 8 B .. 64 MB in two sweeps: many timed calls where they are cheap, few where they are not.
SWEEPS = [dict(b="8", e="256K", f="8", iters=20, warmup=3), dict(b="1M", e="64M", f="4", iters=4, warmup=1)]
QUICK_SWEEPS = [dict(b="8", e="32K", f="64", iters=10, warmup=2), dict(b="1M", e="4M", f="4", iters=2, warmup=1)]


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def sweep_sizes(sweep):
    sizes, s = [], parse_size(sweep["b"])
    while s <= parse_size(sweep["e"]):
        sizes.append(s)
        s *= int(sweep["f"])
    return sizes


def human(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:g} {unit}"
        n /= 1024


def run(cmd, timeout, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out.stdout


# ---------------------------------------------------------------------------------------------- hosts
class LocalHost:
    """Ranks on this machine: shared memory between them."""
    kind = "shm"

    def __init__(self, nranks):
        self.nranks = nranks

    def mpirun(self, backend_is_mpi):
        cmd = ["mpirun", "-np", str(self.nranks), "--oversubscribe"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        return cmd + ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"]

    def spawn(self, rank, argv, env, log):
        env = dict(env, GLOO_SOCKET_IFNAME="lo")
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    master_addr = "127.0.0.1"

    def close(self):
        pass


class NamespaceHosts:
    """Hosts made of network namespaces (tests/net/netns_hosts.sh), `per_host` ranks each (ranks r*per_host ..
    on host r).  A bash process holds them: it makes them, prints their names, and removes them when its
    stdin closes (also when this script dies)."""
    kind = "net"

    def __init__(self, nhosts, per_host=1):
        self.nranks = nhosts * per_host
        self.per_host = per_host
        script = (f". {ROOT}/tests/net/netns_hosts.sh; netns_require; netns_make_hosts {nhosts}; "
                  'echo "HOSTS ${NETNS_HOSTS[*]}"; echo "ADDRS ${NETNS_ADDRS[*]}"; echo "VETHS ${NETNS_VETHS[*]}"; '
                  'echo "SUBNET ${NETNS_SUBNET}"; echo READY; read -r _')
        self.holder = subprocess.Popen(["bash", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True)
        info = {}
        for line in self.holder.stdout:
            if line.strip() == "READY":
                break
            key, _, value = line.strip().partition(" ")
            info[key] = value
        if "HOSTS" not in info:
            self.holder.wait()
            raise RuntimeError("cannot make network namespace hosts (needs root and iproute2)")
        self.hosts, self.addrs, self.veths = info["HOSTS"].split(), info["ADDRS"].split(), info["VETHS"].split()
        self.subnet = info["SUBNET"] + "0/24"
        self.master_addr = self.addrs[0]
        self.hostfile = tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False)
        self.hostfile.write("".join(f"{h} slots={per_host}\n" for h in self.hosts))
        self.hostfile.close()

    def mpirun(self, backend_is_mpi):
        # --bind-to none: every namespace "host" shares this machine's cores; binding would put every
        # rank on core 0.  Ranks of one host reach each other through OpenMPI's shared memory (vader).
        btl = "tcp,self" if self.per_host == 1 else "tcp,vader,self"
        return ["ip", "netns", "exec", self.hosts[0], "mpirun", "--allow-run-as-root", "-np", str(self.nranks),
                "--hostfile", self.hostfile.name, "--mca", "plm_rsh_agent", f"{ROOT}/tests/net/netns_rsh.sh",
                "--mca", "rtc_hwloc_vmhole", "none", "--mca", "oob_tcp_if_include", self.subnet,
                "--mca", "btl_tcp_if_include", self.subnet, "--mca", "pml", "ob1", "--mca", "btl", btl,
                "--map-by", "slot", "--bind-to", "none", "-x", "PATH"]

    def spawn(self, rank, argv, env, log):
        host = rank // self.per_host
        env = dict(env, GLOO_SOCKET_IFNAME=self.veths[host])
        return subprocess.Popen(["ip", "netns", "exec", self.hosts[host]] + argv, env=env, stdout=log,
                                stderr=subprocess.STDOUT)

    def iperf3(self, seconds=3):
        """Receiver-side throughput of one TCP stream from host 1 to host 0, GB/s."""
        server = subprocess.Popen(["ip", "netns", "exec", self.hosts[0], "iperf3", "-s", "-1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(50):
                time.sleep(0.1)
                out = subprocess.run(["ip", "netns", "exec", self.hosts[1], "iperf3", "-c", self.addrs[0], "-t",
                                      str(seconds), "-J"], capture_output=True, text=True)
                if out.returncode == 0:
                    return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 8e9
            raise RuntimeError("iperf3 did not connect: " + out.stderr[-500:])
        finally:
            server.kill()
            server.wait()

    def close(self):
        os.unlink(self.hostfile.name)
        self.holder.stdin.close()
        self.holder.wait()


# -------------------------------------------------------------------------------------------- systems
def run_perf_tools(args, host, backend, collectives, workdir):
    """loom or OpenMPI through the perf tools: {(collective, bytes): (time_us, busbw, cpu_s_per_gb)}."""
    points = {}
    for coll in collectives:
        tool = os.path.join(args.build, "perf", COLLECTIVES[coll][0])
        for k, sweep in enumerate(args.sweeps):
            out = os.path.join(workdir, f"{coll}.{backend}.{k}.json")
            cmd = host.mpirun(backend == "mpi") + [tool, "-b", sweep["b"], "-e", sweep["e"], "-f", sweep["f"],
                                                   "-n", str(sweep["iters"]), "-w", str(sweep["warmup"]), "-c", "0",
                                                   "-d", "float", "-o", "sum", "-B", backend,
                                                   "--placement", COLLECTIVES[coll][3],
                                                   "--json", out]
            run(cmd, args.timeout)
            with open(out) as f:
                for r in json.load(f)["results"]:
                    if r["bytes"] > 0:  # sizes that round to no element per rank carry nothing
                        points[(coll, r["bytes"])] = (r["time_us"], r["busbw_gbs"], r["cpu_s_per_gb"])
    return points


def run_gloo(args, host, collectives, workdir):
    # The store's port is picked at random: one that something else holds (EADDRINUSE) is tried again with
    # another, rather than losing the whole report to it.
    for attempt in range(3):
        try:
            return run_gloo_once(args, host, collectives, workdir, attempt)
        except RuntimeError as e:
            if "EADDRINUSE" not in str(e) or attempt == 2:
                raise
            print(f"# gloo: the store's port was taken; again with another", flush=True)


def run_gloo_once(args, host, collectives, workdir, attempt):
    points_arg = [f"{s}:{sw['iters']}" for sw in args.sweeps for s in sweep_sizes(sw)]
    out = os.path.join(workdir, "gloo.json")
    port = 29500 + (os.getpid() + int(time.time()) + 7919 * attempt) % 20000
    base = dict(os.environ, WORLD_SIZE=str(host.nranks), MASTER_ADDR=host.master_addr, MASTER_PORT=str(port),
                OMP_NUM_THREADS="1")
    procs, logs = [], []
    for rank in range(host.nranks):
        argv = [sys.executable, os.path.join(HERE, "gloo_bench.py"), "--collectives"] + \
               [COLLECTIVES[c][1] for c in collectives] + ["--json", out] + points_arg
        logs.append(open(os.path.join(workdir, f"gloo.{rank}.log"), "w+"))
        procs.append(host.spawn(rank, argv, dict(base, RANK=str(rank)), logs[-1]))
    # Every rank is watched at once: one that fails ends the others (they would wait for it).
    deadline = time.time() + args.timeout
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode not in (None, 0) for p in procs) or time.time() > deadline:
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    if any(p.returncode != 0 for p in procs):
        text = ""
        for rank, f in enumerate(logs):
            f.seek(0)
            text += f"--- rank {rank} (exit {procs[rank].returncode}):\n" + f.read()[-1500:]
        raise RuntimeError("gloo_bench.py failed or timed out:\n" + text)
    for f in logs:
        f.close()
    by_name = {COLLECTIVES[c][1]: c for c in collectives}
    with open(out) as f:
        return {(by_name[r["collective"]], r["bytes"]): (r["time_us"], r["busbw_gbs"], r["cpu_s_per_gb"])
                for r in json.load(f)["results"]}


# ------------------------------------------------------------------------------------------ references
def memcpy_gbs(nbytes=64 << 20, repeats=9):
    """Single-core memcpy bandwidth for a large buffer: bytes copied per second (numpy's copy is a
    memcpy for contiguous arrays)."""
    import numpy as np
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return nbytes / statistics.median(times) / 1e9


def machine():
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    # A VM may report a bare "AMD EPYC": the family and model numbers say which generation.
    model = f"{fields.get('model name', 'unknown CPU')} (family {fields.get('cpu family', '?')}, " \
            f"model {fields.get('model', '?')})"
    mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    rev = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return dict(cpu=model, cores=os.cpu_count(), memory_gib=round(mem, 1), kernel=platform.release(),
                openmpi=mpi[0] if mpi else "?", torch=torch_version, loom=rev.strip(),
                date=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"))


# ------------------------------------------------------------------------------------------- analysis
def summarize(samples):
    """Median and relative spread ((max - min) / 2 / median) of one point's repeats."""
    med = statistics.median(samples)
    return med, ((max(samples) - min(samples)) / 2 / med if med > 0 else 0.0)


def geomean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def build_tables(data):
    """data['configs'][name] -> per collective, per size: medians, spreads and ratios."""
    tables = {}
    for cname, cfg in data["configs"].items():
        limit = cfg["limit_gbs"]
        per = {}
        for coll in data["collectives"]:
            rows = []
            sizes = sorted({int(s) for sysname in SYSTEMS for s in cfg["samples"].get(sysname, {}).get(coll, {})})
            for size in sizes:
                row = dict(bytes=size)
                for sysname in SYSTEMS:
                    samples = cfg["samples"].get(sysname, {}).get(coll, {}).get(str(size))
                    if samples:
                        row[sysname] = dict(zip(("busbw", "busbw_spread"), summarize([s[1] for s in samples])))
                        row[sysname]["time_us"] = statistics.median([s[0] for s in samples])
                        row[sysname]["cpu_s_per_gb"] = statistics.median([s[2] for s in samples])
                rows.append(row)
            per[coll] = rows
        ratios = {}
        for other in ("openmpi", "gloo"):
            rs = [r["loom"]["busbw"] / r[other]["busbw"] for coll in per for r in per[coll]
                  if r["bytes"] >= 64 << 10 and "loom" in r and other in r and r[other]["busbw"] > 0]
            ratios[other] = (geomean(rs), len(rs))
            # CPU: the other's CPU seconds per GB over loom's (above 1: loom costs less), same sizes.
            cs = [r[other]["cpu_s_per_gb"] / r["loom"]["cpu_s_per_gb"] for coll in per for r in per[coll]
                  if r["bytes"] >= 64 << 10 and "loom" in r and other in r and r["loom"]["cpu_s_per_gb"] > 0]
            ratios["cpu_" + other] = (geomean(cs), len(cs))
        tables[cname] = dict(rows=per, limit=limit, geomean=ratios)
    return tables


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "–"


def write_markdown(data, tables, path):
    m = data["machine"]
    lines = [f"# loom vs OpenMPI vs Gloo — {m['date']}", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux {m['kernel']}; "
             f"{m['openmpi']}; torch {m['torch']} (Gloo); loom {m['loom']}.  Measured by `perf/report.py` in one "
             f"run of {data['elapsed_s'] / 60:.1f} minutes, {data['repeats']} alternating repeats per point; each "
             "figure is the median, ± the half-range of the repeats relative to it.", "",
             "Float32, sum where the collective reduces; allreduce and broadcast in place, the others out of place, "
             "as torch's API runs them (a tensor is its own output); size and busbw as nccl-tests define them "
             "(busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for allgather, reducescatter and alltoall, 1 for "
             "broadcast).  OpenMPI runs its own `MPI_*` collective (default tuned; btl vader on one host, tcp "
             "across hosts); Gloo is PyTorch's gloo backend; loom makes its automatic choice.  limit: single-core "
             f"memcpy bandwidth ({data['memcpy_gbs']:.2f} GB/s) for shared memory, iperf3's single TCP stream "
             "on the veth for the network configurations.  Ranks outnumber this machine's cores from 4 ranks on.", "",
             "CPU s/GB: CPU seconds (user + system, every thread, all ranks together, from getrusage) per GB "
             "of the call's size, while the timed calls ran: what each library costs a shared machine.",
             "", "## Geometric means of the ratios, sizes >= 64 KB (all collectives)", "",
             "busbw: loom's over the other's (above 1: loom is faster).  CPU: the other's CPU seconds per GB over "
             "loom's (above 1: loom costs less).", "",
             "| configuration | busbw loom/OpenMPI | busbw loom/Gloo | CPU OpenMPI/loom | CPU Gloo/loom | points |",
             "|---|---|---|---|---|---|"]
    for cname, t in tables.items():
        g = t["geomean"]
        lines.append(f"| {data['configs'][cname]['title']} | {g['openmpi'][0]:.2f} | {g['gloo'][0]:.2f} | "
                     f"{g['cpu_openmpi'][0]:.2f} | {g['cpu_gloo'][0]:.2f} | {g['openmpi'][1]} |")
    for cname, t in tables.items():
        cfg = data["configs"][cname]
        lines += ["", f"## {cfg['title']}", "", f"![busbw]({cname}.png)", "",
                  f"limit: {cfg['limit_name']} {t['limit']:.2f} GB/s."]
        for coll, rows in t["rows"].items():
            lines += ["", f"### {COLLECTIVES[coll][2]}", "",
                      "| size | loom busbw | OpenMPI busbw | Gloo busbw | loom us | OpenMPI us | Gloo us | "
                      "loom/OpenMPI | loom/Gloo | loom/limit | CPU s/GB loom | OpenMPI | Gloo |", "|---" * 13 + "|"]
            for r in rows:
                cell = lambda s: f"{r[s]['busbw']:.3f} ±{r[s]['busbw_spread']:.0%}" if s in r else "–"
                us = lambda s: f"{r[s]['time_us']:.1f}" if s in r else "–"
                bw = lambda s: r[s]["busbw"] if s in r else None
                cpu = lambda s: f"{r[s]['cpu_s_per_gb']:.2f}" if s in r else "–"
                lines.append(f"| {human(r['bytes'])} | {cell('loom')} | {cell('openmpi')} | {cell('gloo')} | "
                             f"{us('loom')} | {us('openmpi')} | {us('gloo')} | "
                             f"{fmt_ratio(bw('loom'), bw('openmpi'))} | {fmt_ratio(bw('loom'), bw('gloo'))} | "
                             f"{fmt_ratio(bw('loom'), t['limit'])} | {cpu('loom')} | {cpu('openmpi')} | "
                             f"{cpu('gloo')} |")
    if data["skipped"]:
        lines += ["", "## Not measured", ""] + [f"- {s}" for s in data["skipped"]]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def plot(data, tables, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    style = {"loom": ("tab:red", "o"), "openmpi": ("tab:blue", "s"), "gloo": ("tab:green", "^")}
    for cname, t in tables.items():
        colls = list(t["rows"])
        fig, axes = plt.subplots(1, len(colls), figsize=(4 * len(colls), 3.6), squeeze=False)
        for ax, coll in zip(axes[0], colls):
            rows = t["rows"][coll]
            for sysname in SYSTEMS:
                pts = [(r["bytes"], r[sysname]["busbw"]) for r in rows if sysname in r]
                if pts:
                    color, marker = style[sysname]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker=marker, markersize=3,
                            label=LABEL[sysname])
            ax.axhline(t["limit"], color="gray", linestyle="--", linewidth=1, label=data["configs"][cname]["limit_name"])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(COLLECTIVES[coll][2])
            ax.set_xlabel("size (bytes)")
            ax.grid(True, which="major", alpha=0.3)
        axes[0][0].set_ylabel("busbw (GB/s)")
        axes[0][0].legend(fontsize=8)
        fig.suptitle(f"{data['configs'][cname]['title']} — {data['machine']['cpu']}, {data['machine']['cores']} "
                     f"cores, {data['machine']['date'][:10]}", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, f"{cname}.png"), dpi=80)
        plt.close(fig)


# ----------------------------------------------------------------------------------------------- main
def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory with perf/*_perf")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "perf"), help="results folder (default docs/perf)")
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    p.add_argument("--collectives", nargs="+", default=list(COLLECTIVES), choices=list(COLLECTIVES))
    p.add_argument("--systems", nargs="+", default=SYSTEMS, choices=SYSTEMS)
    p.add_argument("--repeats", type=int, default=3, help="alternating runs of each system per configuration")
    p.add_argument("--quick", action="store_true", help="few sizes and calls: checks the pipeline, not the numbers")
    p.add_argument("--timeout", type=int, default=300, help="seconds per launch")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    args.sweeps = QUICK_SWEEPS if args.quick else SWEEPS
    for c in args.collectives:
        tool = os.path.join(args.build, "perf", COLLECTIVES[c][0])
        if not os.access(tool, os.X_OK):
            sys.exit(f"{tool} is missing: build first (scripts/build.sh or cmake --build {args.build})")
    for prog in ("mpirun",) + (("iperf3", "ip") if any(CONFIGS[c][0] == "net" for c in args.configs) else ()):
        if shutil.which(prog) is None:
            sys.exit(f"{prog} is not installed (scripts/setup.sh installs it)")
    if "gloo" in args.systems:
        try:
            import torch  # noqa: F401
        except ImportError:
            sys.exit("torch is not installed (scripts/setup.sh installs it); or leave gloo out with --systems")
    os.makedirs(args.out, exist_ok=True)

    t_start = time.time()
    data = dict(machine=machine(), repeats=args.repeats, collectives=args.collectives, configs={}, skipped=[])
    data["memcpy_gbs"] = memcpy_gbs()
    print(f"# {data['machine']['cpu']}, {data['machine']['cores']} cores; memcpy {data['memcpy_gbs']:.2f} GB/s",
          flush=True)
    order = {"loom": "loom", "openmpi": "mpi", "gloo": None}
    with tempfile.TemporaryDirectory() as workdir:
        for cname in args.configs:
            kind, n, per_host = CONFIGS[cname]
            try:
                host = LocalHost(n) if kind == "shm" else NamespaceHosts(n, per_host)
            except RuntimeError as e:
                data["skipped"].append(f"{cname}: {e}")
                print(f"# {cname} skipped: {e}", flush=True)
                continue
            try:
                if kind == "shm":
                    title, limit_name, limit = f"{n} ranks on one host (shared memory)", "memcpy", data["memcpy_gbs"]
                else:
                    title, limit_name, limit = (f"{n} hosts x {per_host} rank{'s' if per_host > 1 else ''} (network "
                                                f"namespaces, veth)", "iperf3", host.iperf3())
                cfg = dict(title=title, limit_name=limit_name, limit_gbs=limit, samples={s: {} for s in args.systems})
                data["configs"][cname] = cfg
                for rep in range(args.repeats):
                    for sysname in args.systems:
                        t0 = time.time()
                        pts = (run_gloo(args, host, args.collectives, workdir) if sysname == "gloo" else
                               run_perf_tools(args, host, order[sysname], args.collectives, workdir))
                        for (coll, size), v in pts.items():
                            cfg["samples"][sysname].setdefault(coll, {}).setdefault(str(size), []).append(v)
                        print(f"# {cname} repeat {rep + 1}/{args.repeats} {sysname}: {time.time() - t0:.0f} s",
                              flush=True)
            finally:
                host.close()
    data["elapsed_s"] = time.time() - t_start
    tables = build_tables(data)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(data, f, indent=1)
    write_markdown(data, tables, os.path.join(args.out, "report.md"))
    plot(data, tables, args.out)
    for cname, t in tables.items():
        g = t["geomean"]
        print(f"{cname}: geomean busbw ratio (>= 64 KB) loom/OpenMPI {g['openmpi'][0]:.2f}, "
              f"loom/Gloo {g['gloo'][0]:.2f} over {g['openmpi'][1]} points; CPU OpenMPI/loom "
              f"{g['cpu_openmpi'][0]:.2f}, Gloo/loom {g['cpu_gloo'][0]:.2f}")
    print(f"# {data['elapsed_s'] / 60:.1f} minutes; wrote {args.out}/report.md, results.json and "
          f"{', '.join(c + '.png' for c in tables)}")


if __name__ == "__main__":
    main()
