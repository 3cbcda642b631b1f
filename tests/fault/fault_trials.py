#!/usr/bin/env python3
"""Peer-death trials: kill -9 one rank at a random point and check that every survivor fails cleanly.

Each trial starts NRANKS processes of fault_rank (one host, or spread over network-namespace hosts), picks
a victim rank and a random delay, and the victim SIGKILLs itself that long into the phase under test
(init, allreduce, destroy, or shrink: allreduce, after which the survivors shrink the communicator
without the victim and check 20 allreduces on the new one; group: as shrink, with the death inside a
stream of grouped sends and receives).  A trial passes when every survivor
  - ends on its own (no survivor is still running LOOM_TIMEOUT + 2 s after the death: those are killed
    and counted as hangs),
  - returns an error within LOOM_TIMEOUT + 2 s of the death whose message names the dead rank, or (init
    and destroy only) finishes normally because it was done before the death mattered,
and nothing is left behind: no /dev/shm segment of loom's, no rank process (and, for shrink, no
descriptor or thread once the survivor freed both communicators).

Network faults (--netfault, namespace hosts only): the ranks stream allreduces while the last host
  linkdown   has its link down for 2 s: with LOOM_TIMEOUT below 2 s every rank must fail within
             LOOM_TIMEOUT + 2 s of the cut; with a longer one every rank must finish with exact results
  blackhole  has all its traffic dropped (iptables): every rank must fail within LOOM_TIMEOUT + 2 s

usage: fault_trials.py RANK_BIN [--ranks 4] [--trials 5] [--phases init,allreduce,destroy,shrink,group] [--timeout 5]
                       [--hosts 0] [--net socket] [--netfault linkdown|blackhole] [--seed N] [--json FILE]
Prints one line per trial and a summary per phase (trials, survivors checked, failures, time from the death
to each survivor's error: median and max).  Exit status 0 when every trial passed.
"""
import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS_HOSTS_SH = os.path.join(HERE, "..", "net", "netns_hosts.sh")

# How long into each phase the victim may die (seconds): init takes tens of ms here, the allreduce
# stream runs until the death, destroy is a short meeting.
DELAY_RANGE = {"init": (0.0, 0.06), "allreduce": (0.0, 0.5), "destroy": (0.0, 0.001), "shrink": (0.0, 0.5),
               "group": (0.0, 0.5)}
SHRINK_PHASES = ("shrink", "group")


def loom_shm_entries():
    try:
        return {e for e in os.listdir("/dev/shm") if e.startswith("loom-")}
    except FileNotFoundError:
        return set()


_next_port = [0]


def netns_port(rng):
    """A port for LOOM_COMM_ID on namespace hosts: below the ephemeral range (32768 and up, where the
    ranks' own sockets live) and never the same twice in one campaign."""
    if _next_port[0] == 0:
        _next_port[0] = 20000 + rng.randrange(6000)
    _next_port[0] = 20000 + (_next_port[0] - 20000 + 1) % 12000
    return _next_port[0]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NamespaceHosts:
    """Hosts made by tests/net/netns_hosts.sh, kept while this object lives: the shell waits on our pipe
    and removes them (its EXIT trap) when the pipe closes, even if this script is killed."""

    def __init__(self, count):
        script = f'. "{NETNS_HOSTS_SH}"; netns_require; netns_make_hosts {count} >/dev/null; ' \
                 'echo "${NETNS_HOSTS[*]}"; echo "${NETNS_ADDRS[*]}"; echo "${NETNS_VETHS[*]}"; read _'
        self.proc = subprocess.Popen(["bash", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        names = self.proc.stdout.readline().split()
        addrs = self.proc.stdout.readline().split()
        self.veths = self.proc.stdout.readline().split()
        if len(names) != count or len(addrs) != count:
            self.close()
            print("skipped: cannot make network-namespace hosts (needs root and iproute2)")
            sys.exit(77)
        self.names, self.addrs = names, addrs

    def close(self):
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def read_report(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition(" ")
                out[key] = value
    except FileNotFoundError:
        pass
    return out


def run_trial(args, phase, hosts, trial_rng, workdir):
    n = args.ranks
    victim = trial_rng.randrange(n)
    lo, hi = DELAY_RANGE[phase]
    delay = trial_rng.uniform(lo, hi)
    if hosts:
        comm_id = f"{hosts.addrs[0]}:{netns_port(trial_rng)}"
    else:
        comm_id = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, LOOM_COMM_ID=comm_id, LOOM_TIMEOUT=str(args.timeout), LOOM_NET=args.net,
               FAULT_VICTIM=str(victim), FAULT_DELAY_US=str(int(delay * 1e6)), UCX_TLS="tcp")
    shm_before = loom_shm_entries()
    procs, reports = launch(args, phase, hosts, env, workdir)
    # Every survivor must be gone LOOM_TIMEOUT + 2 s after the death; init itself gets a few seconds more.
    deadline = time.monotonic() + 5 + delay + args.timeout + 2 + 1 + (15 if phase in SHRINK_PHASES else 0)
    codes = [None] * n
    while time.monotonic() < deadline and any(c is None for c in codes):
        for r, p in enumerate(procs):
            if codes[r] is None:
                codes[r] = p.poll()
        time.sleep(0.02)
    hung = []
    for r, p in enumerate(procs):
        if codes[r] is None:
            p.kill()
            p.wait()
            hung.append(r)
    stderr_of = {r: p.stderr.read() for r, p in enumerate(procs)}
    for p in procs:
        p.stderr.close()

    problems, detect, shrink_s, init_s, calls, reinit_s = [], [], [], [], [], []
    killed_at = read_report(reports[victim]).get("killed_at")
    if codes[victim] != -signal.SIGKILL:
        problems.append(f"the victim (rank {victim}) did not die by SIGKILL (status {codes[victim]})")
    for r in range(n):
        if r == victim:
            continue
        if r in hung:
            problems.append(f"rank {r} still running {args.timeout + 2} s after the death (hang)")
            continue
        if codes[r] != 0:
            problems.append(f"rank {r} ended with status {codes[r]}: {stderr_of[r].strip()[-300:]}")
            continue
        rep = read_report(reports[r])
        result = int(rep.get("result", "-1"))
        if phase in SHRINK_PHASES:
            problems += shrink_problems(r, rep)
            if rep.get("blamed") != str(victim):
                problems.append(f"rank {r}: loomCommGetFailedRank names rank {rep.get('blamed')}, not the victim {victim}")
            if "shrink_seconds" in rep and rep.get("shrink_result") == "0" and killed_at is not None:
                # From the death to a working communicator: the survivor's error, then its shrink (which
                # also waits for the survivors that learnt of the death last).
                shrink_s.append(float(rep["seconds"]) - float(killed_at) + float(rep["shrink_seconds"]))
                calls.append(float(rep["shrink_seconds"]))
                init_s.append(float(rep.get("init_seconds", "nan")))
            reinit = float(rep.get("reinit_seconds", "-1"))
            if reinit < 0 and rep.get("after_wrong") == "0":
                problems.append(f"rank {r}: the re-init of the survivors beside the shrink failed")
            elif reinit >= 0:
                reinit_s.append(reinit)
        if result == 0:
            if phase in ("allreduce",) + SHRINK_PHASES:
                problems.append(f"rank {r} reported success although rank {victim} died mid-stream")
            continue
        if killed_at is None:
            problems.append(f"rank {r} failed ({rep.get('message')}) but the victim never died")
            continue
        seconds = float(rep["seconds"]) - float(killed_at)
        detect.append(seconds)
        if seconds > args.timeout + 2:
            problems.append(f"rank {r} reported the failure {seconds:.2f} s after the death (limit {args.timeout + 2})")
        if f"rank {victim}" not in rep.get("message", ""):
            problems.append(f"rank {r}'s error does not name rank {victim}: {rep.get('message')}")
    # Only this job's segments count: tests running beside this one hold segments of their own while
    # their ranks connect.
    keys = {read_report(reports[r]).get(k) for r in range(n) for k in ("comm_key", "comm_key_new")} - {None}
    left = {e for e in loom_shm_entries() - shm_before if any(e.startswith(f"loom-{k}-") for k in keys)}
    if left:
        problems.append(f"shared-memory segments left behind: {sorted(left)}")
        for e in left:
            try:
                os.unlink(os.path.join("/dev/shm", e))
            except OSError:
                pass
    stray = subprocess.run(["pgrep", "-f", workdir], capture_output=True, text=True).stdout.split()
    if stray:
        problems.append(f"rank processes left behind: {stray}")
        for pid in stray:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    for f in reports:
        if os.path.exists(f):
            os.unlink(f)
    return {"phase": phase, "victim": victim, "delay_ms": round(delay * 1000, 3), "problems": problems,
            "detect_s": detect, "survivors": n - 1, "expect_error": True, "shrink_s": shrink_s, "init_s": init_s,
            "shrink_call_s": calls, "reinit_s": reinit_s,
            # The shrink of the survivor that learnt of the death last: nobody left to wait for, so
            # this is what shrinking itself costs (the others' include waiting for that one).
            "shrink_last_s": [min(calls)] if calls else []}


def shrink_problems(r, rep):
    """What a survivor of a shrink trial did wrong: the shrink failed, a later allreduce was wrong, or a
    descriptor or thread outlived both communicators."""
    out = []
    if rep.get("shrink_result") != "0":
        out.append(f"rank {r}: shrink failed ({rep.get('shrink_result')}): {rep.get('shrink_message')}")
        return out
    if rep.get("after_wrong") != "0":
        out.append(f"rank {r}: {rep.get('after_wrong')} wrong elements after the shrink {rep.get('after_message', '')}")
    for what in ("fds", "threads"):
        before, after = int(rep.get(f"{what}_before", -1)), int(rep.get(f"{what}_after", -1))
        if before < 0 or after < 0 or after > before:
            out.append(f"rank {r}: {what} {before} before init, {after} once both communicators were freed")
    return out


def launch(args, phase, hosts, env, workdir):
    n = args.ranks
    per_host = (n + len(hosts.names) - 1) // len(hosts.names) if hosts else n
    procs, reports = [], []
    for r in range(n):
        report = os.path.join(workdir, f"rank{r}.txt")
        reports.append(report)
        cmd = [args.rank_bin, phase, str(n), str(r), report]
        if hosts:
            cmd = ["ip", "netns", "exec", hosts.names[r // per_host]] + cmd
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    return procs, reports


def run_netfault_trial(args, hosts, trial_rng, workdir):
    """The ranks stream allreduces for a while; the last host's network breaks in the middle."""
    n, kind = args.ranks, args.netfault
    comm_id = f"{hosts.addrs[0]}:{netns_port(trial_rng)}"
    expect_error = kind == "blackhole" or args.timeout < 2
    stream_s = args.timeout + 5.0 if expect_error else 6.0  # outlasts the failure, or the outage
    env = dict(os.environ, LOOM_COMM_ID=comm_id, LOOM_TIMEOUT=str(args.timeout), LOOM_NET=args.net,
               FAULT_STREAM_S=str(stream_s), UCX_TLS="tcp")
    procs, reports = launch(args, "stream", hosts, env, workdir)
    time.sleep(1.0 + trial_rng.uniform(0, 0.5))  # init done, allreduces under way
    host, veth = hosts.names[-1], hosts.veths[-1]
    if kind == "linkdown":
        undo = ["ip", "-n", host, "link", "set", veth, "up"]
        subprocess.run(["ip", "-n", host, "link", "set", veth, "down"], check=True)
    else:
        undo = ["ip", "netns", "exec", host, "sh", "-c", "iptables -D INPUT -j DROP; iptables -D OUTPUT -j DROP"]
        subprocess.run(["ip", "netns", "exec", host, "sh", "-c", "iptables -A INPUT -j DROP && iptables -A OUTPUT -j DROP"],
                       check=True)
    fault_at = time.monotonic()
    restored = False
    deadline = fault_at + stream_s + args.timeout + 10
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        if kind == "linkdown" and not restored and time.monotonic() > fault_at + 2.0:
            subprocess.run(undo, check=True)
            restored = True
        time.sleep(0.02)
    if not restored:
        subprocess.run(undo)
    problems, detect = [], []
    for r, p in enumerate(procs):
        if p.poll() is None:
            p.kill()
            p.wait()
            problems.append(f"rank {r} still running long after the fault (hang)")
            continue
        err = p.stderr.read().strip()
        rep = read_report(reports[r])
        result = int(rep.get("result", "-1"))
        if p.returncode != 0 or "seconds" not in rep:
            problems.append(f"rank {r} ended with status {p.returncode}: {err[-300:]}")
        elif expect_error and result == 0:
            problems.append(f"rank {r} reported success through a {kind} longer than LOOM_TIMEOUT")
        elif expect_error:
            seconds = float(rep["seconds"]) - fault_at
            detect.append(seconds)
            if seconds > args.timeout + 2:
                problems.append(f"rank {r} reported the failure {seconds:.2f} s after the fault (limit {args.timeout + 2})")
        elif result != 0:
            problems.append(f"rank {r} failed although the link came back within LOOM_TIMEOUT: {rep.get('message')}")
        else:
            detect.append(float(rep.get("longest_call", "0")))  # the stall the outage caused
    for p in procs:
        p.stderr.close()
    for f in reports:
        if os.path.exists(f):
            os.unlink(f)
    return {"phase": kind, "victim": f"host {len(hosts.names) - 1}", "delay_ms": 0, "problems": problems,
            "detect_s": detect, "survivors": n, "expect_error": expect_error}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rank_bin")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--trials", type=int, default=5, help="trials per phase")
    ap.add_argument("--phases", default="init,allreduce,destroy,shrink,group")
    ap.add_argument("--timeout", type=int, default=5, help="LOOM_TIMEOUT for the ranks, seconds")
    ap.add_argument("--hosts", type=int, default=0, help="network-namespace hosts (0: all ranks on this host)")
    ap.add_argument("--net", default="socket")
    ap.add_argument("--netfault", choices=["linkdown", "blackhole"], help="break the network instead of killing a rank")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", help="write every trial's outcome here")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"fault trials: {args.ranks} ranks, {args.hosts or 1} host(s), LOOM_TIMEOUT={args.timeout}, seed {seed}")
    rng = random.Random(seed)
    if args.netfault and args.hosts < 2:
        ap.error("--netfault needs --hosts 2 or more")
    if args.netfault:
        args.phases = args.netfault
    hosts = NamespaceHosts(args.hosts) if args.hosts > 0 else None
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="loom-fault-") as workdir:
            for phase in args.phases.split(","):
                for t in range(args.trials):
                    trial_rng = random.Random(rng.randrange(1 << 30))
                    res = (run_netfault_trial(args, hosts, trial_rng, workdir) if args.netfault
                           else run_trial(args, phase, hosts, trial_rng, workdir))
                    results.append(res)
                    status = "ok" if not res["problems"] else "FAIL: " + "; ".join(res["problems"])
                    detect = ", ".join(f"{s:.2f}" for s in res["detect_s"])
                    what = (f"{res['victim']} cut off" if args.netfault
                            else f"rank {res['victim']} killed {res['delay_ms']:.1f} ms in")
                    times = "longest allreduce" if args.netfault and not res["expect_error"] else "ranks failed after"
                    print(f"  {phase} trial {t}: {what}; {times} [{detect}] s; {status}", flush=True)
    finally:
        if hosts:
            hosts.close()
    failed = 0
    print("phase      trials  survivors  failed trials  errors seen  detect median  detect max")
    for phase in args.phases.split(","):
        rs = [r for r in results if r["phase"] == phase]
        d = [s for r in rs for s in r["detect_s"]]
        bad = sum(1 for r in rs if r["problems"])
        failed += bad
        med = f"{statistics.median(d):.2f} s" if d else "-"
        mx = f"{max(d):.2f} s" if d else "-"
        print(f"{phase:<10} {len(rs):>6}  {sum(r['survivors'] for r in rs):>9}  {bad:>13}  {len(d):>11}  "
              f"{med:>13}  {mx:>10}")
        sh = [s for r in rs for s in r.get("shrink_s", [])]
        ini = [s for r in rs for s in r.get("init_s", [])]
        call = [s for r in rs for s in r.get("shrink_call_s", [])]
        last = [s for r in rs for s in r.get("shrink_last_s", [])]
        reinit = [s for r in rs for s in r.get("reinit_s", [])]

        def spread(v):
            return f"median {statistics.median(v):.3f} s, max {max(v):.3f} s" if v else "-"
        if sh:
            print(f"{'':<10} SIGKILL to a working shrunk communicator (each survivor, to its first allreduce): "
                  f"{spread(sh)} over {len(sh)}")
            print(f"{'':<10} the shrink call (each survivor, to its first allreduce): {spread(call)}; for the "
                  f"survivor that learnt last: {spread(last)}")
            print(f"{'':<10} a re-init of the survivors from a new unique id (to its first allreduce): "
                  f"{spread(reinit)}; the job's init at {args.ranks} ranks: {spread(ini)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": seed, "ranks": args.ranks, "hosts": args.hosts, "timeout": args.timeout,
                       "trials": results}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
