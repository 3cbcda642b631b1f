#!/usr/bin/env python3
"""Init at scale, as a test: N loom ranks start at once, every one finishes init and a first allreduce with
the right sum (perf/init_probe checks it), and nothing is left behind: no process, no shared-memory segment
of the job.  Times are printed, never asserted (performance targets live in perf/init_scale.py); the
timeout only catches a hang.

    init_at_scale.py INIT_PROBE processes N [--timeout S]   N processes, rendezvous through LOOM_COMM_ID
    init_at_scale.py INIT_PROBE threads N [--timeout S]     N ranks in one process (loomCommInitAll)
"""
import argparse
import os
import socket
import struct
import subprocess
import sys
import time


def fnv1a(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def segment_prefix(comm_id):
    """The /dev/shm prefix of a LOOM_COMM_ID job's segments: the id's secret is two FNV-1a hashes of the
    address (bootstrap/unique_id.cc), the communicator's key the hash of that secret, and every segment is
    named loom-<key>-... (transport/shm)."""
    h1 = fnv1a(comm_id.encode())
    h2 = fnv1a(comm_id.encode(), h1 ^ 0x9E3779B97F4A7C15)
    return "loom-%016x-" % fnv1a(struct.pack("<QQ", h1, h2))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes(probe, n, timeout):
    comm_id = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, LOOM_COMM_ID=comm_id, INIT_PROBE_NRANKS=str(n))
    start = time.monotonic()
    procs = [subprocess.Popen([probe, "loom"], env=dict(env, INIT_PROBE_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(n)]
    failures, inits = [], []
    deadline = start + timeout
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            for q in procs:
                q.wait()
            return [f"rank {r} still running after {timeout:.0f} s (a hang): every rank killed"]
        fields = out.split()
        if p.returncode != 0 or len(fields) < 6 or fields[0] != "init_s":
            failures.append(f"rank {r}: exit {p.returncode}: {out.strip()[-300:]}")
        else:
            inits.append(float(fields[1]))
    wall = time.monotonic() - start
    left = [e for e in os.listdir("/dev/shm") if e.startswith(segment_prefix(comm_id))]
    failures += [f"shared-memory segment left behind: /dev/shm/{e}" for e in left]
    if inits:
        print(f"{n} processes: slowest init {max(inits):.2f} s, job {wall:.2f} s")
    return failures


def threads(probe, n, timeout):
    start = time.monotonic()
    try:
        out = subprocess.run([probe, "threads", str(n)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [f"{n} in-process ranks still running after {timeout:.0f} s (a hang)"]
    fields = out.stdout.split()
    if out.returncode != 0 or len(fields) < 6 or fields[0] != "init_s":
        return [f"exit {out.returncode}: {(out.stdout + out.stderr).strip()[-500:]}"]
    print(f"{n} in-process ranks: slowest init {float(fields[1]):.2f} s, job {time.monotonic() - start:.2f} s")
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("probe")
    ap.add_argument("mode", choices=["processes", "threads"])
    ap.add_argument("n", type=int)
    ap.add_argument("--timeout", type=float, default=240)
    a = ap.parse_args()
    failures = (processes if a.mode == "processes" else threads)(a.probe, a.n, a.timeout)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
